//go:build e2e

package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha3"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	hostlogpkg "github.com/adpnode/adpnode/hostlog"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/node"
	"github.com/adpnode/adpnode/witness"
)

// rooms is a tlog.Source and tlog.Feed of made-up rooms whose records
// are only hashes.
type rooms struct {
	mu     sync.Mutex
	hashes map[string][][32]byte
	feed   []hostport.FeedEntry
	wake   chan struct{}
}

func (r *rooms) FeedHead() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return uint64(len(r.feed))
}

func (r *rooms) Follow(ctx context.Context, since uint64, fn func([]hostport.FeedEntry) error) error {
	for {
		r.mu.Lock()
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		batch := append([]hostport.FeedEntry(nil), r.feed[since:]...)
		wake := r.wake
		r.mu.Unlock()
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
			since = batch[len(batch)-1].Seq
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RoomHeads reads the heads under the lock and calls fn without it, as
// the node does: fn (the log's catch-up) calls RecordHashes.
func (r *rooms) RoomHeads(fn func(string, int64) bool) error {
	r.mu.Lock()
	heads := make(map[string]int64, len(r.hashes))
	for id, hs := range r.hashes {
		heads[id] = int64(len(hs))
	}
	r.mu.Unlock()
	for id, seq := range heads {
		if !fn(id, seq) {
			break
		}
	}
	return nil
}

func (r *rooms) RecordHashes(id string, after int64, limit int) ([][32]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hs := r.hashes[id]
	if after >= int64(len(hs)) {
		return nil, nil
	}
	return append([][32]byte{}, hs[after:min(int64(len(hs)), after+int64(limit))]...), nil
}

// Locate finds a record by its hash (for inclusion proofs).
func (r *rooms) Locate(h [32]byte) (string, int64, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, hs := range r.hashes {
		for i, x := range hs {
			if x == h {
				return id, int64(i + 1), true, nil
			}
		}
	}
	return "", 0, false, nil
}

func (r *rooms) add(id string, n int) {
	for i := 0; i < n; i++ {
		r.mu.Lock()
		h := sha3.Sum256([]byte(fmt.Sprint(id, len(r.hashes[id]))))
		r.hashes[id] = append(r.hashes[id], h)
		seq := int64(len(r.hashes[id]))
		r.feed = append(r.feed, hostport.FeedEntry{Seq: uint64(len(r.feed) + 1), RoomID: id, RecordSeq: seq, Hash: h})
		if r.wake != nil {
			close(r.wake)
		}
		r.wake = make(chan struct{})
		r.mu.Unlock()
	}
}

// omniwitness is a running transparency-dev omniwitness.
type omniwitness struct {
	bin, dir, addr, keyFile, logsFile string
	vkey                              string
	cmd                               *exec.Cmd
	out                               *bytes.Buffer
	exited                            chan struct{}
}

// buildOmniwitness builds cmd/omniwitness from internal/testtools/omniwitness
// (its own module, so the witness stays out of the daemon's go.mod).
func buildOmniwitness(t *testing.T) string {
	if testing.Short() {
		t.Skip("builds transparency-dev/witness (minutes on a cold cache)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build omniwitness")
	}
	modDir, err := filepath.Abs("../internal/testtools/omniwitness")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "omniwitness")
	build := exec.Command(goBin, "build", "-o", bin, "github.com/transparency-dev/witness/cmd/omniwitness")
	build.Dir = modDir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build omniwitness: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startOmniwitness(t *testing.T, bin, dir, origin, logVKey string) *omniwitness {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	const name = "omniwitness.test/w"
	cs, _ := tlogwitness.NewCosigner(name, priv)
	vkey := cs.VerifierKey()
	// The witness's note signer key; omniwitness signs cosignature/v1
	// with it (the key ID field is not checked, the key is Ed25519).
	skey := "PRIVATE+KEY+" + name + "+" + strings.SplitN(vkey, "+", 3)[1] + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	o := &omniwitness{bin: bin, dir: dir, vkey: vkey, keyFile: filepath.Join(dir, "witness.key"), logsFile: filepath.Join(dir, "logs.yaml")}
	if err := os.WriteFile(o.keyFile, []byte(skey), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("Logs:\n  - Origin: %q\n    PublicKey: %q\n    URL: \"http://%s/\"\n", origin, logVKey, strings.TrimSuffix(origin, tlogproof.OriginSuffix))
	if err := os.WriteFile(o.logsFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	o.start(t)
	return o
}

func (o *omniwitness) start(t *testing.T) {
	o.addr = freeAddr(t)
	o.out = &bytes.Buffer{}
	o.cmd = exec.Command(o.bin, "--listen="+o.addr, "--metrics_listen=", "--private_key_path="+o.keyFile,
		"--additional_logs="+o.logsFile, "--db_file="+filepath.Join(o.dir, "witness.db"), "--logtostderr", "--v=1")
	o.cmd.Stdout, o.cmd.Stderr = o.out, o.out
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o.exited = make(chan struct{})
	go func() { o.cmd.Wait(); close(o.exited) }()
	t.Cleanup(o.stop)
	testwait.Until(t, 60*time.Second, "omniwitness listening", func() bool {
		c, err := net.DialTimeout("tcp", o.addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case <-o.exited:
			t.Fatalf("omniwitness exited:\n%s", o.out)
		default:
		}
		return false
	})
}

func (o *omniwitness) stop() {
	if o.cmd == nil || o.cmd.Process == nil {
		return
	}
	select {
	case <-o.exited:
	default:
		o.cmd.Process.Kill()
		<-o.exited
	}
}

func (o *omniwitness) post(t *testing.T, body []byte) (int, string) {
	resp, err := http.Post("http://"+o.addr+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOmniwitnessInterop: transparency-dev's omniwitness, configured with
// the host log's origin and key, cosigns the host's checkpoints as the
// host submits them (first from size 0, then with consistency proofs the
// host log makes); the host publishes the checkpoint with the
// cosignature; a client checks both signatures and the inclusion of
// records with golang.org/x/mod/sumdb/tlog. The omniwitness refuses a
// forked checkpoint and keeps its state across a restart.
func TestOmniwitnessInterop(t *testing.T) {
	bin := buildOmniwitness(t)
	dir := t.TempDir()
	_, hostKey, _ := ed25519.GenerateKey(rand.Reader)
	origin := tlogproof.Origin(freeAddr(t))
	db, err := badger.Open(node.BadgerOptions(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := &rooms{hashes: map[string][][32]byte{}}
	hl, err := hostlogpkg.Open(hostlogpkg.Config{Dir: filepath.Join(dir, "tlog"), DB: db, Key: hostKey, Origin: origin, Source: src, Feed: src,
		CheckpointInterval: 100 * time.Millisecond, BatchMaxAge: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	ctx := context.Background()
	waitSize := func(n uint64) {
		testwait.Until(t, 10*time.Second, "host checkpoint of size "+strconv.FormatUint(n, 10), func() bool {
			_, cp, err := hl.Checkpoint(ctx)
			return err == nil && cp.Size >= n
		})
	}
	for _, id := range []string{"room-a", "room-b", "room-c"} {
		src.add(id, 40)
	}
	waitSize(120)

	ow := startOmniwitness(t, bin, filepath.Join(dir, "ow"), origin, hl.VerifierKey())
	target, err := witness.ParseTarget("http://" + ow.addr + "=" + ow.vkey)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := witness.NewSubmitter(witness.SubmitterConfig{Log: hl, Targets: []witness.Target{target},
		Poll: 20 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	cv, _ := tlogwitness.NewCosignatureVerifier(ow.vkey)
	witnessed := func(min uint64) ([]byte, tlogproof.Checkpoint, bool) {
		raw, n := sub.Cosigned()
		if n == 0 {
			return nil, tlogproof.Checkpoint{}, false
		}
		nt, err := note.Open(raw, note.VerifierList(hl.Verifier(), cv))
		if err != nil {
			t.Fatalf("published checkpoint: %v\n%s", err, raw)
		}
		cp, err := tlogproof.ParseCheckpoint([]byte(nt.Text))
		return raw, cp, err == nil && len(nt.Sigs) == 2 && cp.Size >= min
	}
	testwait.Until(t, 10*time.Second, "omniwitness cosignature", func() bool { _, _, ok := witnessed(120); return ok })

	// More records: the omniwitness now needs the host's consistency
	// proofs.
	for round := 0; round < 3; round++ {
		src.add("room-a", 25)
		src.add("room-d", 13)
		want := uint64(120 + 38*(round+1))
		waitSize(want)
		testwait.Until(t, 10*time.Second, "omniwitness cosignature after growth", func() bool { _, _, ok := witnessed(want); return ok })
	}
	raw, cp, _ := witnessed(0)
	if st := sub.Stats()[0]; st.Size != cp.Size {
		t.Fatalf("submitter stats %+v", st)
	}

	// A client verifies inclusion of every record of room-a against the
	// witnessed checkpoint with x/mod's tlog.
	src.mu.Lock()
	roomA := append([][32]byte{}, src.hashes["room-a"]...)
	src.mu.Unlock()
	for i, h := range roomA {
		rp, err := hl.Inclusion(ctx, h, cp.Size)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		hs, err := tlogproof.DecodeHashes(rp.Inclusion.Hashes)
		if err != nil {
			t.Fatal(err)
		}
		p := make(tlog.RecordProof, len(hs))
		for j := range hs {
			p[j] = tlog.Hash(hs[j])
		}
		if err := tlog.CheckRecord(p, int64(cp.Size), tlog.Hash(cp.Hash), int64(rp.Inclusion.LeafIndex), tlog.RecordHash(h[:])); err != nil {
			t.Fatalf("record %d does not verify against the witnessed checkpoint: %v", i, err)
		}
	}
	_ = raw

	// A forked checkpoint at the witnessed size, signed by the host key:
	// the omniwitness refuses it.
	forged, _ := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: cp.Size, Hash: sha3.Sum256([]byte("fork"))}, hostKey)
	if status, body := ow.post(t, tlogwitness.FormatRequest(cp.Size, nil, forged)); status != http.StatusUnprocessableEntity {
		t.Fatalf("forked checkpoint: %d %q", status, body)
	}
	// A checkpoint under another key for the origin is refused too.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	stranger, _ := tlogproof.Sign(tlogproof.Checkpoint{Origin: origin, Size: cp.Size + 1, Hash: sha3.Sum256([]byte("x"))}, other)
	if status, _ := ow.post(t, tlogwitness.FormatRequest(cp.Size, nil, stranger)); status == http.StatusOK {
		t.Fatal("omniwitness cosigned a checkpoint under another key")
	}

	// Restarted on its database, the omniwitness still holds the size:
	// a submission from 0 gets 409 with it.
	sub.Close()
	ow.stop()
	ow.start(t)
	cur, _, _ := hl.Checkpoint(ctx)
	status, body := ow.post(t, tlogwitness.FormatRequest(0, nil, cur))
	if status != http.StatusConflict || strings.TrimSpace(body) != strconv.FormatUint(cp.Size, 10) {
		t.Fatalf("after restart: %d %q, want 409 %d", status, body, cp.Size)
	}
	// Our cosignature verifier reads the omniwitness's timestamp.
	nt, _ := note.Open(raw, note.VerifierList(hl.Verifier(), cv))
	for _, s := range nt.Sigs {
		if s.Name == cv.Name() {
			ts, ok := tlogwitness.CosignatureTime(s.Base64)
			if !ok || time.Since(time.Unix(int64(ts), 0)) > time.Hour {
				t.Fatalf("cosignature time %d", ts)
			}
		}
	}
}
