package hostapi_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/tlog"
)

// logHost is a node with a host log and a second server that serves it.
func logHost(t *testing.T) (*adptest.Host, *tlog.Log, string) {
	t.Helper()
	dir := t.TempDir()
	h := adptest.StartHost(t, node.Config{DataDir: dir, Rates: highRates()})
	_, key, _ := ed25519.GenerateKey(nil)
	l, err := tlog.Open(tlog.Config{Dir: filepath.Join(dir, tlog.Dir), DB: h.Node.DB(), Key: key,
		Origin: tlogproof.Origin(h.Node.Host()), Source: h.Node, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	h.Node.Listen(func(e hostport.Event) {
		if e.Kind == hostport.EventRecord {
			leaf, _ := tlogproof.RecordLeaf(e.Record.Hash)
			l.Append(tlog.Leaf{RoomID: e.RoomID, Seq: e.Record.Seq, Hash: leaf})
		}
	})
	srv := httptest.NewServer(hostapi.New(h.Node, hostapi.Options{HostLog: l}).Handler())
	t.Cleanup(srv.Close)
	return h, l, srv.URL
}

// TestHostLogEndToEnd: records written over HTTP are covered by the
// published checkpoint; discovery names the log; every record's inclusion
// proof fetched over HTTP verifies offline with the published verifier
// key; tiles are cacheable; bad queries get the spec's error shape.
func TestHostLogEndToEnd(t *testing.T) {
	h, _, logURL := logHost(t)
	a := adptest.NewAgent("alice")
	var hashes []string
	for r := range 3 {
		id := h.CreateRoom(t, a, h.RoomPayload("private"))
		for i := range 5 + r {
			h.MustPost(t, a, id, "message.create", msg("m"+fmtSeq(int64(i))))
		}
		hs, err := h.Node.RecordHashes(id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, rh := range hs {
			hashes = append(hashes, tlogproof.EncodeRecordHash(rh))
		}
	}
	if len(hashes) < 21 {
		t.Fatalf("read %d records", len(hashes))
	}

	disc := adptest.Do(t, http.MethodGet, logURL+"/.well-known/agent-discourse", "", nil)
	var d struct {
		Log struct {
			Origin, URL, Inclusion string
			VerifierKey            string `json:"verifier_key"`
		} `json:"log"`
	}
	disc.JSON(&d)
	if d.Log.Origin != h.Node.Host()+"/adp-log" || !strings.HasSuffix(d.Log.URL, "/tlog/") || d.Log.VerifierKey == "" {
		t.Fatalf("discovery log: %+v", d.Log)
	}
	v, err := note.NewVerifier(d.Log.VerifierKey)
	if err != nil {
		t.Fatal(err)
	}

	var cp tlogproof.Checkpoint
	eventually(t, 30*time.Second, "checkpoint covers every record", func() bool {
		r := adptest.Do(t, http.MethodGet, logURL+"/tlog/checkpoint", "", nil)
		if r.Status != http.StatusOK {
			return false
		}
		if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=1") {
			t.Fatalf("checkpoint Cache-Control %q", cc)
		}
		cp, _, err = tlogproof.Open(r.Body, v)
		if err != nil {
			t.Fatal(err)
		}
		return cp.Size == uint64(len(hashes))
	})
	for _, hash := range hashes {
		r := adptest.Do(t, http.MethodGet, logURL+"/v1/log/inclusion?record_hash="+hash, "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("inclusion: %s", r)
		}
		var rp tlogproof.RecordProof
		if err := json.Unmarshal(r.Body, &rp); err != nil {
			t.Fatal(err)
		}
		if _, err := tlogproof.VerifyRecord(rp, v); err != nil {
			t.Fatalf("record %s: %v", hash, err)
		}
	}
	tile := adptest.Do(t, http.MethodGet, logURL+"/tlog/tile/0/000.p/"+fmtSeq(int64(len(hashes))), "", nil)
	if tile.Status != http.StatusOK || len(tile.Body) != 32*len(hashes) || !strings.Contains(tile.Header.Get("Cache-Control"), "max-age=60") {
		t.Fatalf("partial tile: %d, %d bytes, %q", tile.Status, len(tile.Body), tile.Header.Get("Cache-Control"))
	}
	cons := adptest.Do(t, http.MethodGet, logURL+"/v1/log/consistency?size1=3", "", nil)
	var cproof tlogproof.ConsistencyProof
	cons.JSON(&cproof)
	if cons.Status != http.StatusOK || cproof.Size2 != cp.Size {
		t.Fatalf("consistency: %s", cons)
	}

	for path, code := range map[string]adp.Code{
		"/v1/log/inclusion":                                                     adp.CodeInvalidRequest,
		"/v1/log/inclusion?record_hash=abc":                                     adp.CodeInvalidRequest,
		"/v1/log/inclusion?record_hash=" + hashes[0] + "&tree_size=x":           adp.CodeInvalidRequest,
		"/v1/log/inclusion?record_hash=" + hashes[0] + "&tree_size=0":           adp.CodeInvalidRequest,
		"/v1/log/inclusion?record_hash=" + hashes[0] + "&tree_size=99999999999": adp.CodeInvalidRequest,
		"/v1/log/inclusion?record_hash=" + strings.Repeat("A", 43):              adp.CodeNotFound,
		"/v1/log/consistency":                                                   adp.CodeInvalidRequest,
		"/v1/log/consistency?size1=-1":                                          adp.CodeInvalidRequest,
		"/v1/log/consistency?size1=5&size2=2":                                   adp.CodeInvalidRequest,
		"/v1/log/consistency?size1=1&size2=18446744073709551615":                adp.CodeInvalidRequest,
		"/tlog/tile/0/../../../etc/passwd":                                      adp.CodeNotFound,
		"/tlog/tile/99/000":                                                     adp.CodeNotFound,
	} {
		r := adptest.Do(t, http.MethodGet, logURL+path, "", nil)
		expectCode(t, r, code)
	}
	// Without a log the routes answer not_found.
	plain := adptest.Do(t, http.MethodGet, h.URL+"/tlog/checkpoint", "", nil)
	expectCode(t, plain, adp.CodeNotFound)
}
