//go:build e2e

package mirror_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/mirror"
)

// Hostile hosts behind a Room URL: one that never answers, one that
// answers an endless body that is not a room, one that answers a room
// resource of a private room. Each room target is refused with its reason
// within the probe's 5 s bound, and nothing is stored.
func TestRoomTargetHostileHosts(t *testing.T) {
	p := fedtest.Network(t, 1, nil, fedtest.Options{Mirror: true})[0]
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 1<<12 && r.Context().Err() == nil; i++ { // up to 256 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer endless.Close()
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"visibility":"private"}`))
	}))
	defer private.Close()

	const id = "/v1/rooms/dc7k33im85toodr6t3bg"
	for _, c := range []struct {
		origin string
		code   adp.Code
		reason string
	}{
		{hang.URL, adp.CodeUnavailable, "host_unreachable"},
		{endless.URL, adp.CodeUnavailable, "not_a_room"},
		{private.URL, adp.CodePermissionDenied, "room_not_public"},
	} {
		_, err := p.Mir.AddTarget(mirror.TargetRoom, c.origin+id)
		var ae *adp.Error
		if !errors.As(err, &ae) || ae.Code != c.code || ae.Data["reason"] != c.reason {
			t.Errorf("%s: %v (want %s, %s)", c.origin, err, c.code, c.reason)
		}
	}
	if n := len(p.Mir.Targets()); n != 0 {
		t.Fatalf("%d refused targets stored", n)
	}
}
