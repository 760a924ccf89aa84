package types

import (
	"errors"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

// wantCode asserts that err is an *adp.Error with the given code (or nil when
// code is ""), and, when reason is not empty, that data.reason matches.
func wantCode(t *testing.T, err error, code adp.Code, reason string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ae *adp.Error
	if !errors.As(err, &ae) {
		t.Fatalf("want *adp.Error %s, got %T %v", code, err, err)
	}
	if ae.Code != code {
		t.Fatalf("want code %s, got %s (%v)", code, ae.Code, err)
	}
	if reason != "" && ae.Data["reason"] != reason {
		t.Fatalf("want data.reason %q, got %v (%v)", reason, ae.Data["reason"], err)
	}
}

const eventID = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // 43 base64url chars
const agentID = "did:agent:" + eventID

func mustPack(t testing.TB, id string) *Pack {
	t.Helper()
	p, ok := RegisteredPack(id)
	if !ok {
		t.Fatalf("registered pack %s missing", id)
	}
	return p
}

func mustType(t testing.TB, name string) *Definition {
	t.Helper()
	for _, id := range RegisteredPackIDs() {
		if d, ok := mustPack(t, id).Type(name); ok {
			return d
		}
	}
	t.Fatalf("no registered type %s", name)
	return nil
}
