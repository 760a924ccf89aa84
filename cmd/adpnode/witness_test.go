//go:build e2e

package main

import (
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
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
	testwait.Until(t, 30*time.Second, "the checkpoint carrying the witness's cosignature of all 4 records", func() bool {
		resp, err := http.Get(h.URL + "/tlog/checkpoint")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		n, err := note.Open(b, note.VerifierList(hv, cv))
		return err == nil && len(n.Sigs) == 2 && strings.Contains(n.Text, "\n4\n")
	})
	r := adptest.Do(t, http.MethodGet, h.URL+"/.well-known/agent-discourse", "", nil)
	if !strings.Contains(string(r.Body), cs.VerifierKey()) {
		t.Fatalf("discovery does not list the witness key: %s", r.Body)
	}
	if st, _ := w.State(origin); st == nil || st.Size != 4 {
		t.Fatalf("witness state %+v", st)
	}
}

// Mirrors witness the hosts they mirror over the open protocol: B mirrors
// A and announces its witness on federation; A checks B's discovery
// document, submits its checkpoints, and serves B's cosignature/v1 line on
// GET /tlog/checkpoint; A's archive of an ended room carries the line in
// extra.host_log (with B's key in witnesses), which archive.Verify and
// `adpnode verify` check offline. The cosignature survives A's restart on
// the same data dir even with federation off (nothing re-submits then),
// and a doctored line fails verification.
func TestMirrorsWitnessTheHostLog(t *testing.T) {
	root := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	start := func(name, listen string, fs fedSettings) *stack {
		cfg := node.Config{PublicURL: "http://" + listen, DataDir: filepath.Join(root, name), Log: log, Rates: node.NoRates()}
		s, err := startStack(cfg, listen, fs, log)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return s
	}
	fed := func(peers ...string) fedSettings {
		return fedSettings{enabled: true, interval: time.Second, allowPrivatePeers: true, witnessAnnounce: 100 * time.Millisecond,
			listen: []string{"/ip4/127.0.0.1/tcp/0"}, peers: peers}
	}
	aAddr := freeAddr(t)
	a := start("a", aAddr, fed())
	aOpen := true
	defer func() {
		if aOpen {
			a.close()
		}
	}()
	b := start("b", freeAddr(t), fed(a.fed.Addrs()[0]))
	defer b.close()
	if _, err := b.mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	bWitness := b.mir.Witness()
	bv, err := tlogwitness.NewCosignatureVerifier(bWitness.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}

	h := &adptest.Host{URL: "http://" + aAddr, Clock: adptest.NewClock()}
	alice := adptest.NewAgent("alice")
	id := h.CreateRoom(t, alice, h.RoomPayload(room.Public))
	for i := 0; i < 3; i++ {
		h.MustPost(t, alice, id, "message.create", map[string]any{"content_type": "text/plain", "content": "hi"})
	}
	h.MustPost(t, alice, id, "room.close", map[string]any{"reason": "done"})
	hv := a.tl.Verifier()

	var arch *archive.Archive
	var doc []byte
	testwait.Until(t, 60*time.Second, "A's archive carrying B's cosignature", func() bool {
		doc = adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id+"/archive", "", nil).Body
		var err error
		if arch, err = archive.ParseJSON(doc); err != nil {
			t.Fatalf("archive: %v\n%s", err, doc)
		}
		rep, err := archive.Verify(arch, archive.Options{})
		if err != nil {
			t.Fatalf("A's archive does not verify: %v", err)
		}
		return len(rep.Witnesses) == 1 && rep.Witnesses[0].VKey == bv.Key()
	})
	resp := adptest.Do(t, http.MethodGet, h.URL+"/tlog/checkpoint", "", nil)
	if n, err := note.Open(resp.Body, note.VerifierList(hv, bv)); err != nil || len(n.Sigs) != 2 {
		t.Fatalf("GET /tlog/checkpoint does not carry B's cosignature: %v\n%s", err, resp.Body)
	}
	if st := a.sub.Stats(); len(st) != 1 || !st[0].Discovered || st[0].URL != b.n.Origin()+"/v1/witness" {
		t.Fatalf("A's witnesses: %+v", st)
	}
	disc := adptest.Do(t, http.MethodGet, h.URL+"/.well-known/agent-discourse", "", nil)
	if !strings.Contains(string(disc.Body), bv.Key()) {
		t.Fatalf("A's discovery does not list B's witness key: %s", disc.Body)
	}
	// One record's proof from the API carries the cosigned checkpoint too.
	incl := adptest.Do(t, http.MethodGet, h.URL+"/v1/log/inclusion?record_hash="+arch.Manifest.LastHash, "", nil)
	var pf tlogproof.File
	if err := json.Unmarshal(incl.Body, &pf); err != nil || len(pf.Witnesses) != 1 || pf.Witnesses[0] != bv.Key() {
		t.Fatalf("GET /v1/log/inclusion: %v %s", err, incl.Body)
	}
	if _, err := tlogwitness.VerifyCosigned([]byte(pf.Checkpoint), hv, pf.Witnesses); err != nil {
		t.Fatalf("the inclusion answer's cosignature: %v", err)
	}
	file := filepath.Join(root, "archive.json")
	os.WriteFile(file, doc, 0o600)
	if out := mustCLI(t, "verify", file); !strings.Contains(out, ", 1 witness") || !strings.Contains(out, "witness "+bv.Name()+" cosigned") {
		t.Fatalf("adpnode verify: %s", out)
	}

	// A doctored cosignature line fails.
	var hl tlogproof.File
	raw, _ := json.Marshal(arch.Manifest.Extra["host_log"])
	if err := json.Unmarshal(raw, &hl); err != nil || len(hl.Witnesses) != 1 {
		t.Fatalf("extra.host_log: %v %s", err, raw)
	}
	lines := strings.SplitAfter(hl.Checkpoint, "\n")
	last := lines[len(lines)-2]
	sig := []byte(last[strings.LastIndexByte(last, ' ')+1 : len(last)-1])
	sig[len(sig)-5] ^= 'A' ^ 'B'
	bad := hl
	bad.Checkpoint = strings.Join(lines[:len(lines)-2], "") + last[:strings.LastIndexByte(last, ' ')+1] + string(sig) + "\n"
	arch.Manifest.Extra["host_log"] = bad
	if _, err := archive.Verify(arch, archive.Options{}); err == nil {
		t.Fatal("an archive with a doctored cosignature verifies")
	}
	// A witness key listed without its line fails too.
	_, other, _ := ed25519.GenerateKey(nil)
	ocs, _ := tlogwitness.NewCosigner("other.test/w", other)
	bad = hl
	bad.Witnesses = append(bad.Witnesses, ocs.VerifierKey())
	arch.Manifest.Extra["host_log"] = bad
	if _, err := archive.Verify(arch, archive.Options{}); err == nil {
		t.Fatal("an archive listing a witness without its cosignature verifies")
	}

	// Restart A without federation: no witness submits, the stored
	// cosignature is still served.
	a.close()
	noFed := fedSettings{}
	a = start("a", aAddr, noFed)
	doc = adptest.Do(t, http.MethodGet, h.URL+"/v1/rooms/"+id+"/archive", "", nil).Body
	if arch, err = archive.ParseJSON(doc); err != nil {
		t.Fatal(err)
	}
	if rep, err := archive.Verify(arch, archive.Options{}); err != nil || len(rep.Witnesses) != 1 || rep.Witnesses[0].VKey != bv.Key() {
		t.Fatalf("after A's restart: %v %+v", err, rep)
	}
}
