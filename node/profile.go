package node

import (
	"encoding/binary"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// Agent profiles (agent-profile/1.0, docs/profiles.md): the latest
// profile.update each agent sent this host, stored under pr/<agent id>
// with the time it was accepted. A profile is descriptive only: nothing
// in the node reads it to decide anything.

const pfxProfile = storelayout.Profile

// DefaultMaxProfiles is the default of Config.MaxProfiles.
const DefaultMaxProfiles = 50_000

func profileKey(id identity.AgentID) []byte { return append([]byte(pfxProfile), id...) }

// PutProfile runs the write path of one profile.update envelope (POST
// /v1/profiles): Identity §6 in order (strict parse, hash, signature, the
// profile rules of adp/profile, exact resubmission, time window, the
// agent's nonce, shared with its room writes, and the stored profile's
// nonce), the per-agent rate and the host's cap on stored profiles; then
// one synced write of the profile and the agent's nonce. Errors are
// *adp.Error.
func (n *Node) PutProfile(body []byte) (*hostport.Profile, error) {
	if n.closing.Load() {
		return nil, adp.Errorf(adp.CodeUnavailable, "node is shutting down")
	}
	n.inflight.Add(1)
	defer n.inflight.Done()
	if err := n.writable(); err != nil {
		return nil, err
	}
	p, err := profile.Open(body)
	if err != nil {
		return nil, err
	}
	actor := p.ID
	lock := &n.actors[actorStripe(actor)]
	lock.Lock()
	defer lock.Unlock()

	prev, prevAt, err := n.storedProfile(actor)
	if err != nil {
		return nil, internal(err)
	}
	now := n.NowMs()
	if prev != nil && prev.Envelope.Digest == p.Envelope.Digest {
		// Identity §9: the same envelope again is a lookup.
		out := profileView(prev, prevAt)
		out.Resubmitted = true
		out.MaxSeenNonce = max(n.nonces.max(actor, now), prev.Nonce())
		return out, nil
	}
	if err := profile.CheckWindow(p, now, n.cfg.Window.Milliseconds()); err != nil {
		return nil, err
	}
	if m := n.nonces.max(actor, now); p.Nonce() <= m {
		return nil, identity.NonceNotGreater(m)
	}
	if _, err := profile.Replaces(prev, p); err != nil {
		return nil, err
	}
	key := "profile/" + string(actor)
	if !n.quotas.allow(key, n.cfg.Rates.Profile, now) {
		return nil, &adp.Error{Code: adp.CodeRateLimited, Message: "profile update rate limit",
			Data: map[string]any{"reason": "profile_rate", "retry_after_ms": n.quotas.retryAfter(key, now)}}
	}
	if prev == nil {
		// A first profile takes a place under the cap: one at a time, so
		// agents on different stripes cannot overshoot it together.
		n.profileNew.Lock()
		defer n.profileNew.Unlock()
		if n.profileCount.Load() >= int64(n.cfg.MaxProfiles) {
			return nil, &adp.Error{Code: adp.CodeRateLimited, Message: "this host stores no more new agent profiles",
				Data: map[string]any{"reason": "profiles_full", "limit": n.cfg.MaxProfiles}}
		}
	}
	val := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(p.Envelope.Raw)), uint64(now))
	val = append(val, p.Envelope.Raw...)
	nonce := max(p.Nonce(), n.nonces.max(actor, now))
	if err := n.commit.Commit([]groupcommit.KV{
		{K: profileKey(actor), V: val},
		{K: nonceKey(actor), V: nonceValue(nonce, now)},
	}); err != nil {
		return nil, n.storageWriteError(err)
	}
	if prev == nil {
		n.profileCount.Add(1)
	}
	n.quotas.hit(key, n.cfg.Rates.Profile, now)
	n.nonces.accept(actor, p.Nonce(), now)
	out := profileView(p, now)
	out.MaxSeenNonce = n.nonces.max(actor, now)
	return out, nil
}

// Profile returns the agent's stored profile (GET /v1/profiles/{agent_id});
// not_found if it sent none.
func (n *Node) Profile(id identity.AgentID) (*hostport.Profile, error) {
	p, at, err := n.storedProfile(id)
	if err != nil {
		return nil, internal(err)
	}
	if p == nil {
		return nil, adp.Reason(adp.CodeNotFound, "no_profile", "this host holds no profile of that agent")
	}
	return profileView(p, at), nil
}

// storedProfile reads and re-opens the stored profile of id (nil if none).
func (n *Node) storedProfile(id identity.AgentID) (*profile.Profile, int64, error) {
	var val []byte
	err := n.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(profileKey(id))
		if err != nil {
			return err
		}
		val, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if len(val) < 8 {
		return nil, 0, errors.New("profile " + string(id) + ": short value")
	}
	p, err := profile.Open(val[8:])
	if err != nil {
		return nil, 0, err
	}
	if p.ID != id {
		return nil, 0, errors.New("profile " + string(id) + ": stored under another agent")
	}
	return p, int64(binary.BigEndian.Uint64(val)), nil
}

// loadProfileCount counts the stored profiles (keys only).
func (n *Node) loadProfileCount() error {
	var c int64
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxProfile)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			c++
		}
		return nil
	})
	n.profileCount.Store(c)
	return err
}

func profileView(p *profile.Profile, at int64) *hostport.Profile {
	return &hostport.Profile{AgentID: p.ID, Name: p.Name, Capabilities: p.Capabilities, Extra: p.Extra,
		Envelope: p.Envelope.Raw, ReceivedAt: at, SelfAsserted: true, Nonce: p.Nonce()}
}

// profileName is the agent's stored profile name, "" without one (or on a
// read failure: a name is decoration).
func (n *Node) profileName(id identity.AgentID) string {
	p, _, err := n.storedProfile(id)
	if err != nil || p == nil {
		return ""
	}
	return p.Name
}
