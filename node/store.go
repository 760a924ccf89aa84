package node

import (
	"encoding/binary"

	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Key spaces of the node's Badger database: key and value shapes are in
// the storage layout table (internal/storelayout, docs/storage.md).
const (
	pfxRecord   = storelayout.Record
	pfxEnvelope = storelayout.Envelope
	pfxNonce    = storelayout.Nonce
	pfxJoinReq  = storelayout.JoinReq
	pfxArchive  = storelayout.Archive
	pfxPack     = storelayout.Pack
	pfxSnapshot = storelayout.Snapshot
	pfxRoom     = storelayout.Room
	pfxTerminal = storelayout.Terminal
	pfxMember   = storelayout.Member
	keyLayout   = storelayout.Layout
)

// layoutVersion is the storage layout this code writes. Version 2 added
// record hashes to the envelope index and room-state snapshots; a data dir
// without the key is upgraded at start (one full replay). Version 3 added
// the room registry (h/), so that a start lists rooms from one dense key
// range instead of seeking through every room's records; a version 2 dir
// gets its registry written at start (no replay).
const layoutVersion = storelayout.Version

func snapshotKey(roomID string) []byte { return []byte(pfxSnapshot + roomID) }

func roomKey(roomID string) []byte     { return []byte(pfxRoom + roomID) }
func terminalKey(roomID string) []byte { return []byte(pfxTerminal + roomID) }

func recordKey(roomID string, seq int64) []byte {
	k := make([]byte, 0, len(pfxRecord)+len(roomID)+9)
	k = append(k, pfxRecord...)
	k = append(k, roomID...)
	k = append(k, '/')
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

func envelopeKey(digest [32]byte) []byte {
	return append([]byte(pfxEnvelope), digest[:]...)
}

func envelopeValue(roomID string, seq int64) []byte {
	v := append([]byte(roomID), '/')
	return binary.BigEndian.AppendUint64(v, uint64(seq))
}

func parseEnvelopeValue(v []byte) (string, int64, bool) {
	if len(v) < 10 || v[len(v)-9] != '/' {
		return "", 0, false
	}
	return string(v[:len(v)-9]), int64(binary.BigEndian.Uint64(v[len(v)-8:])), true
}

type kv = groupcommit.KV
