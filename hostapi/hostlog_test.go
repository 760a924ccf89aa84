//go:build e2e

package hostapi_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// logHost is a durable node with the host log as serve runs it (the
// composition root's Config.HostLog), and the URL that serves the log:
// the node's own.
func logHost(t *testing.T) (*adptest.Host, *hostlog.Log, string) {
	t.Helper()
	h := adptest.StartHostLogged(t, node.Config{Rates: highRates()})
	return h, h.HostLog, h.URL
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
	testwait.Until(t, 30*time.Second, "checkpoint covers every record", func() bool {
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
	plain := adptest.Do(t, http.MethodGet, adptest.StartHost(t, node.Config{}).URL+"/tlog/checkpoint", "", nil)
	expectCode(t, plain, adp.CodeNotFound)
}

// TestHostLogZeroSizeRefused protects: an explicit tree size of zero names
// no tree, so GET /v1/log/consistency?size2=0 is refused exactly as
// /v1/log/inclusion?tree_size=0 is (invalid_request, reason
// bad_tree_size, the parameter named), not read as "the latest
// checkpoint"; size2 left out still means the latest.
func TestHostLogZeroSizeRefused(t *testing.T) {
	h, _, logURL := logHost(t)
	a := adptest.NewAgent("alice")
	id := h.CreateRoom(t, a, h.RoomPayload("public"))
	h.MustPost(t, a, id, "message.create", msg("m"))
	hs, err := h.Node.RecordHashes(id, 0, 10)
	if err != nil || len(hs) < 2 {
		t.Fatalf("record hashes: %d, %v", len(hs), err)
	}
	testwait.Until(t, 30*time.Second, "a checkpoint covers the room", func() bool {
		r := adptest.Do(t, http.MethodGet, logURL+"/v1/log/consistency?size1=1", "", nil)
		var p tlogproof.ConsistencyProof
		return r.Status == http.StatusOK && r.JSON(&p) == nil && p.Size2 >= uint64(len(hs))
	})
	for path, param := range map[string]string{
		"/v1/log/inclusion?record_hash=" + tlogproof.EncodeRecordHash(hs[0]) + "&tree_size=0": "tree_size",
		"/v1/log/consistency?size1=0&size2=0":                                                 "size2",
		"/v1/log/consistency?size1=1&size2=0":                                                 "size2",
	} {
		r := adptest.Do(t, http.MethodGet, logURL+path, "", nil)
		expectCode(t, r, adp.CodeInvalidRequest)
		if d := r.ErrorData(); d["reason"] != "bad_tree_size" || d["param"] != param {
			t.Errorf("%s: want reason bad_tree_size for %s, got %s", path, param, r)
		}
	}
}

// TestHostLogInclusionBatch: POST /v1/log/inclusions answers, in order,
// the proof of every record asked for against one checkpoint, which
// verifies offline with the published key, and not_in_log for a hash the
// log does not hold; hostile bodies get the spec's error shape; a batch
// is capped; after a restart on the same data dir the same records prove
// against the reopened log.
func TestHostLogInclusionBatch(t *testing.T) {
	spec := loadSpec(t)
	dir := t.TempDir()
	h := adptest.StartHostAt(t, node.Config{DataDir: dir, Rates: highRates()}, adptest.NewClock())
	pub, key, _ := ed25519.GenerateKey(nil)
	lv := startLogViewer(t, h, key, witness.Target{})
	a := adptest.NewAgent("alice")
	var hashes []string
	for r := range 2 {
		id := lv.h.CreateRoom(t, a, lv.h.RoomPayload([]string{"public", "private"}[r]))
		for i := range 6 {
			lv.h.MustPost(t, a, id, "message.create", msg("m"+fmtSeq(int64(i))))
		}
		hs, err := lv.h.Node.RecordHashes(id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, rh := range hs {
			hashes = append(hashes, tlogproof.EncodeRecordHash(rh))
		}
	}
	lv.covered(t, uint64(len(hashes)))
	v, err := tlogproof.Verifier(tlogproof.Origin(lv.h.Node.Host()), pub)
	if err != nil {
		t.Fatal(err)
	}
	unknown := tlogproof.EncodeRecordHash([32]byte{7})
	post := func(url string, body any) *adptest.Response {
		t.Helper()
		b, _ := json.Marshal(body)
		return adptest.Do(t, http.MethodPost, url+"/v1/log/inclusions", "", b)
	}
	check := func(url string) tlogproof.Checkpoint {
		t.Helper()
		asked := append([]string{hashes[3], unknown}, hashes...)
		r := post(url, map[string]any{"record_hashes": asked})
		if r.Status != http.StatusOK || r.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("batch: %s", r)
		}
		spec.check(t, "postLogInclusions", r)
		var ans hostapi.InclusionBatch
		if err := r.JSON(&ans); err != nil {
			t.Fatal(err)
		}
		cp, _, err := tlogproof.Open([]byte(ans.Checkpoint), v)
		if err != nil || ans.Type != hostapi.InclusionBatchType || ans.TreeSize != cp.Size || cp.Size != uint64(len(hashes)) || len(ans.Proofs) != len(asked) {
			t.Fatalf("batch: %+v, checkpoint %+v, %v", ans, cp, err)
		}
		if age := time.Since(time.UnixMilli(ans.PublishedAt)); age < 0 || age > time.Hour {
			t.Fatalf("published_at %d", ans.PublishedAt)
		}
		for i, p := range ans.Proofs {
			if p.RecordHash != asked[i] {
				t.Fatalf("proof %d is for %s, asked %s", i, p.RecordHash, asked[i])
			}
			if asked[i] == unknown {
				if p.Error != "not_in_log" || p.Inclusion != nil {
					t.Fatalf("unknown record: %+v", p)
				}
				continue
			}
			leaf, _ := tlogproof.RecordLeaf(p.RecordHash)
			if p.Inclusion == nil || tlogproof.VerifyInclusion(*p.Inclusion, leaf, cp.Hash) != nil {
				t.Fatalf("proof %d does not verify: %+v", i, p)
			}
		}
		return cp
	}
	before := check(lv.srv.URL)

	tooMany := make([]string, hostapi.MaxInclusionBatch+1)
	for i := range tooMany {
		tooMany[i] = hashes[0]
	}
	for name, body := range map[string]any{
		"not JSON":   "record_hashes",
		"empty":      map[string]any{},
		"none":       map[string]any{"record_hashes": []string{}},
		"not a list": map[string]any{"record_hashes": hashes[0]},
		"malformed":  map[string]any{"record_hashes": []string{hashes[0], "abc"}},
		"too many":   map[string]any{"record_hashes": tooMany},
	} {
		r := post(lv.srv.URL, body)
		expectCode(t, r, adp.CodeInvalidRequest)
		spec.check(t, "postLogInclusions", r)
		if name == "too many" && r.ErrorData()["limit"] != float64(hostapi.MaxInclusionBatch) {
			t.Fatalf("too many: %s", r)
		}
	}
	// Exactly the cap is answered.
	full := post(lv.srv.URL, map[string]any{"record_hashes": tooMany[1:]})
	var fa hostapi.InclusionBatch
	full.JSON(&fa)
	if full.Status != http.StatusOK || len(fa.Proofs) != hostapi.MaxInclusionBatch {
		t.Fatalf("a full batch: %d, %d proofs", full.Status, len(fa.Proofs))
	}
	// Without a host log: not_found.
	expectCode(t, post(lv.h.URL, map[string]any{"record_hashes": hashes[:1]}), adp.CodeNotFound)

	lv = lv.restart(t)
	lv.covered(t, uint64(len(hashes)))
	if after := check(lv.srv.URL); after.Hash != before.Hash {
		t.Fatalf("after the restart the same tree has another root: %x, %x", after.Hash, before.Hash)
	}
}
