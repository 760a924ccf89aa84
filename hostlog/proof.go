package hostlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/tessera/api/layout"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/hostport"
)

// Inclusion returns the proof that the record with this hash is in the log
// at the given tree size (0: the latest published checkpoint, which the
// answer then carries).
func (l *Log) Inclusion(ctx context.Context, recordHash [32]byte, size uint64) (tlogproof.RecordProof, error) {
	var rp tlogproof.RecordProof
	raw, cp, err := l.Checkpoint(ctx)
	if err != nil {
		return rp, err
	}
	idx, found, err := l.IndexOf(recordHash)
	if err != nil {
		return rp, err
	}
	if !found || idx >= cp.Size {
		return rp, adp.Reason(adp.CodeNotFound, "not_in_log", "no record with this hash is covered by the latest checkpoint yet").
			WithData("checkpoint_size", cp.Size)
	}
	if size == 0 {
		size = cp.Size
		rp.Checkpoint = string(raw)
	}
	if size > cp.Size {
		return rp, adp.Reason(adp.CodeInvalidRequest, "tree_size_too_large", "tree_size is beyond the latest checkpoint").
			WithData("checkpoint_size", cp.Size)
	}
	if idx >= size {
		return rp, adp.Reason(adp.CodeInvalidRequest, "leaf_beyond_size", "the record's leaf index is not below tree_size").
			WithData("leaf_index", idx)
	}
	nodes, err := proof.Inclusion(idx, size)
	if err != nil {
		return rp, err
	}
	hs, err := l.proofs(ctx, size, nodes)
	if err != nil {
		return rp, err
	}
	rp.RecordHash = tlogproof.EncodeRecordHash(recordHash)
	rp.Inclusion = tlogproof.InclusionProof{LeafIndex: idx, TreeSize: size, Hashes: tlogproof.EncodeHashes(hs)}
	return rp, nil
}

// Consistency returns the proof that the tree of size1 leaves is a prefix
// of the tree of size2 leaves; both at most the latest checkpoint's size.
func (l *Log) Consistency(ctx context.Context, size1, size2 uint64) (tlogproof.ConsistencyProof, error) {
	var p tlogproof.ConsistencyProof
	_, cp, err := l.Checkpoint(ctx)
	if err != nil {
		return p, err
	}
	if size2 == 0 {
		size2 = cp.Size
	}
	switch {
	case size2 > cp.Size:
		return p, adp.Reason(adp.CodeInvalidRequest, "tree_size_too_large", "size2 is beyond the latest checkpoint").WithData("checkpoint_size", cp.Size)
	case size1 > size2:
		return p, adp.Reason(adp.CodeInvalidRequest, "sizes_out_of_order", "size1 is above size2")
	}
	p.Size1, p.Size2 = size1, size2
	if size1 == 0 || size1 == size2 {
		p.Hashes = []string{}
		return p, nil
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return p, err
	}
	hs, err := l.proofs(ctx, size2, nodes)
	if err != nil {
		return p, err
	}
	p.Hashes = tlogproof.EncodeHashes(hs)
	return p, nil
}

// proofs builds the proof with the given node list in a tree of size
// leaves from the log's tiles. Nodes of complete subtrees never change, so
// they are cached across requests and sizes (bounded).
func (l *Log) proofs(ctx context.Context, size uint64, nodes proof.Nodes) ([][]byte, error) {
	hashes := make([][]byte, 0, len(nodes.IDs))
	tiles := map[[2]uint64][]byte{}
	for _, id := range nodes.IDs {
		h, err := l.node(ctx, size, id, tiles)
		if err != nil {
			return nil, err
		}
		hashes = append(hashes, h)
	}
	return nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
}

const maxCachedNodes = 1 << 16 // about 6 MiB

func (l *Log) node(ctx context.Context, size uint64, id compact.NodeID, tiles map[[2]uint64][]byte) ([]byte, error) {
	l.nodeMu.Lock()
	h, ok := l.nodes[id]
	l.nodeMu.Unlock()
	if ok {
		return h, nil
	}
	tileLevel, tileIndex, nodeLevel, nodeIndex := layout.NodeCoordsToTileAddress(uint64(id.Level), id.Index)
	key := [2]uint64{tileLevel, tileIndex}
	raw, ok := tiles[key]
	if !ok {
		var err error
		raw, err = l.reader.ReadTile(ctx, tileLevel, tileIndex, layout.PartialTileSize(tileLevel, tileIndex, size))
		if err != nil {
			return nil, fmt.Errorf("hostlog: tile %d/%d: %w", tileLevel, tileIndex, err)
		}
		tiles[key] = raw
	}
	n := uint64(1) << nodeLevel
	first, last := nodeIndex*n*32, (nodeIndex+1)*n*32
	if last > uint64(len(raw)) {
		return nil, fmt.Errorf("hostlog: tile %d/%d has %d hashes; node %v needs %d", tileLevel, tileIndex, len(raw)/32, id, last/32)
	}
	h = subtreeRoot(raw[first:last])
	l.nodeMu.Lock()
	if len(l.nodes) >= maxCachedNodes {
		clear(l.nodes)
	}
	l.nodes[id] = h
	l.nodeMu.Unlock()
	return h, nil
}

// subtreeRoot hashes a perfect subtree's row of node hashes (a power of
// two of them) up to its root.
func subtreeRoot(row []byte) []byte {
	level := make([][]byte, len(row)/32)
	for i := range level {
		level[i] = row[i*32 : (i+1)*32]
	}
	for len(level) > 1 {
		next := level[:len(level)/2]
		for i := range next {
			next[i] = rfc6962.DefaultHasher.HashChildren(level[2*i], level[2*i+1])
		}
		level = next
	}
	return level[0]
}

// Resource is one file of the log's tlog-tiles layout.
type Resource = hostport.LogResource

// entryBytes is the size of one serialised entry of a bundle: a 2-byte
// length and the 32-byte record hash.
const entryBytes = 2 + 32

// Read serves a tlog-tiles path under the log's URL: "checkpoint",
// "tile/<L>/<N>[.p/<W>]" or "tile/entries/<N>[.p/<W>]". The path is parsed
// into numbers and the file name rebuilt from them, so nothing outside the
// layout is reachable; the answer is at most one tile (8 KiB) or bundle.
func (l *Log) Read(ctx context.Context, path string) (Resource, error) {
	notFound := adp.Errorf(adp.CodeNotFound, "no such log resource")
	if path == "checkpoint" {
		raw, _, err := l.Checkpoint(ctx)
		if err != nil {
			return Resource{}, err
		}
		return Resource{Body: raw, Checkpoint: true}, nil
	}
	rest, ok := strings.CutPrefix(path, "tile/")
	if !ok || len(path) > 64 {
		return Resource{}, notFound
	}
	level, index, ok := strings.Cut(rest, "/")
	if !ok {
		return Resource{}, notFound
	}
	var (
		body  []byte
		err   error
		p     uint8
		width int
	)
	if level == "entries" {
		var i uint64
		i, p, err = layout.ParseTileIndexPartial(index)
		if err != nil || layout.EntriesPath(i, p) != path {
			return Resource{}, notFound
		}
		body, err = l.reader.ReadEntryBundle(ctx, i, p)
		width = entryBytes
	} else {
		var lv, i uint64
		lv, i, p, err = layout.ParseTileLevelIndexPartial(level, index)
		if err != nil || layout.TilePath(lv, i, p) != path {
			return Resource{}, notFound
		}
		body, err = l.reader.ReadTile(ctx, lv, i, p)
		width = 32
	}
	if errors.Is(err, os.ErrNotExist) {
		return Resource{}, notFound
	}
	if err != nil {
		return Resource{}, err
	}
	if p > 0 {
		// A partial resource may have been replaced by the full one: its
		// first p entries are the partial resource (entries are fixed size).
		if len(body) < int(p)*width {
			return Resource{}, notFound
		}
		body = body[:int(p)*width]
	}
	return Resource{Body: body, Immutable: p == 0}, nil
}

// Witnessed is what the log reads of its witnesses' cosignatures
// (*witness.Submitter): the newest checkpoint they cosigned, with their
// lines, its size and their verifier keys.
type Witnessed interface {
	Witnessed() (signed []byte, size uint64, vkeys []string)
}

// SetWitnessed makes proofs prefer the newest cosigned checkpoint.
func (l *Log) SetWitnessed(w Witnessed) { l.witnessed.Store(&w) }

// ProofFile returns the record proof file of a record: against the newest
// checkpoint witnesses cosigned when it covers the record (the file then
// carries their lines and keys), else against the latest checkpoint.
func (l *Log) ProofFile(ctx context.Context, recordHash [32]byte) (tlogproof.File, error) {
	f := tlogproof.File{Type: tlogproof.FileType, VerifierKey: l.vkey}
	if w := l.witnessed.Load(); w != nil {
		if signed, size, vkeys := (*w).Witnessed(); len(vkeys) > 0 && size > 0 { // size 0: Inclusion would take the latest
			if rp, err := l.Inclusion(ctx, recordHash, size); err == nil {
				rp.Checkpoint = string(signed)
				f.RecordProof, f.Witnesses = rp, vkeys
				return f, nil
			}
		}
	}
	rp, err := l.Inclusion(ctx, recordHash, 0)
	f.RecordProof = rp
	return f, err
}

// ArchiveProof returns the record proof file of a room's last record
// (ProofFile), for an archive's extra.host_log, or nil when no checkpoint
// covers it yet.
func (l *Log) ArchiveProof(recordHash string) *tlogproof.File {
	leaf, err := tlogproof.RecordLeaf(recordHash)
	if err != nil {
		return nil
	}
	f, err := l.ProofFile(context.Background(), leaf)
	if err != nil {
		return nil
	}
	return &f
}
