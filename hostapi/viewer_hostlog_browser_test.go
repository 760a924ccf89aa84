//go:build e2e

package hostapi_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dgraph-io/badger/v4"
	sumdb "golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// logViewer is a durable host with its host log, a witness submitter and
// an API server that serves both (as serve wires them), restartable on
// its data dir with the same key. A zero target: no witness.
type logViewer struct {
	h      *adptest.Host
	l      *hostlog.Log
	sub    *witness.Submitter
	srv    *httptest.Server
	key    ed25519.PrivateKey
	target witness.Target
	once   sync.Once
}

func startLogViewer(t *testing.T, h *adptest.Host, key ed25519.PrivateKey, target witness.Target) *logViewer {
	t.Helper()
	lv := &logViewer{h: h, key: key, target: target}
	l, err := hostlog.Open(hostlog.Config{Dir: filepath.Join(h.Node.Config().DataDir, hostlog.Dir), DB: h.Node.DB(), Key: key,
		Origin: tlogproof.Origin(h.Node.Host()), Source: h.Node, Feed: h.Node, CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lv.l = l
	h.Node.SetArchiveHostLog(identity.AgentIDFromKey(key.Public().(ed25519.PublicKey)), func(lastHash string) any {
		if p := l.ArchiveProof(lastHash); p != nil {
			return p
		}
		return nil
	})
	var targets []witness.Target
	if target.URL != "" {
		targets = append(targets, target)
	}
	lv.sub, err = witness.NewSubmitter(witness.SubmitterConfig{Log: l, Targets: targets,
		Poll: 20 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.SetWitnessed(lv.sub) // as serve does: archives prove against the cosigned checkpoint
	lv.srv = httptest.NewServer(hostapi.New(h.Node, hostapi.Options{HostLog: l, Witnessed: lv.sub}).Handler())
	t.Cleanup(lv.close)
	return lv
}

func (lv *logViewer) close() {
	lv.once.Do(func() {
		lv.srv.CloseClientConnections()
		lv.srv.Close()
		lv.sub.Close()
		lv.l.Close()
	})
}

// restart stops the log and its server, restarts the node on its data
// dir and opens the log again with the same key.
func (lv *logViewer) restart(t *testing.T) *logViewer {
	t.Helper()
	lv.close()
	return startLogViewer(t, lv.h.Restart(t), lv.key, lv.target)
}

// covered waits until the published checkpoint covers n leaves and the
// witness (if any) has cosigned it.
func (lv *logViewer) covered(t *testing.T, n uint64) {
	t.Helper()
	testwait.Until(t, 30*time.Second, "checkpoint covers the records and is cosigned", func() bool {
		_, cp, err := lv.l.Checkpoint(t.Context())
		if err != nil || cp.Size < n {
			return false
		}
		if lv.target.URL == "" {
			return true
		}
		raw, k := lv.sub.Cosigned()
		return k == 1 && strings.HasPrefix(string(raw), string(cp.Marshal()))
	})
}

// startWitness runs a tlog-witness for the host's log on 127.0.0.1.
func startWitness(t *testing.T, origin string, hostKey ed25519.PublicKey) witness.Target {
	t.Helper()
	db, err := badger.Open(node.BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, wkey, _ := ed25519.GenerateKey(nil)
	cs, err := tlogwitness.NewCosigner("witness.test/viewer", wkey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tlogproof.Verifier(origin, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(witness.Config{DB: db, Cosigner: cs, Burst: 1000, PerOrigin: time.Millisecond,
		Logs: func(o string) (tlogwitness.Log, bool) {
			return tlogwitness.Log{Origin: origin, Verifier: v}, o == origin
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	target, err := witness.ParseTarget(srv.URL + "=" + w.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// logProxy sits in front of a log viewer: it counts the batched proof
// requests and proofs and, when tamper is set, rewrites their answers.
type logProxy struct {
	srv      *httptest.Server
	requests atomic.Int64
	hashes   atomic.Int64
	bytes    atomic.Int64
	mu       sync.Mutex
	tamper   func(*hostapi.InclusionBatch)
	// tamperCons, when set, rewrites consistency proofs.
	tamperCons func(*tlogproof.ConsistencyProof)
}

func newLogProxy(t *testing.T, backend string) *logProxy {
	t.Helper()
	p := &logProxy{}
	target, _ := url.Parse(backend)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.URL.Path == "/v1/log/consistency" && r.StatusCode == http.StatusOK {
			p.mu.Lock()
			tamper := p.tamperCons
			p.mu.Unlock()
			if tamper == nil {
				return nil
			}
			var cp tlogproof.ConsistencyProof
			if err := json.NewDecoder(r.Body).Decode(&cp); err != nil {
				return err
			}
			tamper(&cp)
			body, _ := json.Marshal(cp)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			r.ContentLength = int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
			return nil
		}
		if r.Request.URL.Path != "/v1/log/inclusions" || r.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		var b hostapi.InclusionBatch
		if err := json.Unmarshal(body, &b); err != nil {
			return err
		}
		p.requests.Add(1)
		p.hashes.Add(int64(len(b.Proofs)))
		p.bytes.Add(int64(len(body)))
		p.mu.Lock()
		tamper := p.tamper
		p.mu.Unlock()
		if tamper != nil {
			tamper(&b)
			body, _ = json.Marshal(b)
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *logProxy) set(f func(*hostapi.InclusionBatch)) {
	p.mu.Lock()
	p.tamper = f
	p.mu.Unlock()
	p.requests.Store(0)
	p.hashes.Store(0)
	p.bytes.Store(0)
}

// logPage is what the host log card and the records' marks show.
type logPage struct {
	Summary              string
	OK, Chain, Fail      string
	Origin, Size, Root   string
	Sigs                 []string // role state name
	Marks                map[string]int
	FailTitle, SkipTitle string
}

const logPageJS = `(() => {
  const q = (s) => document.querySelector(s);
  const sum = q('.log-card .log-summary') || { dataset: {}, textContent: '' };
  const marks = {};
  for (const m of document.querySelectorAll('#transcript .log-mark')) marks[m.dataset.state] = (marks[m.dataset.state] || 0) + 1;
  const bad = q('#transcript .log-mark[data-state="fail"]');
  return {
    Summary: sum.textContent, OK: sum.dataset.ok || '', Chain: sum.dataset.chain || '', Fail: sum.dataset.fail || '',
    Origin: (q('.log-card .log-origin') || {}).textContent || '', Size: (q('.log-card .log-size') || {}).textContent || '',
    Root: (q('.log-card .log-root') || {}).title || '',
    Sigs: Array.from(document.querySelectorAll('.log-card .log-sig[data-role]'), (e) => e.dataset.role + ' ' + e.dataset.state + ' ' + e.dataset.name),
    Marks: marks, FailTitle: bad ? bad.title : '',
  };
})()`

func (tb *tab) logPage() logPage {
	tb.t.Helper()
	var p logPage
	tb.eval(logPageJS, &p)
	return p
}

type hashSlice []sumdb.Hash

func (s hashSlice) ReadHashes(idx []int64) ([]sumdb.Hash, error) {
	out := make([]sumdb.Hash, len(idx))
	for i, x := range idx {
		out[i] = s[x]
	}
	return out, nil
}

// browserLogVectors checks the page's RFC 6962 inclusion and consistency
// verifiers and Merkle root against golang.org/x/mod/sumdb/tlog at tree sizes around
// powers of two, and altered proofs against it.
func browserLogVectors(t *testing.T, tb *tab) {
	type incCase struct {
		Hash  string                   `json:"hash"`
		Proof tlogproof.InclusionProof `json:"proof"`
		Root  string                   `json:"root"`
		Other string                   `json:"other"` // another leaf's hash
	}
	type rootCase struct {
		Hashes []string `json:"hashes"`
		Root   string   `json:"root"`
	}
	var leaves [][32]byte
	var st hashSlice
	var incs []incCase
	var roots []rootCase
	enc := func(hs [][32]byte) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = tlogproof.EncodeRecordHash(h)
		}
		return out
	}
	for n := 1; n <= 257; n++ {
		var rh [32]byte
		rand.Read(rh[:])
		hs, err := sumdb.StoredHashes(int64(n-1), rh[:], st)
		if err != nil {
			t.Fatal(err)
		}
		st = append(st, hs...)
		leaves = append(leaves, rh)
		switch n {
		case 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257:
		default:
			continue
		}
		root, err := sumdb.TreeHash(int64(n), st)
		if err != nil {
			t.Fatal(err)
		}
		if [32]byte(root) != tlogproof.Root(leaves) {
			t.Fatalf("size %d: tlogproof.Root differs from sumdb", n)
		}
		roots = append(roots, rootCase{enc(leaves), tlogproof.EncodeRecordHash(tlogproof.Root(leaves))})
		for _, i := range []int{0, 1, n / 3, n / 2, n - 2, n - 1} {
			if i < 0 || i >= n {
				continue
			}
			p, err := sumdb.ProveRecord(int64(n), int64(i), st)
			if err != nil {
				t.Fatal(err)
			}
			var ph [][]byte
			for _, x := range p {
				ph = append(ph, append([]byte(nil), x[:]...))
			}
			incs = append(incs, incCase{Hash: tlogproof.EncodeRecordHash(leaves[i]), Root: base64.StdEncoding.EncodeToString(root[:]),
				Proof: tlogproof.InclusionProof{LeafIndex: uint64(i), TreeSize: uint64(n), Hashes: tlogproof.EncodeHashes(ph)},
				Other: tlogproof.EncodeRecordHash(leaves[(i+1)%n])})
		}
	}
	type consCase struct {
		Size1  int      `json:"size1"`
		Size2  int      `json:"size2"`
		Root1  string   `json:"root1"`
		Root2  string   `json:"root2"`
		Hashes []string `json:"hashes"`
	}
	var conss []consCase
	for _, pair := range [][2]int{{1, 2}, {1, 3}, {2, 3}, {2, 4}, {3, 7}, {4, 8}, {5, 8}, {7, 8}, {8, 9}, {8, 16}, {15, 17}, {16, 17}, {31, 64}, {33, 100}, {64, 129}, {100, 257}, {128, 256}, {255, 257}, {256, 257}, {9, 9}} {
		r1, _ := sumdb.TreeHash(int64(pair[0]), st)
		r2, _ := sumdb.TreeHash(int64(pair[1]), st)
		p, err := sumdb.ProveTree(int64(pair[1]), int64(pair[0]), st)
		if err != nil {
			t.Fatal(err)
		}
		var ph [][]byte
		for _, x := range p {
			ph = append(ph, append([]byte(nil), x[:]...))
		}
		conss = append(conss, consCase{pair[0], pair[1], base64.StdEncoding.EncodeToString(r1[:]), base64.StdEncoding.EncodeToString(r2[:]), tlogproof.EncodeHashes(ph)})
	}
	consJSON, _ := json.Marshal(conss)
	incJSON, _ := json.Marshal(incs)
	rootJSON, _ := json.Marshal(roots)
	var res struct {
		Checked int      `json:"checked"`
		Bad     []string `json:"bad"`
	}
	tb.eval(`(async (incs, roots, conss) => {
  const V = window.ADPViewer, bad = [];
  let checked = 0;
  for (const c of conss) {
    const args = [BigInt(c.size1), V.b64Decode(c.root1), BigInt(c.size2), V.b64Decode(c.root2)];
    const at = c.size1 + '→' + c.size2;
    const why = await V.verifyConsistency(...args, c.hashes);
    if (why) bad.push('consistency ' + at + ': ' + why);
    checked++;
    if (c.size1 === c.size2) continue;
    const alt = async (label, a, hashes) => { if (!(await V.verifyConsistency(...a, hashes))) bad.push(label + ' consistent at ' + at); };
    await alt('flipped hash', args, [c.hashes[0].replace(/^./, (x) => (x === 'A' ? 'B' : 'A'))].concat(c.hashes.slice(1)));
    await alt('short proof', args, c.hashes.slice(0, -1));
    await alt('long proof', args, c.hashes.concat([c.root2]));
    await alt('other first root', [args[0], V.b64Decode(c.root2), args[2], args[3]], c.hashes);
    await alt('other second root', [args[0], args[1], args[2], V.b64Decode(c.root1)], c.hashes);
    await alt('other first size', [args[0] + 1n, args[1], args[2], args[3]], c.hashes);
  }
  for (const c of incs) {
    const cp = { size: BigInt(c.proof.tree_size), root: V.b64Decode(c.root) };
    const at = c.proof.leaf_index + '/' + c.proof.tree_size;
    const why = await V.verifyInclusion(c.hash, c.proof, cp);
    if (why) bad.push('genuine ' + at + ': ' + why);
    const alt = async (label, hash, proof, cpx) => { if (!(await V.verifyInclusion(hash, proof, cpx || cp))) bad.push(label + ' verified at ' + at); };
    if (c.proof.tree_size > 1) {
      await alt('other leaf', c.other, c.proof);
      await alt('other index', c.hash, Object.assign({}, c.proof, { leaf_index: (c.proof.leaf_index + 1) % c.proof.tree_size }));
      await alt('short proof', c.hash, Object.assign({}, c.proof, { hashes: c.proof.hashes.slice(1) }));
      await alt('flipped hash', c.hash, Object.assign({}, c.proof, { hashes: [c.proof.hashes[0].replace(/^./, (x) => (x === 'A' ? 'B' : 'A'))].concat(c.proof.hashes.slice(1)) }));
    }
    await alt('long proof', c.hash, Object.assign({}, c.proof, { hashes: c.proof.hashes.concat([c.root]) }));
    await alt('other size', c.hash, Object.assign({}, c.proof, { tree_size: c.proof.tree_size + 1 }));
    await alt('beyond the tree', c.hash, Object.assign({}, c.proof, { leaf_index: c.proof.tree_size }));
    checked++;
  }
  for (const r of roots) {
    const got = await V.merkleRoot(r.hashes);
    if (got !== r.root) bad.push('root of ' + r.hashes.length + ': ' + got);
  }
  if ((await V.merkleRoot([])) !== V.b64u(new Uint8Array(await crypto.subtle.digest('SHA-256', new Uint8Array(0))))) bad.push('empty root');
  return { checked, bad };
})(`+string(incJSON)+`, `+string(rootJSON)+`, `+string(consJSON)+`)`, &res)
	if len(res.Bad) > 0 || res.Checked != len(incs)+len(conss) || len(incs) < 100 {
		t.Fatalf("inclusion and consistency vectors: %d of %d checked; %q", res.Checked, len(incs)+len(conss), res.Bad)
	}
}

// TestViewerHostLog: the room page of a host with a host log and a
// witness shows the checkpoint and its signatures, and marks every record
// after verifying, in the browser, the checkpoint's host signature, the
// witness's cosignature and the record's inclusion proof; 200 records
// take one batched request. A tampered proof and a validly signed wrong
// root show failure marks; a page's proofs are bounded; after a restart
// on the same data dir the page still verifies; the outcome page checks
// the archive's records, its archive_root and its embedded proof.
func TestViewerHostLog(t *testing.T) {
	b := startBrowser(t)
	dir := t.TempDir()
	h := adptest.StartHostAt(t, node.Config{DataDir: dir, Rates: highRates()}, adptest.NewClock())
	pub, key, _ := ed25519.GenerateKey(nil)
	origin := tlogproof.Origin(h.Node.Host())
	lv := startLogViewer(t, h, key, startWitness(t, origin, pub))

	alice := adptest.NewAgent("alice")
	id := lv.h.CreateRoom(t, alice, lv.h.RoomPayload("public"))
	for i := 0; i < 199; i++ {
		lv.h.MustPost(t, alice, id, "message.create", msg(fmt.Sprintf("record %d", i+2)))
	}
	const n = 200
	lv.covered(t, n)
	proxy := newLogProxy(t, lv.srv.URL)

	tb := b.tab(t)
	open := func(p *logProxy, route string) {
		tb.run(chromedp.Navigate(p.srv.URL + "/#/nowhere"))
		tb.waitJS(20*time.Second, "viewer scripts", `window.ADPViewer && window.ADPViewer.LogCheck`)
		tb.run(chromedp.Navigate(p.srv.URL + "/#" + route))
	}
	tb.run(chromedp.Navigate(proxy.srv.URL + "/#/nowhere"))
	tb.waitJS(20*time.Second, "viewer scripts", `window.ADPViewer && window.ADPViewer.LogCheck`)
	browserLogVectors(t, tb)
	allOK := fmt.Sprintf(`document.querySelector('.badge[data-state="ok"]') && document.querySelectorAll('#transcript .log-mark[data-state="ok"]').length === %d`, n)

	// The genuine log: every record proved in one request.
	open(proxy, "/rooms/"+id)
	tb.waitJS(20*time.Second, "every record proved in the log", allOK)
	p := tb.logPage()
	_, cp, _ := lv.l.Checkpoint(t.Context())
	wantSigs := []string{"host ok " + origin, "witness ok witness.test/viewer"}
	if p.OK != strconv.Itoa(n) || p.Fail != "0" || p.Origin != origin || p.Size != strconv.Itoa(n) ||
		p.Root != base64.StdEncoding.EncodeToString(cp.Hash[:]) || strings.Join(p.Sigs, "|") != strings.Join(wantSigs, "|") {
		t.Fatalf("host log card: %+v (checkpoint %d)", p, cp.Size)
	}
	if r, k := proxy.requests.Load(), proxy.hashes.Load(); r != 1 || k != n {
		t.Fatalf("%d batched requests for %d proofs; want 1 for %d", r, k, n)
	}
	var ms float64
	tb.eval(`(() => { const e = performance.getEntriesByType('resource').find((x) => x.name.endsWith('/v1/log/inclusions')); return e ? e.duration : -1; })()`, &ms)
	t.Logf("%d records: 1 request, %d bytes of proofs; request %.0f ms in the browser (load-dependent, not asserted)", n, proxy.bytes.Load(), ms)
	tb.shot("viewer-hostlog")
	tb.assertInert()

	// A tampered proof: that record fails, the others still verify.
	const victim = 37
	proxy.set(func(b *hostapi.InclusionBatch) {
		for i := range b.Proofs {
			if pr := b.Proofs[i].Inclusion; pr != nil && pr.LeafIndex == victim-1 {
				pr.Hashes[0] = base64.StdEncoding.EncodeToString(make([]byte, 32))
			}
		}
	})
	open(proxy, "/rooms/"+id)
	tb.waitJS(20*time.Second, "the tampered record fails", `document.querySelector('#transcript > li[data-seq="`+strconv.Itoa(victim)+`"] .log-mark[data-state="fail"]')`)
	tb.waitJS(10*time.Second, "the others verify", fmt.Sprintf(`document.querySelectorAll('#transcript .log-mark[data-state="ok"]').length === %d`, n-1))
	p = tb.logPage()
	if p.Fail != "1" || !strings.Contains(p.FailTitle, "does not lead to the checkpoint root") || !strings.Contains(p.Summary, "✗ 1 of 200") {
		t.Fatalf("tampered proof: %+v", p)
	}
	var rowBad bool
	tb.eval(`document.querySelector('#transcript > li[data-seq="`+strconv.Itoa(victim)+`"]').classList.contains('rec-log-bad')`, &rowBad)
	if !rowBad {
		t.Fatal("the tampered record's row is not marked")
	}

	// A wrong root in a checkpoint validly signed with the host key: the
	// signature verifies, the witness's does not (it signed the true
	// root), and no proof leads to the root.
	proxy.set(func(b *hostapi.InclusionBatch) {
		body, rest, _ := strings.Cut(b.Checkpoint, "\n\n")
		c, err := tlogproof.ParseCheckpoint([]byte(body + "\n"))
		if err != nil {
			t.Error(err)
			return
		}
		c.Hash[0] ^= 1
		signed, err := tlogproof.Sign(c, key)
		if err != nil {
			t.Error(err)
			return
		}
		var witnessLines []string
		for _, l := range strings.Split(strings.TrimSuffix(rest, "\n"), "\n") {
			if !strings.HasPrefix(l, "— "+origin+" ") {
				witnessLines = append(witnessLines, l+"\n")
			}
		}
		b.Checkpoint = string(signed) + strings.Join(witnessLines, "")
	})
	open(proxy, "/rooms/"+id)
	tb.waitJS(20*time.Second, "every record fails", fmt.Sprintf(`document.querySelectorAll('#transcript .log-mark[data-state="fail"]').length === %d`, n))
	p = tb.logPage()
	if strings.Join(p.Sigs, "|") != "host ok "+origin+"|witness bad witness.test/viewer" || !strings.Contains(p.FailTitle, "does not lead to the checkpoint root") {
		t.Fatalf("wrong root: %+v", p)
	}
	tb.shot("viewer-hostlog-wrong-root")

	// An unsigned answer (the host line dropped) and an unknown witness:
	// the checkpoint fails, the unknown line is shown as not checked.
	proxy.set(func(b *hostapi.InclusionBatch) {
		text, _, _ := strings.Cut(b.Checkpoint, "\n\n")
		b.Checkpoint = text + "\n\n— someone.example/w " + base64.StdEncoding.EncodeToString(make([]byte, 76)) + "\n"
	})
	open(proxy, "/rooms/"+id)
	tb.waitJS(20*time.Second, "checkpoint rejected", fmt.Sprintf(`document.querySelectorAll('#transcript .log-mark[data-state="fail"]').length === %d`, n))
	p = tb.logPage()
	if strings.Join(p.Sigs, "|") != "witness unchecked someone.example/w" || !strings.Contains(p.FailTitle, "not signed by the log key") {
		t.Fatalf("unsigned checkpoint: %+v", p)
	}

	// The page's bound: with at most 50 proofs per page in requests of
	// 20, three requests; the newest record's proof covers the rest
	// through the hash chain.
	proxy.set(nil)
	tb.run(chromedp.Navigate(proxy.srv.URL + "/#/nowhere"))
	tb.waitJS(20*time.Second, "viewer scripts", `window.ADPViewer && window.ADPViewer.LogCheck`)
	tb.eval(`(() => { Object.assign(window.ADPViewer.LOG_LIMITS, { perPage: 50, perRequest: 20 }); location.hash = '#/rooms/`+id+`'; return true; })()`, nil)
	tb.waitJS(20*time.Second, "the page's proofs spent", fmt.Sprintf(`document.querySelector('.log-card[data-idle="true"]') && document.querySelectorAll('#transcript .log-mark[data-state="ok"]').length === 50 && document.querySelectorAll('#transcript .log-mark[data-state="chain"]').length === %d`, n-50))
	p = tb.logPage()
	if r, k := proxy.requests.Load(), proxy.hashes.Load(); r != 3 || k != 50 || p.OK != "50" || p.Chain != strconv.Itoa(n-50) {
		t.Fatalf("bounded page: %d requests, %d proofs, card %+v", r, k, p)
	}

	// Restart on the same data dir: the log, its checkpoint and the
	// witness's state survive, and the page verifies again; a record
	// written while the page is open is proved once a checkpoint covers it.
	lv = lv.restart(t)
	lv.covered(t, n)
	proxy = newLogProxy(t, lv.srv.URL)
	tb = b.tab(t)
	open(proxy, "/rooms/"+id)
	tb.waitJS(20*time.Second, "every record proved after the restart", allOK)
	if p = tb.logPage(); p.Size != strconv.Itoa(n) || strings.Join(p.Sigs, "|") != strings.Join(wantSigs, "|") || proxy.requests.Load() != 1 {
		t.Fatalf("after restart: %+v, %d requests", p, proxy.requests.Load())
	}
	lv.h.MustPost(t, alice, id, "message.create", msg("written while the page is open"))
	tb.waitJS(20*time.Second, "the live record proved", `document.querySelector('#transcript > li[data-seq="`+strconv.Itoa(n+1)+`"] .log-mark[data-state="ok"]')`)
	// The page saw two checkpoints and checked the later extends the earlier.
	tb.waitJS(10*time.Second, "consistency checked", `document.querySelector('.log-card .log-consistency[data-state="ok"]')`)
	if c := tb.text(".log-card .log-consistency"); !strings.Contains(c, fmt.Sprintf("size %d", n)) || tb.logPage().Size != strconv.Itoa(n+1) {
		t.Fatalf("consistency: %q", c)
	}

	// A host whose new checkpoint comes with a consistency proof that does
	// not hold: the card and the new record fail.
	proxy.mu.Lock()
	proxy.tamperCons = func(p *tlogproof.ConsistencyProof) {
		if len(p.Hashes) > 0 {
			p.Hashes[0] = base64.StdEncoding.EncodeToString(make([]byte, 32))
		}
	}
	proxy.mu.Unlock()
	tb = b.tab(t)
	open(proxy, "/rooms/"+id)
	tb.waitJS(20*time.Second, "the page verified", fmt.Sprintf(`document.querySelectorAll('#transcript .log-mark[data-state="ok"]').length === %d`, n+1))
	lv.h.MustPost(t, alice, id, "message.create", msg("after the fork"))
	tb.waitJS(20*time.Second, "inconsistent checkpoints caught", `document.querySelector('.log-card .log-consistency[data-state="bad"]') && document.querySelector('#transcript > li[data-seq="`+strconv.Itoa(n+2)+`"] .log-mark[data-state="fail"]')`)
	if p := tb.logPage(); !strings.Contains(p.Summary, "not proved to extend checkpoint") {
		t.Fatalf("inconsistent checkpoints: %+v", p)
	}
	tb.shot("viewer-hostlog-inconsistent")
	proxy.mu.Lock()
	proxy.tamperCons = nil
	proxy.mu.Unlock()

	lv.h.MustPost(t, alice, id, "room.close", map[string]any{"reason": "done"})
	lv.covered(t, n+3)

	// The outcome page: the archive's records in the log, its
	// archive_root recomputed and its embedded proof checked.
	open(proxy, "/rooms/"+id+"/outcome")
	tb.waitJS(20*time.Second, "outcome verified", `document.querySelector('.outcome .badge[data-state="ok"]') && document.querySelector('.archive-log[data-state="ok"]') && document.querySelector('.log-card[data-state="ok"]')`)
	var out struct{ Badge, Archive, Summary string }
	tb.eval(`({ Badge: document.querySelector('.badge').textContent, Archive: document.querySelector('.archive-log').textContent,
  Summary: document.querySelector('.log-card .log-summary').textContent })`, &out)
	if !strings.Contains(out.Badge, "archive_root matches") || !strings.Contains(out.Archive, fmt.Sprintf("record #%d is leaf %d", n+3, n+2)) ||
		!strings.Contains(out.Summary, fmt.Sprintf("%d of %d records of the archive proved", n+3, n+3)) {
		t.Fatalf("outcome page: %+v", out)
	}
	// The archive's proof uses the cosigned checkpoint: its witness line
	// verifies against the key the proof file lists.
	tb.waitJS(20*time.Second, "outcome witness", `document.querySelector('.manifest-card li.witness')`)
	if w := tb.text(".manifest-card .witnesses"); !strings.Contains(w, "✓") || !strings.Contains(w, "cosigned") {
		t.Fatalf("outcome witnesses: %q", w)
	}
	tb.shot("viewer-hostlog-outcome")
	tb.assertInert()

	// The same node served without its log (adptest's own server): the
	// card says so and no record carries a mark.
	tb.run(chromedp.Navigate(lv.h.URL + "/#/rooms/" + id))
	tb.waitJS(20*time.Second, "no host log", `document.querySelector('.badge[data-state="ok"]') && document.querySelector('.log-card[data-state="none"]') && document.querySelectorAll('#transcript > li.rec').length > 200`)
	var marks int
	tb.eval(`document.querySelectorAll('#transcript .log-mark').length`, &marks)
	if c := tb.text(".log-card"); marks != 0 || !strings.Contains(c, "this host keeps no host log") {
		t.Fatalf("a host without a log: %d marks, card %q", marks, c)
	}
}
