package index_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/index"
)

type host struct {
	signer *assertion.Signer
	origin string
}

func newHost(t *testing.T, name string, port int) host {
	seed := make([]byte, 32)
	copy(seed, name)
	k, _ := identity.KeyFromSeed(seed)
	return host{signer: assertion.NewSigner(k), origin: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

func (h host) binding() index.Binding {
	return index.Binding{Key: h.signer.HostKey(), PeerID: "p-" + string(h.signer.HostKey())[10:20], Origin: h.origin}
}

func (h host) entry(t *testing.T, id string, issued, lastActive, expires int64) *index.Entry {
	t.Helper()
	a := index.Announcement{Room: directory.Entry{ID: id, URL: h.origin + "/v1/rooms/" + id, Host: h.origin[len("http://"):],
		Status: room.StatusActive, Visibility: room.Public, LastActive: lastActive}, Host: h.binding(), ExpiresAt: expires}
	raw, err := h.signer.Sign(assertion.TypeAnnounce, a, issued)
	if err != nil {
		t.Fatal(err)
	}
	e, err := index.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func openDB(t *testing.T, dir string) *badger.DB {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func roomID(i int) string { return fmt.Sprintf("d8ftedhpqhsusbg%05d", i) }

// Hostile entries: issued in the future (refused), last_active in the
// future and expiry ten years ahead (clamped), beyond an unverified
// host's cap (refused), and a claim on a verified host's room ID
// (refused; earlier claims dropped into evidence when the host is
// verified). The evidence and the clamped entries survive a reopen, and
// the index never holds more than its caps.
func TestIndexLimits(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	self := newHost(t, "self", 1)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	x.SetLimits(index.Limits{MaxPerUnverified: 10, MaxUnverified: 15, MaxTTL: time.Minute})
	real, rogue := newHost(t, "real", 2), newHost(t, "rogue", 3)
	verified := map[identity.AgentID]bool{}
	x.SetVerifier(func(b index.Binding) bool { return verified[b.Key] })
	now := time.Now().UnixMilli()
	const year = 365 * 24 * 3600_000

	if _, err := x.Put(rogue.entry(t, roomID(0), now+year, now, now+year+1), now); !errors.Is(err, index.ErrFuture) {
		t.Fatalf("future created_at: %v", err)
	}
	if ok, err := x.Put(rogue.entry(t, roomID(1), now, now+year, now+10*year), now); !ok || err != nil {
		t.Fatalf("put: %v %v", ok, err)
	}
	e, _ := x.Room(roomID(1), now)
	if e.ExpiresAt > now+time.Minute.Milliseconds() || e.Room.LastActive > now {
		t.Fatalf("not clamped: expires +%d ms, last_active +%d ms", e.ExpiresAt-now, e.Room.LastActive-now)
	}
	for i := 2; i < 30; i++ {
		x.Put(rogue.entry(t, roomID(i), now, now, now+1000), now)
	}
	if n := x.Len(); n != 10 {
		t.Fatalf("unverified host holds %d entries, cap 10", n)
	}
	// The real host claims room 1 too, then is verified: the rogue's claim
	// goes to the evidence, and new rogue claims are refused.
	if ok, _ := x.Put(real.entry(t, roomID(1), now, now, now+1000), now); !ok {
		t.Fatal("real host's entry refused")
	}
	verified[real.signer.HostKey()] = true
	x.Reverify()
	if n := x.DropConflicts(real.signer.HostKey(), now); n != 1 {
		t.Fatalf("dropped %d conflicting claims", n)
	}
	if c := x.Claims(roomID(1), now); len(c) != 1 || c[0].Host.Key != real.signer.HostKey() {
		t.Fatalf("claims after the drop: %d", len(c))
	}
	if _, err := x.Put(rogue.entry(t, roomID(1), now, now, now+1000), now); !errors.Is(err, index.ErrConflict) {
		t.Fatalf("claim on a verified host's room: %v", err)
	}
	if n := len(x.Entries(now, true)); n != 1 {
		t.Fatalf("%d verified entries", n)
	}
	if len(x.Conflicts()) != 1 {
		t.Fatalf("%d pieces of evidence", len(x.Conflicts()))
	}

	if err := x.Flush(); err != nil || x.Pending() != 0 {
		t.Fatalf("flush: %v, %d pending", err, x.Pending())
	}
	db.Close()
	db = openDB(t, dir)
	defer db.Close()
	y, err := index.Open(db, self.signer.HostKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Conflicts()) != 1 || y.Len() != x.Len() {
		t.Fatalf("after reopen: %d evidence, %d entries (want %d)", len(y.Conflicts()), y.Len(), x.Len())
	}
	if e, _ := y.Room(roomID(3), now); e == nil || e.ExpiresAt > now+y.Limits().MaxTTL.Milliseconds() {
		t.Fatal("entry lost or unclamped after reopen")
	}
}

// TestIndexWritesBehind: a Put stores nothing by itself (its write waits
// for Flush, so no Put holds the index lock across a disk sync), repeated
// Puts of one room keep only the newest value pending, and Flush stores
// the newest announcement.
func TestIndexWritesBehind(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	self, h := newHost(t, "self", 1), newHost(t, "wb", 2)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := int64(0); i < 50; i++ { // one room re-announced 50 times
		if ok, err := x.Put(h.entry(t, roomID(1), now+i, now, now+30_000+i), now+i); !ok || err != nil {
			t.Fatalf("put %d: %v %v", i, ok, err)
		}
	}
	if x.Pending() != 1 {
		t.Fatalf("%d keys pending after 50 puts of one room", x.Pending())
	}
	if y, err := index.Open(db, self.signer.HostKey(), now); err != nil || y.Len() != 0 {
		t.Fatalf("before any flush %d entries are stored (%v)", y.Len(), err)
	}
	if err := x.Flush(); err != nil || x.Pending() != 0 {
		t.Fatalf("flush: %v, %d pending", err, x.Pending())
	}
	y, err := index.Open(db, self.signer.HostKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := y.Room(roomID(1), now); !ok || e.IssuedAt != now+49 {
		t.Fatalf("stored entry is not the newest announcement: %+v", e)
	}
}

// OnChange is told every stored entry's room, outside the index lock (the
// hook may read the index), and not told of a refused or stale one.
func TestIndexOnChange(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	self, h := newHost(t, "self", 1), newHost(t, "oc", 2)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	x.OnChange(func(id string) {
		x.Len() // would deadlock under the index lock
		got = append(got, id)
	})
	now := time.Now().UnixMilli()
	e := h.entry(t, roomID(1), now, now, now+30_000)
	if ok, _ := x.Put(e, now); !ok {
		t.Fatal("not stored")
	}
	if ok, _ := x.Put(e, now); ok { // the same nonce again: not newer
		t.Fatal("stale entry stored")
	}
	if len(got) != 1 || got[0] != roomID(1) {
		t.Fatalf("changes %v", got)
	}
}

// A hostile relay cannot make an entry live longer than MaxTTL after it
// was issued: not by a far expires_at, not by relaying it late, not by the
// receiver restarting (which once re-clamped from the time of reopening).
func TestEntryLifeBoundedByIssue(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	self, h := newHost(t, "self", 1), newHost(t, "old", 2)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	ttl := x.Limits().MaxTTL.Milliseconds()
	if x.Limits().MaxTTL < 6*time.Hour {
		t.Fatalf("default MaxTTL %v is shorter than the 6 h announcement TTL", x.Limits().MaxTTL)
	}
	issued := time.Now().UnixMilli()
	tenYears := issued + 10*365*86_400_000
	// Relayed half a TTL late, with a signed expiry ten years ahead.
	late := issued + ttl/2
	if ok, err := x.Put(h.entry(t, roomID(7), issued, issued, tenYears), late); !ok || err != nil {
		t.Fatalf("put: %v %v", ok, err)
	}
	if e, _ := x.Room(roomID(7), late); e == nil || e.ExpiresAt != issued+ttl {
		t.Fatalf("expires at issue%+d ms, want +%d", e.ExpiresAt-issued, ttl)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	// Restart just before the bound: still bounded by issue.
	y, err := index.Open(db, self.signer.HostKey(), issued+ttl-1)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := y.Room(roomID(7), issued+ttl-1); !ok || e.ExpiresAt != issued+ttl {
		t.Fatalf("after restart: %v %+v", ok, e)
	}
	// Restart after it: gone, and dropped from the store.
	z, err := index.Open(db, self.signer.HostKey(), issued+ttl)
	if err != nil || z.Len() != 0 {
		t.Fatalf("entry outlived issue+MaxTTL across a restart: %d (%v)", z.Len(), err)
	}
	if live := z.Live(issued+ttl, false); len(live) != 0 {
		t.Fatalf("live: %d", len(live))
	}
}

// This host's own announcements survive a restart until they expire; a
// stored one signed by another key is dropped.
func TestOwnAnnouncementsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	self, other := newHost(t, "self", 1), newHost(t, "other", 2)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	mine := self.entry(t, roomID(1), now, now, now+60_000)
	x.SetOwn(roomID(1), mine.Raw)
	x.SetOwn(roomID(2), other.entry(t, roomID(2), now, now, now+60_000).Raw) // hostile or corrupt
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	y, err := index.Open(db, self.signer.HostKey(), now+1)
	if err != nil {
		t.Fatal(err)
	}
	if own := y.Own(); len(own) != 1 || string(own[roomID(1)]) != string(mine.Raw) {
		t.Fatalf("own after restart: %d entries", len(own))
	}
	if parsed := y.OwnAtOpen(); len(parsed) != 1 || string(parsed[roomID(1)].Raw) != string(mine.Raw) {
		t.Fatalf("own entries parsed at open: %d", len(parsed))
	}
	y.SetOwn(roomID(1), self.entry(t, roomID(1), now+5, now, now+60_000).Raw)
	if parsed := y.OwnAtOpen(); len(parsed) != 0 {
		t.Fatalf("a replaced own announcement is still offered as parsed at open: %d", len(parsed))
	}
	if z, err := index.Open(db, self.signer.HostKey(), now+60_000); err != nil || len(z.Own()) != 0 {
		t.Fatalf("expired own announcement kept: %v", err)
	}
}

// TestSlowFlushBlocksNoReader: while a Flush is stuck writing (a hook
// holds it inside the batch write), directory reads, duplicate checks,
// new Puts and even a second index's worth of gossip proceed: the index
// lock is not held across the write. All the gossip of a flush interval
// goes to disk in one batch, and what arrived during the slow flush is
// stored by the next one and found after a reopen.
func TestSlowFlushBlocksNoReader(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	self, h := newHost(t, "self", 1), newHost(t, "slow", 2)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var batches []int
	entered, release := make(chan struct{}), make(chan struct{})
	index.SetWriteHook(x, func(keys int) {
		batches = append(batches, keys)
		if len(batches) == 1 {
			close(entered)
			<-release
		}
	})
	now := time.Now().UnixMilli()
	const gossip = 40
	for i := 0; i < gossip; i++ {
		if ok, err := x.Put(h.entry(t, roomID(i), now, now, now+60_000), now); !ok || err != nil {
			t.Fatalf("put %d: %v %v", i, ok, err)
		}
	}
	flushed := make(chan error, 1)
	go func() { flushed <- x.Flush() }()
	<-entered
	// The flush is inside its write, holding its batch: readers and
	// writers of the index go on.
	if got := len(x.Entries(now, false)); got != gossip {
		t.Fatalf("directory read during the flush: %d entries, want %d", got, gossip)
	}
	if x.Fresh(h.signer.HostKey(), roomID(0), 0) {
		t.Fatal("duplicate check during the flush: an old nonce is fresh")
	}
	late := h.entry(t, roomID(gossip), now, now, now+60_000)
	if ok, err := x.Put(late, now); !ok || err != nil {
		t.Fatalf("put during the flush: %v %v", ok, err)
	}
	if _, ok := x.Room(roomID(gossip), now); !ok || x.Pending() != 1 {
		t.Fatalf("the put during the flush is not readable or not pending (%d pending)", x.Pending())
	}
	select {
	case err := <-flushed:
		t.Fatalf("flush returned while its write was held: %v", err)
	default:
	}
	close(release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil || x.Pending() != 0 {
		t.Fatalf("second flush: %v, %d pending", err, x.Pending())
	}
	if len(batches) != 2 || batches[0] != gossip || batches[1] != 1 {
		t.Fatalf("batches %v, want [%d 1]: one write per flush", batches, gossip)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	y, err := index.Open(db, self.signer.HostKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	if y.Len() != gossip+1 {
		t.Fatalf("after a reopen %d entries, want %d", y.Len(), gossip+1)
	}
}

// Property: the first host verified while holding a claim keeps the room
// ID. A claim stored while the real host was unverified goes to the
// evidence as soon as the real host's verified claim is stored (also when
// its binding was verified before its claim arrived), and a claimant
// verified later loses its claim to the host verified first.
func TestIndexVerifiedClaimReplacesEarlier(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	self := newHost(t, "self", 1)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	real, rogue := newHost(t, "real", 2), newHost(t, "rogue", 3)
	verified := map[identity.AgentID]bool{}
	x.SetVerifier(func(b index.Binding) bool { return verified[b.Key] })
	now := time.Now().UnixMilli()
	owner := func(id string) []identity.AgentID {
		var out []identity.AgentID
		for _, c := range x.Claims(id, now) {
			out = append(out, c.Host.Key)
		}
		return out
	}

	// Room 1: the rogue claims first; the real host is verified (its
	// binding check ran before its claim was stored), then claims.
	rogueClaim := rogue.entry(t, roomID(1), now+1, now, now+60_000)
	if ok, err := x.Put(rogueClaim, now); !ok || err != nil {
		t.Fatalf("rogue claim: %v %v", ok, err)
	}
	verified[real.signer.HostKey()] = true
	x.Reverify()
	if n := x.DropConflicts(real.signer.HostKey(), now); n != 0 {
		t.Fatalf("dropped %d before the real host claimed anything", n)
	}
	if ok, err := x.Put(real.entry(t, roomID(1), now, now, now+60_000), now); !ok || err != nil {
		t.Fatalf("real claim: %v %v", ok, err)
	}
	if o := owner(roomID(1)); len(o) != 1 || o[0] != real.signer.HostKey() {
		t.Fatalf("claims on room 1 after the verified claim: %v", o)
	}

	// Room 2: both claim while unverified; the real host's binding is
	// verified first (its drop has not run yet), then the rogue's: the
	// rogue's settling drops its own claim, not the real host's.
	verified[real.signer.HostKey()] = false
	x.Reverify()
	x.Put(rogue.entry(t, roomID(2), now+1, now, now+60_000), now)
	x.Put(real.entry(t, roomID(2), now, now, now+60_000), now)
	verified[real.signer.HostKey()] = true
	verified[rogue.signer.HostKey()] = true
	x.Reverify()
	if n := x.DropConflicts(rogue.signer.HostKey(), now); n != 1 {
		t.Fatalf("the later verified claimant's settling dropped %d", n)
	}
	if o := owner(roomID(2)); len(o) != 1 || o[0] != real.signer.HostKey() {
		t.Fatalf("claims on room 2: %v", o)
	}
	if _, err := x.Put(rogue.entry(t, roomID(2), now+2, now, now+60_000), now); !errors.Is(err, index.ErrConflict) {
		t.Fatalf("a new rogue claim: %v", err)
	}
	if n := len(x.Conflicts()); n != 2 {
		t.Fatalf("%d pieces of evidence, want the rogue's two dropped claims", n)
	}
	found := false
	for _, c := range x.Conflicts() {
		found = found || string(c) == string(rogueClaim.Raw)
	}
	if !found {
		t.Fatal("the rogue's first claim is not in the evidence")
	}

	// Across a reopen.
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openDB(t, dir)
	defer db.Close()
	y, err := index.Open(db, self.signer.HostKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	y.SetVerifier(func(b index.Binding) bool { return verified[b.Key] })
	for _, id := range []string{roomID(1), roomID(2)} {
		if c := y.Claims(id, now); len(c) != 1 || c[0].Host.Key != real.signer.HostKey() {
			t.Fatalf("after reopen, %s has %d claims", id, len(c))
		}
	}
	if len(y.Conflicts()) != 2 {
		t.Fatalf("after reopen: %d pieces of evidence", len(y.Conflicts()))
	}
}

// Property: conflict evidence is bounded with eviction: a flood of
// claims from one key keeps at most MaxConflictsPerHost of them, the
// store at most MaxConflicts in all, the newest kept and the oldest
// evicted (a flood does not lock later evidence out), across a reopen.
func TestIndexConflictEvidenceEvicts(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	self := newHost(t, "self", 1)
	x, err := index.Open(db, self.signer.HostKey(), 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	flooder := newHost(t, "flooder", 2)
	var flood [][]byte
	for i := range 3 * index.MaxConflictsPerHost {
		flood = append(flood, flooder.entry(t, roomID(i), now+int64(i), now, now+60_000).Raw)
		x.AddConflict(flood[i])
	}
	if n := len(x.Conflicts()); n != index.MaxConflictsPerHost {
		t.Fatalf("one key holds %d pieces of evidence, cap %d", n, index.MaxConflictsPerHost)
	}
	for i, raw := range flood {
		kept := false
		for _, c := range x.Conflicts() {
			kept = kept || string(c) == string(raw)
		}
		if kept != (i >= len(flood)-index.MaxConflictsPerHost) {
			t.Fatalf("flood claim %d kept=%v: the key's oldest go first", i, kept)
		}
	}
	// Many keys: the total stays at its cap, and the newest is kept.
	var last []byte
	hosts := index.MaxConflicts/8 + 10
	for h := range hosts {
		k := newHost(t, fmt.Sprintf("claimant %d", h), 3)
		for i := range 8 {
			last = k.entry(t, roomID(i), now+int64(1000+h*8+i), now, now+60_000).Raw
			x.AddConflict(last)
		}
	}
	got := x.Conflicts()
	if len(got) != index.MaxConflicts {
		t.Fatalf("%d pieces of evidence, cap %d", len(got), index.MaxConflicts)
	}
	has := func(list [][]byte, raw []byte) bool {
		for _, c := range list {
			if string(c) == string(raw) {
				return true
			}
		}
		return false
	}
	toBytes := func() [][]byte {
		var out [][]byte
		for _, c := range x.Conflicts() {
			out = append(out, c)
		}
		return out
	}
	if !has(toBytes(), last) {
		t.Fatal("the newest evidence was not kept")
	}
	for _, raw := range flood {
		if has(toBytes(), raw) {
			t.Fatal("the oldest evidence (the flood) was not evicted first")
		}
	}
	before := toBytes()
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openDB(t, dir)
	defer db.Close()
	if x, err = index.Open(db, self.signer.HostKey(), now); err != nil {
		t.Fatal(err)
	}
	after := toBytes()
	if len(after) != len(before) {
		t.Fatalf("after reopen: %d pieces of evidence, want %d", len(after), len(before))
	}
	for _, c := range before {
		if !has(after, c) {
			t.Fatal("evidence changed across a reopen")
		}
	}
}
