// Package negentropy is range-based set reconciliation as negentropy
// (protocol version 1, 0x61) defines it: each side holds items — a
// (timestamp, 32-byte id) pair — sorted by timestamp then id; the
// initiator sends fingerprints of ranges of its items, the other side
// compares them with its own, splits the ranges that differ into buckets
// and answers small ranges with their ids, until the initiator knows which
// ids only it has and which only the peer has. Bytes exchanged grow with
// the symmetric difference, not with the size of the sets.
//
// The wire format is negentropy's: a version byte, then ranges, each an
// upper bound (timestamp as a delta varint, 0 meaning infinity; an id
// prefix), a mode (0 skip, 1 fingerprint, 2 id list) and its payload. A
// fingerprint is the first 16 bytes of SHA-256 over the 256-bit
// little-endian sum of the range's ids followed by the varint of their
// count. Varints are big-endian base 128.
//
// The package is pure: no I/O, no goroutines, no clock. Decoding is
// bounded by the input: a hostile message cannot make it allocate more
// than a small multiple of its own size.
package negentropy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"sort"
)

// ProtocolVersion is negentropy protocol version 1.
const ProtocolVersion = 0x61

// IDSize is the size of an item id.
const IDSize = 32

// FingerprintSize is the size of a range fingerprint.
const FingerprintSize = 16

const (
	modeSkip        = 0
	modeFingerprint = 1
	modeIDList      = 2
	buckets         = 16
	maxTimestamp    = math.MaxUint64
)

// ID is an item id (here: SHA-256 of a signed announcement).
type ID [IDSize]byte

// Item is one element of a set.
type Item struct {
	Timestamp uint64
	ID        ID
}

func (a Item) less(b Item) bool {
	if a.Timestamp != b.Timestamp {
		return a.Timestamp < b.Timestamp
	}
	return bytes.Compare(a.ID[:], b.ID[:]) < 0
}

// bound is a range's exclusive upper end: a timestamp and an id prefix
// (compared as if zero-padded).
type bound struct {
	ts     uint64
	prefix []byte
}

func (b bound) item() Item {
	var it Item
	it.Timestamp = b.ts
	copy(it.ID[:], b.prefix)
	return it
}

// Errors of a malformed or unexpected message.
var (
	ErrVersion   = errors.New("negentropy: unsupported protocol version")
	ErrMalformed = errors.New("negentropy: malformed message")
)

// Set is a sorted, immutable set of items, shareable between sessions.
type Set struct{ items []Item }

// NewSet sorts items (in place) and drops duplicates.
func NewSet(items []Item) *Set {
	sort.Slice(items, func(i, j int) bool { return items[i].less(items[j]) })
	out := items[:0]
	for i, it := range items {
		if i > 0 && it == items[i-1] {
			continue
		}
		out = append(out, it)
	}
	return &Set{items: out}
}

// Len returns the number of items.
func (s *Set) Len() int { return len(s.items) }

// lowerBound returns the first index in [from, len) whose item is not
// below b.
func (s *Set) lowerBound(from int, b bound) int {
	bi := b.item()
	n := len(s.items) - from
	return from + sort.Search(n, func(i int) bool { return !s.items[from+i].less(bi) })
}

// fingerprint of items [lo, hi).
func (s *Set) fingerprint(lo, hi int) [FingerprintSize]byte {
	var sum [IDSize]byte
	for _, it := range s.items[lo:hi] {
		var carry uint16
		for i := 0; i < IDSize; i++ {
			v := uint16(sum[i]) + uint16(it.ID[i]) + carry
			sum[i] = byte(v)
			carry = v >> 8
		}
	}
	h := sha256.New()
	h.Write(sum[:])
	h.Write(appendVarint(nil, uint64(hi-lo)))
	var fp [FingerprintSize]byte
	copy(fp[:], h.Sum(nil))
	return fp
}

// Session is one side of one reconciliation.
type Session struct {
	set        *Set
	frameLimit int
	initiator  bool
	lastOut    uint64
	lastIn     uint64
}

// NewSession starts a session over set. frameLimit bounds each message
// this side produces (0: unbounded; otherwise at least 4096): ranges that
// do not fit are deferred to later rounds.
func NewSession(set *Set, frameLimit int) *Session {
	if frameLimit != 0 && frameLimit < 4096 {
		frameLimit = 4096
	}
	return &Session{set: set, frameLimit: frameLimit}
}

// Initiate returns the first message; the session is the initiator.
func (s *Session) Initiate() []byte {
	s.initiator = true
	s.lastOut = 0
	out := []byte{ProtocolVersion}
	return s.splitRange(out, 0, len(s.set.items), bound{ts: maxTimestamp})
}

// Respond answers a message as the non-initiating side.
func (s *Session) Respond(msg []byte) ([]byte, error) {
	if s.initiator {
		return nil, errors.New("negentropy: initiator cannot respond")
	}
	out, _, _, err := s.reconcile(msg)
	return out, err
}

// Reconcile processes the peer's answer as the initiator: it returns the
// ids only this side has (have) and only the peer has (need) found in this
// round, and the next message, or nil when reconciliation is complete.
func (s *Session) Reconcile(msg []byte) (next []byte, have, need []ID, err error) {
	if !s.initiator {
		return nil, nil, nil, errors.New("negentropy: Reconcile before Initiate")
	}
	out, have, need, err := s.reconcile(msg)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(out) == 1 {
		out = nil
	}
	return out, have, need, nil
}

func (s *Session) exceeded(n int) bool { return s.frameLimit > 0 && n > s.frameLimit-200 }

func (s *Session) reconcile(msg []byte) (full []byte, have, need []ID, err error) {
	s.lastIn, s.lastOut = 0, 0
	r := reader{b: msg}
	v, ok := r.byte()
	if !ok {
		return nil, nil, nil, ErrMalformed
	}
	full = []byte{ProtocolVersion}
	if v != ProtocolVersion {
		if s.initiator {
			return nil, nil, nil, ErrVersion
		}
		return full, nil, nil, nil // tells the initiator which version we speak
	}
	items := s.set.items
	prevBound := bound{}
	prevIndex := 0
	// written is the index of the last bound this answer holds: the peer
	// reads a range as starting there, so a closing fingerprint covers
	// the items from written on (ranges skipped as equal, and a range
	// whose answer did not fit, included).
	written := 0
	skip := false
	var o []byte
	doSkip := func() {
		if skip {
			skip = false
			o = s.appendBound(o, prevBound)
			o = appendVarint(o, modeSkip)
		}
	}
	for r.len() > 0 {
		o = o[:0]
		cur, err := s.readBound(&r)
		if err != nil {
			return nil, nil, nil, err
		}
		mode, ok := r.varint()
		if !ok {
			return nil, nil, nil, ErrMalformed
		}
		lower := prevIndex
		upper := s.set.lowerBound(prevIndex, cur)
		cut := false
		switch mode {
		case modeSkip:
			skip = true
		case modeFingerprint:
			theirs, ok := r.bytes(FingerprintSize)
			if !ok {
				return nil, nil, nil, ErrMalformed
			}
			ours := s.set.fingerprint(lower, upper)
			if !bytes.Equal(theirs, ours[:]) {
				doSkip()
				o = s.splitRange(o, lower, upper, cur)
			} else {
				skip = true
			}
		case modeIDList:
			n, ok := r.varint()
			if !ok || n > uint64(r.len()/IDSize) {
				return nil, nil, nil, ErrMalformed
			}
			theirs := make(map[ID]bool, n)
			for i := uint64(0); i < n; i++ {
				b, _ := r.bytes(IDSize)
				theirs[ID(b)] = true
			}
			for _, it := range items[lower:upper] {
				if theirs[it.ID] {
					delete(theirs, it.ID)
				} else if s.initiator {
					have = append(have, it.ID)
				}
			}
			if s.initiator {
				skip = true
				for id := range theirs {
					need = append(need, id)
				}
				break
			}
			doSkip()
			end := cur
			var ids []byte
			count := 0
			for i := lower; i < upper; i++ {
				if s.exceeded(len(full) + len(o) + len(ids) + 64) {
					end = bound{ts: items[i].Timestamp, prefix: items[i].ID[:]}
					upper = i
					cut = true
					break
				}
				ids = append(ids, items[i].ID[:]...)
				count++
			}
			o = s.appendBound(o, end)
			o = appendVarint(o, modeIDList)
			o = appendVarint(o, uint64(count))
			o = append(o, ids...)
			full = append(full, o...)
			o = o[:0]
			written = upper
		default:
			return nil, nil, nil, ErrMalformed
		}
		if cut || s.exceeded(len(full)+len(o)) {
			// Out of room, or an id list was cut short: one fingerprint
			// covers everything from the last bound written (a range
			// whose answer did not fit is dropped and so included), and
			// the peer splits it again next round. A cut list must end
			// so even when the frame has a little room left, or its rest
			// goes undescribed; and a fingerprint taken from the dropped
			// range's end could match the peer's when what follows is
			// equal (an empty tail, as when every change is newer),
			// losing the dropped range's differences.
			fp := s.set.fingerprint(written, len(items))
			full = s.appendBound(full, bound{ts: maxTimestamp})
			full = appendVarint(full, modeFingerprint)
			full = append(full, fp[:]...)
			break
		}
		if len(o) > 0 {
			full = append(full, o...)
			written = upper
		}
		prevIndex = upper
		prevBound = cur
	}
	return full, have, need, nil
}

// splitRange describes items [lo, hi), whose upper bound is ub: their ids
// when few, else the fingerprints of 16 buckets.
func (s *Session) splitRange(o []byte, lo, hi int, ub bound) []byte {
	items := s.set.items
	n := hi - lo
	if n < 2*buckets {
		o = s.appendBound(o, ub)
		o = appendVarint(o, modeIDList)
		o = appendVarint(o, uint64(n))
		for _, it := range items[lo:hi] {
			o = append(o, it.ID[:]...)
		}
		return o
	}
	per, extra := n/buckets, n%buckets
	cur := lo
	for i := 0; i < buckets; i++ {
		size := per
		if i < extra {
			size++
		}
		fp := s.set.fingerprint(cur, cur+size)
		cur += size
		next := ub
		if cur != hi {
			next = minimalBound(items[cur-1], items[cur])
		}
		o = s.appendBound(o, next)
		o = appendVarint(o, modeFingerprint)
		o = append(o, fp[:]...)
	}
	return o
}

// minimalBound is the shortest bound above prev and not above cur.
func minimalBound(prev, cur Item) bound {
	if cur.Timestamp != prev.Timestamp {
		return bound{ts: cur.Timestamp}
	}
	shared := 0
	for shared < IDSize && prev.ID[shared] == cur.ID[shared] {
		shared++
	}
	return bound{ts: cur.Timestamp, prefix: cur.ID[:min(shared+1, IDSize)]}
}

func (s *Session) appendBound(o []byte, b bound) []byte {
	o = s.appendTimestamp(o, b.ts)
	o = appendVarint(o, uint64(len(b.prefix)))
	return append(o, b.prefix...)
}

func (s *Session) appendTimestamp(o []byte, ts uint64) []byte {
	if ts == maxTimestamp {
		s.lastOut = maxTimestamp
		return appendVarint(o, 0)
	}
	d := ts - s.lastOut
	s.lastOut = ts
	return appendVarint(o, d+1)
}

func (s *Session) readBound(r *reader) (bound, error) {
	d, ok := r.varint()
	if !ok {
		return bound{}, ErrMalformed
	}
	var ts uint64
	switch {
	case d == 0:
		ts = maxTimestamp
	case s.lastIn == maxTimestamp || d-1 > maxTimestamp-s.lastIn:
		ts = maxTimestamp
	default:
		ts = s.lastIn + d - 1
	}
	s.lastIn = ts
	n, ok := r.varint()
	if !ok || n > IDSize {
		return bound{}, ErrMalformed
	}
	p, ok := r.bytes(int(n))
	if !ok {
		return bound{}, ErrMalformed
	}
	return bound{ts: ts, prefix: p}, nil
}

// appendVarint appends negentropy's varint: base 128, most significant
// group first, every byte but the last with the high bit set.
func appendVarint(o []byte, n uint64) []byte {
	var tmp [10]byte
	i := len(tmp) - 1
	tmp[i] = byte(n & 0x7f)
	for n >>= 7; n > 0; n >>= 7 {
		i--
		tmp[i] = byte(n&0x7f) | 0x80
	}
	return append(o, tmp[i:]...)
}

type reader struct{ b []byte }

func (r *reader) len() int { return len(r.b) }

func (r *reader) byte() (byte, bool) {
	if len(r.b) == 0 {
		return 0, false
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c, true
}

func (r *reader) bytes(n int) ([]byte, bool) {
	if n < 0 || n > len(r.b) {
		return nil, false
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p, true
}

func (r *reader) varint() (uint64, bool) {
	var n uint64
	for i := 0; i < 10; i++ {
		c, ok := r.byte()
		if !ok {
			return 0, false
		}
		n = n<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return n, true
		}
	}
	return 0, false
}
