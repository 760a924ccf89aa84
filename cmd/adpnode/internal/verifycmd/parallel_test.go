package verifycmd

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/testwait"
)

const genRoom = "d8ftedhpqhsusbg001tg"

// genArchive builds a JSONL archive of a public room: a creator, 20 members
// who join, and messages and reactions up to n records, ending with
// room.close, each admitted by the kernel as a host would.
func genArchive(tb testing.TB, n int) (*archive.Manifest, []archive.PackDoc, [][]byte, []byte) {
	tb.Helper()
	now := int64(1_780_000_000_000)
	st := room.New(room.Config{Limits: room.DefaultLimits()})
	var recs []*record.Record
	var nonce int64
	keys := make([]ed25519.PrivateKey, 21)
	for i := range keys {
		seed := make([]byte, 32)
		copy(seed, fmt.Sprintf("verify-%d", i))
		keys[i], _ = identity.KeyFromSeed(seed)
	}
	add := func(k ed25519.PrivateKey, typ string, payload any) {
		p, _ := json.Marshal(payload)
		canon, err := identity.Canonicalize(p)
		if err != nil {
			tb.Fatal(err)
		}
		nonce++
		ev := identity.Event{Protocol: adp.Protocol, Type: typ, Actor: identity.AgentIDFromKey(k.Public().(ed25519.PublicKey)),
			CreatedAt: now, Nonce: nonce, Payload: canon}
		if typ != "room.create" {
			id, seq, hash := genRoom, st.Head.Seq, st.Head.Hash
			ev.RoomID, ev.BaseSeq, ev.BaseHash = &id, &seq, &hash
		}
		env, err := identity.Sign(k, ev)
		if err != nil {
			tb.Fatal(err)
		}
		a, err := st.Admit(env, now, nil)
		if err != nil {
			tb.Fatalf("%s: %v", typ, err)
		}
		rec := record.New(genRoom, st.Seq+1, st.LastHash, env, now)
		st.Commit(a, rec)
		recs = append(recs, rec)
		now += 7
	}
	add(keys[0], "room.create", map[string]any{"topic": "verify", "visibility": "public", "start_time": now,
		"end_time": now + 24*3600*1000, "types": []any{map[string]any{"use": "adp:reactions/1.0"}}})
	for i := 1; i < len(keys); i++ {
		add(keys[i], "room.join", map[string]any{"role": "speaker"})
	}
	for i := 0; len(recs) < n-1; i++ {
		k := keys[1+i%(len(keys)-1)]
		if i%3 == 2 {
			add(k, "reaction.create", map[string]any{"event_id": recs[len(recs)-1].Hash, "reaction": "agree"})
		} else {
			add(k, "message.create", map[string]any{"content_type": "text/plain", "content": fmt.Sprintf("message %d", i)})
		}
	}
	add(keys[0], "room.close", map[string]any{"reason": "done"})
	m := archive.NewManifest("127.0.0.1:8080", "http://127.0.0.1:8080/v1/rooms/"+genRoom, recs, now)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := archive.WriteJSONL(w, m, archive.PackDocs(st.Imports), recs); err != nil {
		tb.Fatal(err)
	}
	pm, packs, raws, err := archive.ParseJSONL(buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return pm, packs, raws, buf.Bytes()
}

// tamper flips one character of the signature of the record at seq.
func tamper(tb testing.TB, raw []byte) []byte {
	i := bytes.Index(raw, []byte(`"signature":"`))
	if i < 0 {
		tb.Fatal("no signature")
	}
	out := bytes.Clone(raw)
	j := i + len(`"signature":"`) + 10
	if out[j] == 'A' {
		out[j] = 'B'
	} else {
		out[j] = 'A'
	}
	return out
}

// The parallel path catches what the sequential one does: a tampered
// signature anywhere (first chunk, middle, last record) fails at that seq,
// step 2, with invalid_signature, through the CLI entry point too; the
// workers are gone afterwards (also after an early failure).
func TestParallelCatchesTamperedSignature(t *testing.T) {
	m, packs, raws, file := genArchive(t, 1000)
	if _, err := archive.VerifyRecords(m, packs, raws, archive.Options{}); err != nil {
		t.Fatalf("clean archive, sequential: %v", err)
	}
	before := runtime.NumGoroutine()
	p := StartParse(raws)
	if _, err := archive.VerifyRecords(m, packs, raws, archive.Options{Parsed: p.Get}); err != nil {
		t.Fatalf("clean archive, parallel: %v", err)
	}
	p.Stop()
	for _, seq := range []int{2, 500, 1000} {
		bad := append([][]byte(nil), raws...)
		bad[seq-1] = tamper(t, raws[seq-1])
		p := StartParse(bad)
		_, err := archive.VerifyRecords(m, packs, bad, archive.Options{Parsed: p.Get})
		p.Stop()
		f, ok := err.(*archive.Failure)
		if !ok || f.Seq != int64(seq) || f.Step != 2 || f.Code != adp.CodeInvalidSignature {
			t.Fatalf("tampered seq %d: %v", seq, err)
		}
		// The same file through `adpnode verify`.
		lines := bytes.Split(bytes.TrimRight(file, "\n"), []byte("\n"))
		for i, l := range lines {
			if bytes.Equal(l, raws[seq-1]) {
				lines[i] = bad[seq-1]
			}
		}
		var out strings.Builder
		okFile, err := File(&out, "room.jsonl", append(bytes.Join(lines, []byte("\n")), '\n'))
		if okFile || err != nil || !strings.Contains(out.String(), fmt.Sprintf("FAIL archive invalid at seq %d (step 2)", seq)) {
			t.Fatalf("verify of tampered seq %d: ok=%v err=%v out=%q", seq, okFile, err, out.String())
		}
	}
	testwait.Goroutines(t, 20*time.Second, "the parse workers gone", before)
}

// Hostile input: records out of order (a permutation) still verify, and a
// record that is not JSON fails at its position; neither hangs.
func TestParallelPermutationAndGarbage(t *testing.T) {
	m, packs, raws, _ := genArchive(t, 300)
	shuf := append([][]byte(nil), raws...)
	shuf[10], shuf[200] = shuf[200], shuf[10]
	p := StartParse(shuf)
	_, err := archive.VerifyRecords(m, packs, shuf, archive.Options{Parsed: p.Get})
	p.Stop()
	if err != nil {
		t.Fatalf("permutation: %v", err)
	}
	bad := append([][]byte(nil), raws...)
	bad[150] = []byte(`{"seq":`)
	p = StartParse(bad)
	_, err = archive.VerifyRecords(m, packs, bad, archive.Options{Parsed: p.Get})
	p.Stop()
	if f, ok := err.(*archive.Failure); !ok || f.Seq != 151 || f.Step != 2 {
		t.Fatalf("garbage: %v", err)
	}
}

// BenchmarkVerifyParallel reports offline archive verification on all
// cores (records/s) next to its ceiling in the same run: bare
// ed25519.Verify of the same records' envelope digests on GOMAXPROCS
// goroutines. Each iteration measures both, alternating, so the shared
// machine's load falls on both alike; ratio = verify rate / ceiling.
//
//	go test ./cmd/adpnode/internal/verifycmd -run '^$' -bench VerifyParallel -benchtime 5x -count 5
func BenchmarkVerifyParallel(b *testing.B) {
	m, packs, raws, _ := genArchive(b, 5000)
	type sig struct{ pub, msg, sig []byte }
	sigs := make([]sig, len(raws))
	for i, raw := range raws {
		_, env, err := record.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		s, _ := identity.DecodeB64Len(env.Signature, 64)
		sigs[i] = sig{env.Event.Actor.PublicKey(), env.Digest[:], s}
	}
	ceilingRun := func() time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		per := (len(sigs) + workers - 1) / workers
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(part []sig) {
				defer wg.Done()
				for _, s := range part {
					if !ed25519.Verify(s.pub, s.msg, s.sig) {
						panic("bad signature")
					}
				}
			}(sigs[min(w*per, len(sigs)):min((w+1)*per, len(sigs))])
		}
		wg.Wait()
		return time.Since(start)
	}
	var ceil, ver, seq, ceilCPU, verCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0 := processCPU()
		ceil += ceilingRun()
		c1 := processCPU()
		start := time.Now()
		p := StartParse(raws)
		if _, err := archive.VerifyRecords(m, packs, raws, archive.Options{Parsed: p.Get}); err != nil {
			b.Fatal(err)
		}
		p.Stop()
		ver += time.Since(start)
		ceilCPU += c1 - c0
		verCPU += processCPU() - c1
		if i == 0 {
			start = time.Now()
			if _, err := archive.VerifyRecords(m, packs, raws, archive.Options{}); err != nil {
				b.Fatal(err)
			}
			seq = time.Since(start)
		}
	}
	b.StopTimer()
	n := float64(len(raws) * b.N)
	b.ReportMetric(n/ver.Seconds(), "records/s")
	b.ReportMetric(n/ceil.Seconds(), "ceiling_verifies/s")
	b.ReportMetric(ceil.Seconds()/ver.Seconds(), "ratio")
	b.ReportMetric(float64(len(raws))/seq.Seconds(), "sequential_records/s")
	// The same ratio in CPU time: what it would be in wall time on cores
	// this process had to itself (the shared machine's load drops out).
	b.ReportMetric(ceilCPU.Seconds()/verCPU.Seconds(), "cpu_ratio")
}

// processCPU is this process's user + system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
