package federation

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/negentropy"
)

// ReconcileProtocol is anti-entropy for the directory: negentropy
// range-based set reconciliation over each side's directory entries (item
// id = SHA-256 of the signed announcement, timestamp = its issued_at:
// this node's own latest announcements and the entries of verified
// hosts), after which the initiator fetches the signed announcements it
// lacks and admits them exactly like gossip. Run with every peer on
// connect and every ReconcileInterval; bytes grow with what differs, not
// with the size of the directory.
//
// Frames (4-byte length, then a kind byte):
//
//	initiator: 'n' + negentropy message    -> responder: negentropy answer
//	initiator: 'f' + up to 256 ids (32 B)  -> responder: JSON array of signed announcements
const ReconcileProtocol = "/adp/index-reconcile/1"

// Reconciliation bounds (per session, either side).
const (
	reconFrameLimit = 128 << 10 // negentropy messages
	reconMaxRounds  = 48
	reconWantBatch  = 256 // ids per fetch
	reconMaxFetches = 64  // fetches per session: at most 16,384 entries
	reconAnswerMax  = syncPageBytes
	reconFrameWait  = 10 * time.Second
	reconSessionMax = time.Minute
	// reconSetMaxAge is how long a built item set is reused;
	// reconSetMinAge how long once the directory changed, so that a
	// peer that connects just after a change learns it at once, and the
	// set is rebuilt at most ten times a second however busy the index.
	reconSetMaxAge = time.Second
	reconSetMinAge = 100 * time.Millisecond
)

const (
	reconKindNeg   = 'n'
	reconKindFetch = 'f'
)

// reconSet is an immutable snapshot of this node's directory items.
type reconSet struct {
	at  time.Time
	set *negentropy.Set
	raw map[negentropy.ID][]byte
}

// reconItems returns the directory items, rebuilt when the set is older
// than reconSetMaxAge, or than reconSetMinAge once the directory changed,
// however many peers ask.
func (f *Federation) reconItems() *reconSet {
	f.reconMu.Lock()
	defer f.reconMu.Unlock()
	if f.recon != nil {
		if age := time.Since(f.recon.at); age < reconSetMinAge || age < reconSetMaxAge && !f.reconStale.Load() {
			return f.recon
		}
	}
	f.reconStale.Store(false) // a change from here on is built in now or marks the set stale again
	now := f.n.NowMs()
	live := f.idx.Live(now, true)
	own := f.ownAnnouncements(now)
	items := make([]negentropy.Item, 0, len(live)+len(own))
	raw := make(map[negentropy.ID][]byte, len(live)+len(own))
	add := func(issued int64, id [32]byte, b []byte) {
		items = append(items, negentropy.Item{Timestamp: uint64(max(issued, 0)), ID: id})
		raw[id] = b
	}
	for _, e := range live {
		add(e.IssuedAt, e.ID, e.Raw)
	}
	for _, p := range own {
		add(p.issued, p.id, p.raw)
	}
	f.recon = &reconSet{at: time.Now(), set: negentropy.NewSet(items), raw: raw}
	return f.recon
}

// ownAnnouncements returns this node's latest unexpired announcements.
func (f *Federation) ownAnnouncements(now int64) []published {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	out := make([]published, 0, len(f.published))
	for id, p := range f.published {
		if p.expires <= now {
			delete(f.published, id)
			continue
		}
		out = append(out, p)
	}
	return out
}

// serveReconcile answers one peer's reconciliation session: at most
// reconMaxRounds negentropy messages of at most reconFrameLimit and
// reconMaxFetches fetches of reconWantBatch ids, within reconSessionMax,
// each id answered at most once per session, all within the peer's pull
// budget (Limits.Pull); anything else resets the stream.
func (f *Federation) serveReconcile(s network.Stream) {
	id := s.Conn().RemotePeer()
	if !f.reconSlots.acquire(id) {
		f.stats.SyncRefused.Add(1)
		s.Reset()
		return
	}
	defer f.reconSlots.release(id)
	if !f.pull.take(id, 1, 0, 0) {
		f.refusePull(s)
		return
	}
	end := time.Now().Add(reconSessionMax)
	items := f.reconItems()
	sess := negentropy.NewSession(items.set, reconFrameLimit)
	r := bufio.NewReader(s)
	rounds, fetches := 0, 0
	var answered map[negentropy.ID]bool // ids sent in this session
	for {
		s.SetDeadline(minTime(end, time.Now().Add(reconFrameWait)))
		b, err := readFrame(r, reconFrameLimit+1)
		if errors.Is(err, io.EOF) {
			s.Close()
			return
		}
		if err != nil || len(b) == 0 {
			s.Reset()
			return
		}
		f.stats.PullRead.Add(int64(len(b) + 4))
		// The request itself, before any work on it.
		if !f.pull.take(id, 1, int64(len(b)+4), 0) {
			f.refusePull(s)
			return
		}
		var out []byte
		n := 0
		switch b[0] {
		case reconKindNeg:
			if rounds++; rounds > reconMaxRounds {
				s.Reset()
				return
			}
			if out, err = sess.Respond(b[1:]); err != nil {
				f.log.Debug("reconcile: bad message", "peer", id, "err", err)
				s.Reset()
				return
			}
		case reconKindFetch:
			ids := b[1:]
			if fetches++; fetches > reconMaxFetches || len(ids)%negentropy.IDSize != 0 || len(ids) > reconWantBatch*negentropy.IDSize {
				s.Reset()
				return
			}
			if answered == nil {
				answered = map[negentropy.ID]bool{}
			}
			ans := make([][]byte, 0, len(ids)/negentropy.IDSize)
			size := 0
			for i := 0; i < len(ids); i += negentropy.IDSize {
				x := negentropy.ID(ids[i : i+negentropy.IDSize])
				raw, ok := items.raw[x]
				if !ok || answered[x] {
					continue
				}
				if size+len(raw)+1 > reconAnswerMax {
					break
				}
				answered[x] = true
				ans = append(ans, raw)
				size += len(raw) + 1
			}
			n = len(ans)
			out = rawArray(nil, ans)
		default:
			s.Reset()
			return
		}
		if !f.pull.take(id, 0, int64(len(out)+4), n) {
			f.refusePull(s)
			return
		}
		f.stats.PullServed.Add(int64(len(out) + 4))
		f.stats.PullIDs.Add(int64(n))
		if writeFrame(s, out) != nil {
			s.Reset()
			return
		}
	}
}

// refusePull answers a request beyond the peer's pull budget: the stream
// is held for Limits.Pull.RefuseHold (the peer waits rather than asking
// again at once), then reset.
func (f *Federation) refusePull(s network.Stream) {
	f.stats.PullRefused.Add(1)
	t := time.NewTimer(f.cfg.Limits.Pull.RefuseHold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.ctx.Done():
	}
	s.Reset()
}

// rawArray appends a JSON array of the signed announcements in raws, each
// exactly as signed and stored. json.Marshal would not do: it re-escapes
// '&', '<' and '>' inside a json.RawMessage, and an announcement whose
// bytes changed no longer matches its item id (SHA-256 of the signed
// bytes), so the peer that asked for it drops it.
func rawArray(dst []byte, raws [][]byte) []byte {
	dst = append(dst, '[')
	for i, raw := range raws {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, raw...)
	}
	return append(dst, ']')
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// errNoReconcile: the peer does not speak ReconcileProtocol.
var errNoReconcile = errors.New("peer does not support index reconciliation")

// ReconcileResult describes one session (initiator side).
type ReconcileResult struct {
	Rounds  int // negentropy round trips
	Need    int // ids the peer has and this node lacked
	Have    int // ids this node has and the peer lacked
	Fetched int // signed announcements received
	Learned int // of which admitted into the index
	Items   int // this node's directory items in the session
}

// reconcileWith runs one session with a peer, one at a time per peer.
func (f *Federation) reconcileWith(ctx context.Context, id peer.ID) (ReconcileResult, error) {
	f.reconMu.Lock()
	if f.reconBusy[id] {
		f.reconMu.Unlock()
		return ReconcileResult{}, errors.New("a session with this peer is running")
	}
	f.reconBusy[id] = true
	f.reconMu.Unlock()
	defer func() {
		f.reconMu.Lock()
		delete(f.reconBusy, id)
		f.reconMu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, reconSessionMax)
	defer cancel()
	var res ReconcileResult
	s, err := f.h.NewStream(ctx, id, ReconcileProtocol)
	if err != nil {
		if errors.Is(err, network.ErrNoConn) || ctx.Err() != nil {
			return res, err
		}
		return res, fmt.Errorf("%w: %v", errNoReconcile, err)
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	r := bufio.NewReader(s)
	items := f.reconItems()
	res.Items = items.set.Len()
	sess := negentropy.NewSession(items.set, reconFrameLimit)
	msg := sess.Initiate()
	var need []negentropy.ID
	for msg != nil {
		if res.Rounds++; res.Rounds > reconMaxRounds {
			s.Reset()
			return res, errors.New("reconciliation did not converge")
		}
		if err := writeFrame(s, append([]byte{reconKindNeg}, msg...)); err != nil {
			s.Reset()
			return res, err
		}
		ans, err := readFrame(r, reconFrameLimit+1)
		if err != nil {
			s.Reset()
			return res, err
		}
		var have, n []negentropy.ID
		if msg, have, n, err = sess.Reconcile(ans); err != nil {
			s.Reset()
			return res, err
		}
		res.Have += len(have)
		res.Need += len(n)
		need = append(need, n[:min(len(n), reconWantBatch*reconMaxFetches-len(need))]...)
	}
	for fetches := 0; len(need) > 0 && fetches < reconMaxFetches; fetches++ {
		batch := need[:min(len(need), reconWantBatch)]
		need = need[len(batch):]
		req := make([]byte, 1, 1+len(batch)*negentropy.IDSize)
		req[0] = reconKindFetch
		want := make(map[negentropy.ID]bool, len(batch))
		for _, x := range batch {
			req = append(req, x[:]...)
			want[x] = true
		}
		if err := writeFrame(s, req); err != nil {
			s.Reset()
			return res, err
		}
		b, err := readFrame(r, reconAnswerMax+reconAnswerMax/8)
		if err != nil {
			s.Reset()
			return res, err
		}
		var raws []json.RawMessage
		if err := json.Unmarshal(b, &raws); err != nil || len(raws) > len(batch) {
			s.Reset()
			return res, errors.New("malformed fetch answer")
		}
		got := 0
		for _, raw := range raws {
			h := sha256.Sum256(raw)
			if !want[h] { // only what was asked, each once
				continue
			}
			delete(want, h)
			got++
			res.Fetched++
			ok, err := f.admitRelayed(ctx, id, raw)
			if err != nil {
				s.Reset()
				return res, err
			}
			if ok {
				res.Learned++
			}
		}
		// An answer cut at reconAnswerMax: ask again for the rest (the
		// fetch count bounds the session). Ids the peer no longer has
		// (an answer with none of them) are dropped.
		if got > 0 && len(want) > 0 {
			for _, x := range batch {
				if want[x] {
					need = append(need, x)
				}
			}
		}
	}
	return res, nil
}

// admitRelayed validates a signed announcement that a peer relayed
// outside gossip (index sync, reconciliation) exactly like a gossiped
// one, with the host binding checked against the announced peer ID
// instead of the gossip author, and reports whether it was admitted.
//
// from is the peer that relayed it. An announcement gossip would reject
// penalises from as a rejected gossip message penalises its sender (see
// penalise). A forgery (not a valid signed announcement of the key and
// peer ID it names) ends the exchange at once (errRelayedReject); a claim
// refused for its room ID (which an honest peer that saw another claimant
// verified first may relay) ends it once from's score falls to the
// graylist threshold, where gossipsub stops listening to it too.
func (f *Federation) admitRelayed(ctx context.Context, from peer.ID, raw []byte) (bool, error) {
	e, err := index.Parse(raw)
	if err != nil {
		f.penalise(from)
		return false, errRelayedReject
	}
	pid, err := peer.Decode(e.Host.PeerID)
	if err != nil {
		f.penalise(from)
		return false, errRelayedReject
	}
	if k, ok := HostKeyOf(pid); !ok || k != e.Host.Key {
		f.penalise(from)
		return false, errRelayedReject
	}
	if e.ExpiresAt <= f.n.NowMs() {
		return false, nil
	}
	if f.admit(ctx, e) == pubsub.ValidationReject {
		f.penalise(from)
		if f.penalty.score(from, time.Now()) <= graylistThreshold {
			return false, errRelayedReject
		}
		return false, nil
	}
	return true, nil
}

// errRelayedReject: a peer relayed an announcement that gossip would
// reject.
var errRelayedReject = errors.New("the peer relayed an announcement gossip would reject")

// Reconcile runs one reconciliation session with a connected peer now
// (operators, tests); anti-entropy runs it by itself.
func (f *Federation) Reconcile(ctx context.Context, id peer.ID) (ReconcileResult, error) {
	return f.reconcileWith(ctx, id)
}

// syncPeer brings a newly connected peer's directory in: by
// reconciliation, or by the full index sync when the peer predates it.
func (f *Federation) syncPeer(ctx context.Context, id peer.ID) {
	res, err := f.reconcileWith(ctx, id)
	switch {
	case errors.Is(err, errNoReconcile):
		f.syncFrom(ctx, id)
	case err != nil:
		f.log.Debug("reconcile", "peer", id, "err", err)
	case res.Learned > 0:
		f.log.Debug("reconcile", "peer", id, "rounds", res.Rounds, "need", res.Need, "have", res.Have, "learned", res.Learned)
	}
}

// antiEntropyLoop reconciles with every connected index peer every
// ReconcileInterval (±25 % jitter, so that peers do not synchronise).
func (f *Federation) antiEntropyLoop(ctx context.Context) {
	for {
		d := f.cfg.ReconcileInterval
		d = d*3/4 + time.Duration(rand.Int64N(int64(d/2)+1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for _, id := range f.ps.ListPeers(IndexTopic) {
			if ctx.Err() != nil {
				return
			}
			f.syncPeer(ctx, id)
		}
	}
}
