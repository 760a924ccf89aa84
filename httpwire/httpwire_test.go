package httpwire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/httpwire"
	"github.com/adpnode/adpnode/node"
)

// TestEveryCodeHasAStatus: every Code constant declared in adp/errors.go
// is in the one table, with a 4xx or 5xx status.
func TestEveryCodeHasAStatus(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../adp/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	table := httpwire.Codes()
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				code, _ := strconv.Unquote(lit.Value)
				n++
				st, ok := table[adp.Code(code)]
				if !ok {
					t.Errorf("%s (%q) has no HTTP status", name.Name, code)
				} else if st < 400 || st > 599 {
					t.Errorf("%s maps to %d", name.Name, st)
				}
			}
		}
	}
	if n < 30 {
		t.Fatalf("found only %d codes in adp/errors.go", n)
	}
	if len(table) != n {
		t.Errorf("the table has %d codes, adp/errors.go declares %d: a code is mapped outside the code table", len(table), n)
	}
	for code, want := range map[adp.Code]int{adp.CodeArchiveUnavailable: 409, adp.CodeRelayFailed: 502, adp.CodeRoomHeadMismatch: 409,
		adp.CodeInvalidToken: 401, adp.CodeRateLimited: 429, "no_such_code": 500} {
		if got := httpwire.StatusOf(code); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, want)
		}
	}
	table[adp.CodeInvalidEvent] = 200
	if httpwire.StatusOf(adp.CodeInvalidEvent) != 400 {
		t.Fatal("Codes returned the table itself")
	}
}

type body struct {
	Error struct {
		Code    adp.Code       `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

func decode(t *testing.T, a httpwire.Answer) body {
	t.Helper()
	var b body
	dec := json.NewDecoder(strings.NewReader(string(a.Body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("error body %s: %v", a.Body, err)
	}
	return b
}

func TestErrorShape(t *testing.T) {
	a := httpwire.Error(fmt.Errorf("wrapped: %w", adp.Reason(adp.CodeInvalidEvent, "bad_field", "payload <b>&</b>")))
	b := decode(t, a)
	if a.Status != 400 || a.Code != adp.CodeInvalidEvent || b.Error.Code != adp.CodeInvalidEvent || b.Error.Data["reason"] != "bad_field" {
		t.Fatalf("answer %d %s", a.Status, a.Body)
	}
	if !strings.Contains(string(a.Body), "payload <b>&</b>") {
		t.Fatalf("message was HTML-escaped: %s", a.Body)
	}
	// No data and no message: data is {}, message is the code.
	b = decode(t, httpwire.Error(&adp.Error{Code: adp.CodeRoomNotFound}))
	if b.Error.Data == nil || len(b.Error.Data) != 0 || b.Error.Message != "room_not_found" {
		t.Fatalf("body %+v", b)
	}
}

// TestErrorHidesInternals: a foreign error (say, a storage failure naming a
// path) is answered as a bare internal_error.
func TestErrorHidesInternals(t *testing.T) {
	for _, err := range []error{errors.New("badger: open /var/lib/adpnode/000001.vlog: permission denied"),
		&adp.Error{Code: adp.CodeInternal, Message: "secret detail", Data: map[string]any{"path": "/etc"}}} {
		a := httpwire.Error(err)
		b := decode(t, a)
		if a.Status != 500 || b.Error.Code != adp.CodeInternal || strings.Contains(string(a.Body), "/") || len(b.Error.Data) != 0 {
			t.Fatalf("internal error described to the client: %s", a.Body)
		}
	}
}

func TestErrorHeaders(t *testing.T) {
	for _, c := range []struct {
		err    error
		header string
		want   string
	}{
		{adp.Errorf(adp.CodeRateLimited, "slow down").WithData("retry_after_ms", int64(1001)), "Retry-After", "2"},
		{adp.Errorf(adp.CodeRateLimited, "slow down").WithData("retry_after_ms", int64(1000)), "Retry-After", "1"},
		{adp.Errorf(adp.CodeRateLimited, "slow down"), "Retry-After", ""},
		{adp.Errorf(adp.CodeUnavailable, "busy"), "Retry-After", "1"},
		{&node.NonceError{Err: adp.Errorf(adp.CodeNonceNotGreater, "nonce"), MaxSeenNonce: 42}, "Max-Seen-Nonce", "42"},
	} {
		a := httpwire.Error(c.err)
		if got := a.Header[c.header]; got != c.want {
			t.Errorf("%v: %s = %q, want %q", c.err, c.header, got, c.want)
		}
	}
}

func TestSubmitAnswers(t *testing.T) {
	rec := &record.Record{RoomID: "d8ftedhpqhsusbg001tg", Seq: 1, Hash: "h", ReceivedAt: 5, Envelope: json.RawMessage(`{}`)}
	a := httpwire.Submit(&hostport.Result{Record: rec, Created: true, Status: "active", URL: "http://127.0.0.1/v1/rooms/" + rec.RoomID, MaxSeenNonce: 3}, nil)
	var created map[string]any
	if err := json.Unmarshal(a.Body, &created); err != nil {
		t.Fatal(err)
	}
	if a.Status != 201 || a.Header["Location"] != created["url"] || created["id"] != rec.RoomID || created["pre_hash"] != nil || a.Header["Max-Seen-Nonce"] != "3" {
		t.Fatalf("creation answer %d %v %s", a.Status, a.Header, a.Body)
	}
	a = httpwire.Submit(&hostport.Result{Record: rec, Resubmitted: true}, nil)
	want, _ := rec.MarshalJSON()
	if a.Status != 200 || string(a.Body) != string(want)+"\n" {
		t.Fatalf("resubmission answer %d %s", a.Status, a.Body)
	}
	if a := httpwire.Submit(nil, adp.Errorf(adp.CodeRoomEnded, "ended")); a.Status != 409 || decode(t, a).Error.Code != adp.CodeRoomEnded {
		t.Fatalf("error answer %d %s", a.Status, a.Body)
	}
}

func TestAnswerWrite(t *testing.T) {
	w := httptest.NewRecorder()
	httpwire.Error(adp.Errorf(adp.CodeUnavailable, "busy")).Write(w)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("wrote %d %v", w.Code, w.Header())
	}
	var b body
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Error.Code != adp.CodeUnavailable {
		t.Fatalf("body %s: %v", w.Body, err)
	}
}

// TestMarshalUnencodable: a value encoding/json cannot encode still gives
// a well-formed internal error body, not a half-written one.
func TestMarshalUnencodable(t *testing.T) {
	b := httpwire.Marshal(map[string]any{"f": func() {}})
	var v body
	if err := json.Unmarshal(b, &v); err != nil || v.Error.Code != adp.CodeInternal {
		t.Fatalf("Marshal of a func: %s (%v)", b, err)
	}
}
