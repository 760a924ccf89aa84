package attention

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/internal/groupcommit"
)

// How a batch's writes (a follower's, the owner's, the API's) reach the
// disk.
//
// A batch's sets and deletes are kept in order in writes.ops. With
// Config.Commit (a node: Node.CommitWith) they ride the node's group
// commit: they share the transaction, and the fsync, of the records written
// beside them, so under write load the inbox adds no synced write of its
// own. Without it they go in a transaction of their own.
//
// One transaction holds at most maxChunkOps operations and about
// maxChunkBytes; a larger batch is committed as several, in order. A
// commit ends only at a cut (writes.unit): after a whole mention (the item
// with its inbox's head), a whole feed change (the item, the subscription's
// head and the room's match state), a whole feed entry's items with the
// follower's position (follow.go) or a whole deletion, so a crash between
// two commits of one batch leaves no item beyond its head and no position
// beyond what was derived. Within one
// commit a key written twice is written once, with its last value (an
// inbox's head is set with each of its items).

const (
	maxChunkOps   = 8192
	maxChunkBytes = 1 << 20
)

func (w *writes) set(k, v []byte) { w.ops = append(w.ops, groupcommit.KV{K: k, V: v}) }
func (w *writes) del(k []byte)    { w.ops = append(w.ops, groupcommit.KV{K: k, Del: true}) }

// unit marks the end of a consistent group of ops: a commit may end here.
func (w *writes) unit() { w.cuts = append(w.cuts, len(w.ops)) }

// chunks splits w.ops into commits of at most maxOps operations and about
// maxBytes, ending each at the last cut that fits; a group with no cut
// inside that is larger than one commit is split where it overflows.
func (w *writes) chunks(maxOps, maxBytes int) [][]groupcommit.KV {
	var out [][]groupcommit.KV
	start, last, size, ci := 0, 0, 0, 0
	for i, op := range w.ops {
		for ci < len(w.cuts) && w.cuts[ci] <= i {
			if w.cuts[ci] > start {
				last = w.cuts[ci]
			}
			ci++
		}
		n := len(op.K) + len(op.V) + 16
		if i > start && (i-start >= maxOps || size+n > maxBytes) {
			end := i
			if last > start {
				end = last
			}
			out = append(out, w.ops[start:end])
			size = 0
			for _, o := range w.ops[end:i] {
				size += len(o.K) + len(o.V) + 16
			}
			start = end
		}
		size += n
	}
	if start < len(w.ops) {
		out = append(out, w.ops[start:])
	}
	return out
}

// lastWrites keeps, of the ops of one commit, the last one of each key (in
// one transaction only the last write of a key counts, but Badger counts
// every one against the transaction's size).
func lastWrites(ops []groupcommit.KV) []groupcommit.KV {
	// Only an inbox's or a subscription's head is written more than once
	// in a batch; other keys are left out of the map.
	last := map[string]*int{}
	dups := 0
	for i, op := range ops {
		if !rewritten(op.K) {
			continue
		}
		if p := last[string(op.K)]; p != nil {
			*p = i
			dups++
		} else {
			j := i
			last[string(op.K)] = &j
		}
	}
	if dups == 0 {
		return ops
	}
	out := make([]groupcommit.KV, 0, len(ops)-dups)
	for i, op := range ops {
		if rewritten(op.K) && *last[string(op.K)] != i {
			continue
		}
		out = append(out, op)
	}
	return out
}

// feedPosSuffix ends the keys of attention's positions in the change feeds
// (node: fp/attention, mirror: m/fp/attention).
const feedPosSuffix = "fp/" + Follower

// rewritten reports whether k is a key a batch may write more than once
// (an inbox's head, a subscription's meta, a room's match state, a room's
// mark, a feed position).
func rewritten(k []byte) bool {
	return bytes.HasPrefix(k, []byte(pfxInbox)) || bytes.HasPrefix(k, []byte(pfxSub)) || bytes.HasPrefix(k, []byte(pfxMatch)) ||
		bytes.HasPrefix(k, []byte(pfxPrivate)) || bytes.HasPrefix(k, []byte(pfxWater)) || bytes.HasSuffix(k, []byte(feedPosSuffix))
}

// write stores w durably: it returns once every op is on disk (or failed).
// Then the feeds' heads it moved count as durable: a snapshot waiting for
// them may answer. (A failed write is logged by its caller and lets them
// go on too: waiting would not bring its items back.)
func (a *Attention) write(w *writes) error {
	err := a.writeOps(w)
	if len(w.heads) > 0 {
		a.mu.Lock()
		for sb, h := range w.heads {
			sb.durable = max(sb.durable, h)
		}
		ch := a.flushed
		a.flushed = make(chan struct{})
		a.mu.Unlock()
		close(ch)
	}
	return err
}

func (a *Attention) writeOps(w *writes) error {
	maxOps, maxBytes := maxChunkOps, maxChunkBytes
	if a.cfg.chunkOps > 0 {
		maxOps, maxBytes = a.cfg.chunkOps, a.cfg.chunkBytes
	}
	chunks := w.chunks(maxOps, maxBytes)
	for i := range chunks {
		chunks[i] = lastWrites(chunks[i])
	}
	if c := a.cfg.Commit; c != nil {
		// Queue every commit, then wait for them: the committer writes
		// them in order.
		done := make(chan error, len(chunks))
		queued := 0
		var qerr, cerr error
		for ; queued < len(chunks); queued++ {
			if h := a.cfg.beforeCommit; h != nil {
				h(queued, len(chunks))
			}
			if qerr = c(chunks[queued], func(err error) { done <- err }); qerr != nil {
				break
			}
		}
		for k := 0; k < queued; k++ {
			if err := <-done; err != nil && cerr == nil {
				cerr = err
			}
		}
		switch {
		case cerr != nil:
			return cerr
		case qerr == nil:
			return nil
		case !errors.Is(qerr, groupcommit.ErrClosed):
			return qerr
		}
		// The node is closing: what was not queued goes in transactions
		// of its own.
		chunks = chunks[queued:]
	}
	for i, ops := range chunks {
		if h := a.cfg.beforeCommit; h != nil && a.cfg.Commit == nil {
			h(i, len(chunks))
		}
		if err := a.cfg.DB.Update(func(txn *badger.Txn) error {
			for _, op := range ops {
				var err error
				if op.Del {
					err = txn.Delete(op.K)
				} else {
					err = txn.Set(op.K, op.V)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// appendMention appends it as JSON, the bytes json.Marshal would give, at a
// fraction of its cost: the owner encodes one per mentioned agent and
// record, on the write path's heels.
func appendMention(b []byte, it *storedMention) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, it.Seq, 10)
	b = append(b, `,"room_id":`...)
	b = appendJSONString(b, it.RoomID)
	b = append(b, `,"room_seq":`...)
	b = strconv.AppendInt(b, it.RoomSeq, 10)
	b = append(b, `,"record_hash":`...)
	b = appendJSONString(b, it.RecordHash)
	b = append(b, `,"room_url":`...)
	b = appendJSONString(b, it.RoomURL)
	b = append(b, `,"host":`...)
	b = appendJSONString(b, it.Host)
	b = append(b, `,"actor":`...)
	b = appendJSONString(b, string(it.Actor))
	b = append(b, `,"type":`...)
	b = appendJSONString(b, it.Type)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, it.CreatedAt, 10)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, it.At, 10)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, it.Source)
	b = append(b, `,"p":`...)
	b = strconv.AppendBool(b, it.Public)
	b = append(b, `,"r":`...)
	b = strconv.AppendBool(b, it.Readable)
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal does: printable ASCII that
// needs no escape as is, anything else through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return append(b, mustJSON(s)...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
