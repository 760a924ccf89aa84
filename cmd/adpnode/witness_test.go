package main

import (
	"crypto/ed25519"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// serve --witness URL=vkey: the host submits its log's checkpoints to the
// witness, and GET /tlog/checkpoint carries the witness's cosignature
// line after the host's signature; discovery lists the witness key. A
// malformed --witness is a usage error.
func TestServeWitness(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	hostKey, err := federation.LoadOrCreateKey(data)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	origin := tlogproof.Origin(addr)
	hv, _ := tlogproof.Verifier(origin, hostKey.Public().(ed25519.PublicKey))

	db, err := badger.Open(node.BadgerOptions(filepath.Join(dir, "witness")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, wkey, _ := ed25519.GenerateKey(nil)
	cs, _ := tlogwitness.NewCosigner("witness.test/w", wkey)
	w, err := witness.New(witness.Config{DB: db, Cosigner: cs, Logs: func(o string) (tlogwitness.Log, bool) {
		return tlogwitness.Log{Origin: origin, Verifier: hv}, o == origin
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/w/add-checkpoint", w)
	ws := httptest.NewServer(mux)
	defer ws.Close()

	for _, bad := range []string{"nokey", ws.URL + "/w=" + "not-a-key"} {
		cmd := serveCmd()
		cmd.Flags().Parse([]string{"--listen", addr, "--data", data, "--no-federation", "--witness", bad})
		if _, err := resolveServe(cmd); err == nil || exitCode(err) != exitUsage {
			t.Errorf("--witness %q: %v", bad, err)
		}
	}

	s := startServe(t, nil, "--listen", addr, "--data", data, "--no-federation", "--witness", ws.URL+"/w="+cs.VerifierKey())
	defer s.close()
	h := &adptest.Host{URL: "http://" + addr, Clock: adptest.NewClock()}
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload(room.Public))
	for i := 0; i < 3; i++ {
		h.MustPost(t, alice, id, "message.create", map[string]any{"content_type": "text/plain", "content": "hi"})
	}
	cv, _ := tlogwitness.NewCosignatureVerifier(cs.VerifierKey())
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(h.URL + "/tlog/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n, err := note.Open(b, note.VerifierList(hv, cv)); err == nil && len(n.Sigs) == 2 && strings.Contains(n.Text, "\n4\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the checkpoint never carried the witness's cosignature of all 4 records:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := adptest.Do(t, http.MethodGet, h.URL+"/.well-known/agent-discourse", "", nil)
	if !strings.Contains(string(r.Body), cs.VerifierKey()) {
		t.Fatalf("discovery does not list the witness key: %s", r.Body)
	}
	if st, _ := w.State(origin); st == nil || st.Size != 4 {
		t.Fatalf("witness state %+v", st)
	}
}
