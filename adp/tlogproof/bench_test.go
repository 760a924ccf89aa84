package tlogproof_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp/tlogproof"
)

type sliceHashes []tlog.Hash

func (s sliceHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = s[x]
	}
	return out, nil
}

// BenchmarkVerifyInclusion1M: one record's inclusion proof in a log of
// 1,048,576 leaves (built with golang.org/x/mod/sumdb/tlog): its size on
// the wire and the time to verify it.
//
//	go test ./adp/tlogproof -run '^$' -bench VerifyInclusion1M -benchtime 20000x
func BenchmarkVerifyInclusion1M(b *testing.B) {
	const n = 1 << 20
	st := make(sliceHashes, 0, 2*n+64)
	var last [32]byte
	for i := int64(0); i < n; i++ {
		var d [8]byte
		binary.BigEndian.PutUint64(d[:], uint64(i))
		last = sha256.Sum256(d[:])
		hs, err := tlog.StoredHashes(i, last[:], st)
		if err != nil {
			b.Fatal(err)
		}
		st = append(st, hs...)
	}
	root, err := tlog.TreeHash(n, st)
	if err != nil {
		b.Fatal(err)
	}
	idx := int64(n - 1)
	rp, err := tlog.ProveRecord(n, idx, st)
	if err != nil {
		b.Fatal(err)
	}
	var hs [][]byte
	for _, h := range rp {
		hs = append(hs, append([]byte(nil), h[:]...))
	}
	p := tlogproof.InclusionProof{LeafIndex: uint64(idx), TreeSize: n, Hashes: tlogproof.EncodeHashes(hs)}
	js, _ := json.Marshal(p)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tlogproof.VerifyInclusion(p, last, [32]byte(root)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(hs)*32), "proof_raw_bytes")
	b.ReportMetric(float64(len(js)), "proof_json_bytes")
}
