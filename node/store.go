package node

import (
	"encoding/binary"

	"github.com/adpnode/adpnode/internal/groupcommit"
)

// Key spaces of the node's Badger database (ARCHITECTURE.md, Storage).
const (
	pfxRecord   = "r/"       // r/<room>/<seq:8 BE>      -> record JSON
	pfxEnvelope = "e/"       // e/<envelope or record hash 32> -> <room>/<seq:8 BE>
	pfxNonce    = "n/"       // n/<agent id>              -> nonce:8 | accepted_at:8
	pfxJoinReq  = "j/"       // j/<room>/<request id>     -> join request JSON
	pfxArchive  = "x/"       // x/<room>                  -> archive generated_at:8
	pfxPack     = "p/"       // p/<digest>                -> external pack bytes
	pfxSnapshot = "s/"       // s/<room>                  -> room.State.Encode() at some seq
	pfxRoom     = "h/"       // h/<room>                  -> empty: the room exists (written with its room.create)
	pfxTerminal = "t/"       // t/<room>                  -> cold room summary JSON (cold.go), with its final s/<room>
	pfxWitness  = "w/"       // w/<room>/<witness key>    -> cosignature of a checkpoint of the room (witness.go)
	pfxMember   = "a/"       // a/<agent id>/<room>       -> flags:1 | role, for cold rooms (cold.go)
	keyLayout   = "v/layout" // -> layout version:8
	// l/… is the host log's journal (package tlog): l/i/<index>, l/h/<hash>,
	// l/w/<room>, l/n, l/clean. The node never writes there.
)

// layoutVersion is the storage layout this code writes. Version 2 added
// record hashes to the envelope index and room-state snapshots; a data dir
// without the key is upgraded at start (one full replay). Version 3 added
// the room registry (h/), so that a start lists rooms from one dense key
// range instead of seeking through every room's records; a version 2 dir
// gets its registry written at start (no replay).
const layoutVersion = 3

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
