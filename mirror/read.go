package mirror

import (
	"bufio"
	"encoding/json"
	"io"
	"net/url"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/fedport"
	"github.com/adpnode/adpnode/internal/transcript"
	"github.com/adpnode/adpnode/live"
)

// Info describes a mirrored room: whose it is and how far it is verified.
type Info = fedport.MirrorInfo

// Info returns the room's mirror status.
func (r *Room) Info() Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A stall is only news while the mirror is behind: records that came
	// on the live stream since may have caught it up.
	stalled, why := r.stallErr != "" && r.st.Seq < r.want.Load(), ""
	if stalled {
		why = r.stallErr
	}
	return Info{Host: r.host, HostPeer: r.hostPeer.String(), RoomURL: r.url, VerifiedSeq: r.st.Seq, VerifiedHash: r.st.LastHash,
		KnownSeq:   max(r.want.Load(), r.st.Seq),
		Checkpoint: r.cp, Faulty: r.meta.Faulty, FrozenAt: r.meta.FrozenAt, Bytes: r.bytes, Pending: len(r.pending),
		Stalled: stalled, Error: why}
}

// ID returns the room ID.
func (r *Room) ID() string { return r.id }

// MirroredResource is the room resource as a mirror serves it.
type MirroredResource = fedport.MirroredResource

// Resource returns the room resource replayed from the verified chain,
// marked as a mirror.
func (r *Room) Resource(now int64) *MirroredResource {
	info := r.Info()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.st.Created() {
		return &MirroredResource{Resource: &room.Resource{ID: r.id, URL: r.url}, Mirror: info}
	}
	return &MirroredResource{Resource: r.st.Resource(now, r.url), Mirror: info}
}

// Events returns verified records after `after`, at most limit, and
// whether more follow.
func (r *Room) Events(after int64, limit int) ([]json.RawMessage, bool, error) {
	r.m.commit.Flush() // records applied are readable once the committer wrote them
	tip := r.Tip()
	var out []json.RawMessage
	err := r.m.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: min(limit, 256), Prefix: []byte(pfxRec + r.rk + "/")})
		defer it.Close()
		for it.Seek(seqKey(pfxRec, r.rk, after+1)); it.Valid() && len(out) < limit; it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if int64(len(out)) > tip-after {
		out = out[:max(tip-after, 0)]
	}
	return out, after+int64(len(out)) < tip, nil
}

// Close reasons of mirror streams, besides live's closed, slow_consumer
// and shutdown.
const (
	reasonFrozen  = "mirror_frozen"  // the host was caught misbehaving: ingest stopped
	reasonRemoved = "mirror_removed" // the operator stopped mirroring the room
)

// streamBuffer is the queue of one mirror stream.
const streamBuffer = 1024

// publish offers a verified record's JSON to the room's streams, framed
// once for all of them (nothing is built for a room nobody watches).
func (m *Mirror) publish(rk string, raw []byte) {
	if m.live.Watched(rk) {
		m.live.Publish(rk, live.NewItem("room.event", raw), nil)
	}
}

// Streams returns the number of open mirror streams.
func (m *Mirror) Streams() int { return m.live.Count() }

// Subscribe streams records as they are verified. The subscription ends
// (Reason says why) when the room freezes or is removed, the subscriber
// falls behind, the mirror closes, or the caller closes it.
func (r *Room) Subscribe() *live.Subscription[struct{}] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return live.Ended[struct{}](r.rk, reasonFrozen)
	}
	return r.m.live.Subscribe(r.rk, struct{}{})
}

// records returns every verified record.
func (r *Room) records() ([]*record.Record, error) {
	var out []*record.Record
	err := scan(r.m.db, []byte(pfxRec+r.rk+"/"), func(_, v []byte) error {
		rec, _, err := record.Parse(v)
		if err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// Archive returns the archive of a mirrored room once its verified chain
// shows it ended, with the mirror's view in manifest.extra.mirror, the
// host key in extra.host_key and, once fetched and checked (hostlog.go),
// the host log's proof of the last record in extra.host_log.
func (r *Room) Archive(now int64) (*archive.Archive, error) {
	a, _, err := r.archive(now, nil, nil)
	return a, err
}

// archive builds the archive; with md set, it also writes the
// Markdown transcript from the same state, under the room's lock.
func (r *Room) archive(now int64, md io.Writer, names func(identity.AgentID) string) (*archive.Archive, []*record.Record, error) {
	recs, err := r.records()
	if err != nil {
		return nil, nil, err
	}
	info := r.Info()
	proof, proved := r.m.hostLogProof(r.rk)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.st.Created() || r.st.StatusAt(now) != room.StatusEnded {
		return nil, nil, &adp.Error{Code: adp.CodeArchiveUnavailable, Message: "the mirrored room has not ended (as far as the verified chain shows)"}
	}
	if n := int64(len(recs)); n < r.st.Seq {
		// The verified state is ahead of what the group committer has
		// stored: an archive of the stored records would not match it.
		return nil, nil, &adp.Error{Code: adp.CodeUnavailable, Message: "the mirror's latest verified records are still being stored; retry shortly",
			Data: map[string]any{"reason": "storing", "retry_after_ms": 200}}
	} else if n > r.st.Seq {
		recs = recs[:r.st.Seq] // records stored past the replayed tip are not yet verified state
	}
	res := r.st.Resource(now, r.url)
	host := ""
	if u, err := url.Parse(r.url); err == nil {
		host = u.Host
	}
	m := archive.NewManifest(host, r.url, recs, now)
	m.Extra["mirror"] = info
	m.Extra["host_key"] = r.host
	if proof != nil && proved == m.LastHash {
		// The host's proof of this last record, checked when it was
		// fetched (hostlog.go): the same extra.host_log as the host's.
		m.Extra["host_log"] = proof
	}
	roomJSON, _ := json.Marshal(res)
	a := &archive.Archive{Manifest: m, Room: roomJSON, Packs: archive.PackDocs(r.st.Imports), Records: make([]json.RawMessage, len(recs))}
	for i, rec := range recs {
		a.Records[i], _ = rec.MarshalJSON()
	}
	if md != nil {
		if err := transcript.WriteNamed(md, m, r.st, res, recs, names); err != nil {
			return nil, nil, err
		}
	}
	return a, recs, nil
}

// WriteMarkdown writes the readable transcript of an ended mirrored room
// (the host's archive.md renderer, fed from the verified chain).
func (r *Room) WriteMarkdown(w io.Writer, now int64) error {
	var names func(identity.AgentID) string
	if f := r.m.cfg.Names; f != nil {
		// The names of the room's members and authors, resolved before
		// the room's lock is taken.
		if recs, err := r.records(); err == nil {
			seen := map[identity.AgentID]bool{}
			var ids []identity.AgentID
			for _, rec := range recs {
				if env, err := identity.ParseEnvelope(rec.Envelope); err == nil && !seen[env.Event.Actor] {
					seen[env.Event.Actor] = true
					ids = append(ids, env.Event.Actor)
				}
			}
			got := f(r.id, ids)
			names = func(a identity.AgentID) string { return got[a] }
		}
	}
	_, _, err := r.archive(now, w, names)
	return err
}

// WriteJSONL writes the mirrored room's JSONL archive.
func (r *Room) WriteJSONL(w io.Writer, now int64) error {
	a, recs, err := r.archive(now, nil, nil)
	if err != nil {
		return err
	}
	return archive.WriteJSONL(bufio.NewWriter(w), a.Manifest, a.Packs, recs)
}
