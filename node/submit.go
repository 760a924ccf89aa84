package node

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/changefeed"
)

// Submit runs the write path of ARCHITECTURE.md for one envelope body.
// pathRoom is "" for POST /v1/rooms (room.create) and the path room ID for
// POST /v1/rooms/{room_id}. Errors are *adp.Error (a nonce rejection carries
// data.max_seen_nonce, identity.NonceNotGreater).
func (n *Node) Submit(ctx context.Context, body []byte, pathRoom string) (*hostport.Result, error) {
	if n.closing.Load() {
		return nil, adp.Errorf(adp.CodeUnavailable, "node is shutting down")
	}
	n.inflight.Add(1)
	defer n.inflight.Done()
	if err := n.writable(); err != nil { // disk below the reserve (disk.go)
		return nil, err
	}

	// Identity §6 steps 1–5: strict parse and shape, JCS, hash, actor, signature.
	env, err := identity.ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	ev := &env.Event
	if pathRoom == "" && ev.Type != "room.create" {
		return nil, adp.Reason(adp.CodeInvalidEvent, "wrong_endpoint", "POST /v1/rooms accepts only room.create; send other events to /v1/rooms/{room_id}")
	}
	if pathRoom != "" {
		if ev.Type == "room.create" {
			return nil, adp.Reason(adp.CodeInvalidEvent, "wrong_endpoint", "room.create goes to POST /v1/rooms")
		}
		if ev.RoomID == nil || *ev.RoomID != pathRoom {
			return nil, adp.Reason(adp.CodeInvalidEvent, "room_mismatch", "event.room_id must equal the room ID in the path (§16, §22)")
		}
	}
	if err := env.Verify(); err != nil {
		return nil, err
	}

	// External packs are fetched before the actor lock: the stripe is
	// shared with other agents, and a slow pack server must not stall them.
	// Stale or replayed envelopes are refused first so they cannot make
	// this node dial, and every fetch that needs the network is charged to
	// the actor's room.create quota before it dials; failures are cached
	// per URL and digest by the fetcher.
	if err := n.precheck(env, pathRoom); err != nil {
		return nil, err
	}
	prepaid := false
	src, fetched, err := n.packs.prefetch(ctx, ev.Type, ev.Payload, func() error {
		if err := n.chargePackFetch(ev.Actor); err != nil {
			return err
		}
		prepaid = ev.Type == "room.create"
		return nil
	})
	if err != nil {
		return nil, err
	}

	// Serialise this actor's writes: nonce check and acceptance are atomic.
	lock := &n.actors[actorStripe(ev.Actor)]
	lock.Lock()
	defer lock.Unlock()

	// Step 6: exact resubmission answers from the durable index. A room
	// event can only be a record of the room it names, whose state indexes
	// every envelope hash, so only room.create needs the Badger index
	// (whose read would also wait for the commit in flight). For a room
	// event the lookup is deferred: an envelope that passes the window and
	// nonce checks is looked up by Admit under the sequencer lock anyway,
	// and its duplicate_event answer is turned into the resubmission there
	// (one index read per write instead of two); only an envelope that
	// fails those checks is looked up here, before they answer.
	if pathRoom == "" {
		if roomID, seq, ok, err := n.lookupEnvelope(env.Digest); err != nil {
			return nil, internal(err)
		} else if ok {
			return n.resubmission(roomID, seq, ev.Actor)
		}
	}
	resubmitted := func() (*hostport.Result, bool, error) {
		if pathRoom == "" {
			return nil, false, nil
		}
		hr, ok := n.room(pathRoom)
		if !ok {
			return nil, false, nil
		}
		var seq int64
		var dup bool
		var rerr error
		if err := n.view(hr, func(st *room.State) { seq, dup, rerr = st.SeqOf(env.Hash) }); err != nil {
			return nil, true, err
		}
		if rerr != nil {
			return nil, true, rerr
		}
		if !dup {
			return nil, false, nil
		}
		res, err := n.resubmission(pathRoom, seq, ev.Actor)
		return res, true, err
	}

	// Step 7: time window.
	now := n.NowMs()
	if d := now - ev.CreatedAt; d > n.cfg.Window.Milliseconds() || -d > n.cfg.Window.Milliseconds() {
		if res, dup, err := resubmitted(); dup {
			return res, err
		}
		return nil, &adp.Error{Code: adp.CodeTimestampOutOfWindow, Message: "created_at is outside the live-write window",
			Data: map[string]any{"window_ms": n.cfg.Window.Milliseconds(), "server_time": now}}
	}
	// Step 8: nonce.
	if max := n.nonces.max(ev.Actor, now); ev.Nonce <= max {
		if res, dup, err := resubmitted(); dup {
			return res, err
		}
		return nil, identity.NonceNotGreater(max)
	}

	// Step 9: the room.
	var hr *hostedRoom
	if ev.Type == "room.create" {
		hr = &hostedRoom{id: n.newRoomID()}
		hr.st = room.New(n.stateConfig(hr.id, src))
	} else {
		var ok bool
		if hr, ok = n.room(pathRoom); !ok {
			return nil, n.noRoom(pathRoom)
		}
	}
	res, err := n.sequence(hr, env, src, fetched, prepaid)
	if isDuplicate(err) {
		// Step 6 for a room event whose nonce memory has lapsed while its
		// created_at is still in the window: Admit found it in the index.
		if res, dup, rerr := resubmitted(); dup {
			return res, rerr
		}
	}
	if err != nil {
		return nil, err
	}
	n.nonces.accept(ev.Actor, ev.Nonce, res.Record.ReceivedAt)
	res.MaxSeenNonce = n.nonces.max(ev.Actor, res.Record.ReceivedAt)
	return res, nil
}

// precheck refuses, without any lock, an envelope that may fetch packs but
// is outside the time window or whose nonce is already spent (unless it is
// an exact resubmission, answered under the lock): the checks are repeated
// under the actor lock, this only keeps stale envelopes from costing a
// pack fetch.
func (n *Node) precheck(env *identity.Envelope, pathRoom string) error {
	ev := &env.Event
	if ev.Type != "room.create" && ev.Type != "type.define" {
		return nil
	}
	now := n.NowMs()
	if d := now - ev.CreatedAt; d > n.cfg.Window.Milliseconds() || -d > n.cfg.Window.Milliseconds() {
		return &adp.Error{Code: adp.CodeTimestampOutOfWindow, Message: "created_at is outside the live-write window",
			Data: map[string]any{"window_ms": n.cfg.Window.Milliseconds(), "server_time": now}}
	}
	if max := n.nonces.max(ev.Actor, now); ev.Nonce <= max && !n.isResubmission(env, pathRoom) {
		return identity.NonceNotGreater(max)
	}
	return nil
}

// isResubmission reports whether env was already accepted.
func (n *Node) isResubmission(env *identity.Envelope, pathRoom string) bool {
	if pathRoom != "" {
		hr, ok := n.room(pathRoom)
		if !ok {
			return false
		}
		dup := false
		var rerr error
		verr := n.view(hr, func(st *room.State) { _, dup, rerr = st.SeqOf(env.Hash) })
		return dup || rerr != nil || verr != nil // on a read error, let the locked path answer
	}
	_, _, ok, err := n.lookupEnvelope(env.Digest)
	return ok || err != nil // on a read error, let the locked path answer
}

// chargePackFetch spends one unit of actor's room.create quota for an
// external pack fetch, before it dials: a request that is then rejected
// (digest mismatch, unreachable) has still paid.
func (n *Node) chargePackFetch(actor identity.AgentID) error {
	key, limit, now := "create|"+string(actor), n.cfg.Rates.Create, n.NowMs()
	if !n.quotas.allow(key, limit, now) {
		return &adp.Error{Code: adp.CodeRateLimited, Message: fmt.Sprintf("rate limit of %d rooms created (or external packs fetched) by this agent per minute reached", limit),
			Data: map[string]any{"limit_per_minute": limit, "retry_after_ms": n.quotas.retryAfter(key, now)}}
	}
	n.quotas.hit(key, limit, now)
	return nil
}

func actorStripe(a identity.AgentID) int {
	h := uint32(2166136261)
	for i := 0; i < len(a); i++ {
		h = (h ^ uint32(a[i])) * 16777619
	}
	return int(h % actorStripes)
}

// sequence admits env into the room under the sequencer lock, stores the
// record durably, then applies it and fans it out.
// prepaid is set when a pack fetch already charged this room.create to the
// creator's quota.
func (n *Node) sequence(hr *hostedRoom, env *identity.Envelope, src packSource, fetched map[string][]byte, prepaid bool) (*hostport.Result, error) {
	hr.seqMu.Lock()
	defer hr.seqMu.Unlock()
	st := hr.st
	if st == nil {
		// A cold room: its stored state refuses the write as before; one
		// it admits (the clock moved back) makes the room hot again.
		cst, err := n.seqView(hr)
		if err != nil {
			return nil, err
		}
		if _, err := cst.Admit(env, max(n.NowMs(), cst.LastReceivedAt), n.joins.lookup(hr.id)); err != nil {
			return nil, n.withRecovery(hr, err)
		}
		if err := n.warm(hr); err != nil {
			return nil, err
		}
		st = hr.st
		defer n.sched.touch(hr)
	}
	st.SetPackSource(src)
	now := max(n.NowMs(), st.LastReceivedAt)
	a, err := st.Admit(env, now, n.joins.lookup(hr.id))
	if err != nil {
		return nil, n.withRecovery(hr, err)
	}
	if err := n.sealCheck(hr, st, env, a); err != nil { // member-only rooms (seal.go)
		return nil, err
	}
	// Quotas (§21) after admission, which knows the kind and type.
	qkey, limit := n.cfg.Rates.rateFor(a.Type, a.Kind, a.Def)
	qkey = qkey + "|" + string(env.Event.Actor) + "|" + hr.id
	if a.Type == "room.create" {
		qkey, limit = "create|"+string(env.Event.Actor), n.cfg.Rates.Create
		if prepaid {
			limit = 0 // counted when its pack fetch was charged
		}
	}
	if !n.quotas.allow(qkey, limit, now) {
		ra := n.quotas.retryAfter(qkey, now)
		return nil, &adp.Error{Code: adp.CodeRateLimited, Message: fmt.Sprintf("rate limit of %d %s per minute reached", limit, rateSubject(a)),
			Data: map[string]any{"limit_per_minute": limit, "retry_after_ms": ra}}
	}

	rec := record.New(hr.id, st.Seq+1, st.LastHash, env, now)
	recJSON, _ := rec.MarshalJSON()
	sets := []kv{
		{K: recordKey(hr.id, rec.Seq), V: recJSON},
		{K: envelopeKey(env.Digest), V: envelopeValue(hr.id, rec.Seq)},
		{K: envelopeKey(recordDigest(rec)), V: envelopeValue(hr.id, rec.Seq)},
		{K: nonceKey(env.Event.Actor), V: nonceValue(max(env.Event.Nonce, n.nonces.max(env.Event.Actor, now)), now)},
	}
	if a.Type == "room.create" {
		sets = append(sets, kv{K: roomKey(hr.id)})
	}
	for k, b := range fetched {
		digest := k[indexZero(k)+1:]
		sets = append(sets, kv{K: []byte(pfxPack + digest), V: b})
	}
	var jrUpdate *hostport.JoinRequest
	if a.Reviewed != nil {
		if jr, ok := n.joins.get(a.Reviewed.ID); ok {
			jr.Status = "rejected"
			if a.Reviewed.Approved {
				jr.Status, jr.ApprovedRole = "approved", a.Reviewed.Role
			}
			actor, at := env.Event.Actor, now
			jr.ReviewedBy, jr.ReviewedAt = &actor, &at
			jr.ReviewReason = reviewReason(env.Event.Payload)
			jrUpdate = jr
		}
	}
	if a.ConsumedRequest != "" {
		if jr, ok := n.joins.get(a.ConsumedRequest); ok {
			jr.ConsumedSeq = rec.Seq
			jrUpdate = jr
		}
	}
	if jrUpdate != nil {
		sets = append(sets, n.joins.kv(jrUpdate))
	}
	var cerr error
	var feedSeq uint64
	if n.cfg.WithoutFeed {
		cerr = n.commit.Commit(sets) // the feed-cost baseline only
	} else {
		feedSeq, cerr = n.commit.CommitEntry(sets, changefeed.Entry(rec, hostport.FeedFlagsOf(&env.Event)))
	}
	if err := cerr; err != nil {
		n.log.Error("durable write failed", "room", hr.id, "seq", rec.Seq, "err", err)
		return nil, &adp.Error{Code: adp.CodeUnavailable, Message: "storage write failed; nothing was accepted"}
	}
	if feedSeq != 0 {
		// Followers get the entry once what follows is applied: a new
		// room's registration, its lifecycle and summary.
		defer n.feed.Applied(feedSeq)
	}

	// Durable: apply, publish, answer.
	hr.mu.Lock()
	st.Commit(a, rec)
	hr.mu.Unlock()
	n.sealCommitted(hr, env, rec.Seq)
	if a.Type == "room.create" {
		n.mu.Lock()
		n.rooms[hr.id] = hr
		n.mu.Unlock()
	}
	for k, b := range fetched {
		n.packs.mu.Lock()
		n.packs.cache[k[indexZero(k)+1:]] = b
		n.packs.mu.Unlock()
	}
	if jrUpdate != nil {
		n.joins.put(jrUpdate)
	}
	n.quotas.hit(qkey, limit, now)
	if a.ClearStatus != "" {
		n.status.clear(hr.id, a.ClearStatus)
	}
	n.publishRecord(rec.RoomID, recJSON)
	switch a.Type {
	case "room.leave", "room.member.remove", "room.member.role.update", "room.join", "room.join.review":
		hr.mu.RLock()
		n.hub.refresh(hr.id, st)
		hr.mu.RUnlock()
	}
	n.endViewers(hr.id, st.StatusAt(now))
	switch a.Type {
	case "room.create", "room.update", "room.close", "room.cancel":
		n.sched.touch(hr)
	}
	return &hostport.Result{Record: rec, RecordJSON: recJSON, Created: a.Type == "room.create", Status: st.StatusAt(now), URL: n.RoomURL(hr.id)}, nil
}

// isDuplicate reports Admit's answer for an envelope that is already a
// record of the room.
func isDuplicate(err error) bool {
	e, ok := err.(*adp.Error)
	return ok && e.Code == adp.CodeInvalidEvent && e.Data["reason"] == "duplicate_event"
}

func indexZero(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

func reviewReason(payload []byte) string {
	var p struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(payload, &p)
	return p.Reason
}

// withRecovery adds the §6.1 recovery URL to a head mismatch.
func (n *Node) withRecovery(hr *hostedRoom, err error) error {
	e, ok := err.(*adp.Error)
	if !ok || e.Code != adp.CodeRoomHeadMismatch {
		return err
	}
	after := e.Data["base_seq"]
	return e.WithData("events_url", n.RoomURL(hr.id)+"/events?after_seq="+fmt.Sprint(after))
}

// resubmission answers an exact resubmission with the original record.
func (n *Node) resubmission(roomID string, seq int64, actor identity.AgentID) (*hostport.Result, error) {
	raw, err := n.recordAt(roomID, seq)
	if err != nil {
		return nil, internal(err)
	}
	rec, _, err := record.Parse(raw)
	if err != nil {
		return nil, internal(err)
	}
	hr, _ := n.room(roomID)
	res := &hostport.Result{Record: rec, Created: seq == 1, URL: n.RoomURL(roomID), Resubmitted: true}
	if hr != nil {
		res.Status = n.lifecycle(hr).StatusAt(n.NowMs())
	}
	res.MaxSeenNonce = n.nonces.max(actor, n.NowMs())
	return res, nil
}
