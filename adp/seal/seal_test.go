package seal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
)

const room = "d8ftedhpqhsusbg001tg"

type member struct {
	id   identity.AgentID
	priv *PrivateKey
}

func newMember(t testing.TB) member {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return member{identity.AgentIDFromKey(pub), k}
}

func keyPayload(m member) []byte {
	b, _ := json.Marshal(KeyPayload{PublicKey: identity.EncodeB64(m.priv.Public())})
	return b
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func code(err error) (adp.Code, string) {
	e := adp.AsError(err)
	if e == nil {
		return "", ""
	}
	r, _ := e.Data["reason"].(string)
	return e.Code, r
}

// A removed member opens the epochs it was part of and fails on the next.
func TestRemovedMemberCannotOpenNextEpoch(t *testing.T) {
	a, b, c := newMember(t), newMember(t), newMember(t)
	var st RoomState
	seq := int64(1)
	for _, m := range []member{a, b, c} {
		seq++
		st.Apply(seq, m.id, TypeKey, keyPayload(m))
	}
	active := []identity.AgentID{a.id, b.id, c.id}
	p1, k1, err := NewEpoch(rand.Reader, room, 1, st.Recipients(active))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckEpoch(mustJSON(t, p1), active); err != nil {
		t.Fatal(err)
	}
	seq++
	st.Apply(seq, a.id, TypeEpoch, mustJSON(t, p1))
	msg1, err := SealMessage(rand.Reader, k1, room, 1, a.id, Inner{ContentType: "text/plain", Content: json.RawMessage(`"epoch one"`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckMessage(a.id, mustJSON(t, msg1), active); err != nil {
		t.Fatal(err)
	}

	// c is removed: the epoch no longer fits, a message is refused.
	active = []identity.AgentID{a.id, b.id}
	if c, r := code(st.CheckMessage(a.id, mustJSON(t, msg1), active)); c != adp.CodePermissionDenied || r != "seal_rotation_required" {
		t.Fatalf("message after removal: %s %s", c, r)
	}
	// An epoch that still wraps for c is refused.
	bad, _, _ := NewEpoch(rand.Reader, room, 2, st.Recipients([]identity.AgentID{a.id, b.id, c.id}))
	if c, r := code(st.CheckEpoch(mustJSON(t, bad), active)); c != adp.CodePermissionDenied || r != "seal_wraps_mismatch" {
		t.Fatalf("wrap for a removed member: %s %s", c, r)
	}
	p2, k2, err := NewEpoch(rand.Reader, room, 2, st.Recipients(active))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckEpoch(mustJSON(t, p2), active); err != nil {
		t.Fatal(err)
	}
	seq++
	st.Apply(seq, b.id, TypeEpoch, mustJSON(t, p2))
	msg2, _ := SealMessage(rand.Reader, k2, room, 2, b.id, Inner{ContentType: "text/plain", Content: json.RawMessage(`"epoch two"`)})
	if err := st.CheckMessage(b.id, mustJSON(t, msg2), active); err != nil {
		t.Fatal(err)
	}

	// c still opens epoch 1 and its message ...
	ck1, err := OpenEpoch(c.priv, room, c.id, p1)
	if err != nil || !bytes.Equal(ck1, k1) {
		t.Fatalf("c opens epoch 1: %v", err)
	}
	in, err := OpenMessage(ck1, room, a.id, &msg1.Content)
	if err != nil || string(in.Content) != `"epoch one"` {
		t.Fatalf("c opens message 1: %v %s", err, in.Content)
	}
	// ... but not epoch 2, neither from its wrap list nor with another's wrap.
	if _, err := OpenEpoch(c.priv, room, c.id, p2); !errors.Is(err, ErrOpen) {
		t.Fatalf("c opens epoch 2: %v", err)
	}
	for _, w := range p2.Wraps {
		raw, _ := identity.DecodeB64(w.Wrap)
		commit, _ := identity.DecodeB64(p2.Commit)
		if _, err := c.priv.Unwrap(raw, room, 2, string(w.Member), commit); err == nil {
			t.Fatal("c opened another member's wrap")
		}
	}
	if _, err := OpenMessage(ck1, room, b.id, &msg2.Content); err == nil {
		t.Fatal("epoch 1 key opened an epoch 2 message")
	}
	// b opens epoch 2.
	bk2, err := OpenEpoch(b.priv, room, b.id, p2)
	if err != nil || !bytes.Equal(bk2, k2) {
		t.Fatal(err)
	}
	if in, err := OpenMessage(bk2, room, b.id, &msg2.Content); err != nil || string(in.Content) != `"epoch two"` {
		t.Fatal(err)
	}
}

// The additional data binds room, epoch and sender; the commitment binds
// the key every member gets.
func TestBindings(t *testing.T) {
	a, b := newMember(t), newMember(t)
	key := bytes.Repeat([]byte{7}, 32)
	msg, _ := SealMessage(rand.Reader, key, room, 3, a.id, Inner{ContentType: "text/plain", Content: json.RawMessage(`"x"`)})
	if _, err := OpenMessage(key, room, a.id, &msg.Content); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMessage(key, room, b.id, &msg.Content); !errors.Is(err, ErrOpen) {
		t.Fatal("opened as another sender")
	}
	if _, err := OpenMessage(key, "d8ftedhpqhsusbg001th", a.id, &msg.Content); !errors.Is(err, ErrOpen) {
		t.Fatal("opened in another room")
	}
	other := msg.Content
	other.Epoch = 4
	if _, err := OpenMessage(key, room, a.id, &other); !errors.Is(err, ErrOpen) {
		t.Fatal("opened under another epoch")
	}
	flipped := msg.Content
	ct, _ := identity.DecodeB64(flipped.Ciphertext)
	ct[0] ^= 1
	flipped.Ciphertext = identity.EncodeB64(ct)
	if _, err := OpenMessage(key, room, a.id, &flipped); !errors.Is(err, ErrOpen) {
		t.Fatal("opened a tampered ciphertext")
	}

	// A rotator that wraps different keys for different members is caught
	// by the commitment.
	p, _, _ := NewEpoch(rand.Reader, room, 1, []Recipient{{a.id, MemberKey{2, a.priv.Public()}}, {b.id, MemberKey{3, b.priv.Public()}}})
	evil, _ := WrapKey(b.priv.Public(), room, 1, string(b.id), bytes.Repeat([]byte{9}, 32))
	p.Wraps[1].Wrap = identity.EncodeB64(evil)
	if _, err := OpenEpoch(a.priv, room, a.id, p); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEpoch(b.priv, room, b.id, p); !errors.Is(err, ErrOpen) {
		t.Fatal("a key that does not match the commitment was accepted")
	}
}

func TestHostileShapes(t *testing.T) {
	a, b := newMember(t), newMember(t)
	var st RoomState
	st.Apply(2, a.id, TypeKey, keyPayload(a))
	st.Apply(3, b.id, TypeKey, keyPayload(b))
	active := []identity.AgentID{a.id, b.id}
	good, key, _ := NewEpoch(rand.Reader, room, 1, st.Recipients(active))
	wrap := good.Wraps[0].Wrap
	goodEpoch := string(mustJSON(t, good))

	cases := []struct {
		name, payload string
		code          adp.Code
		reason        string
	}{
		{"key not base64", `{"public_key":"***"}`, adp.CodePayloadSchemaViolation, "seal_shape"},
		{"key short", `{"public_key":"AAAA"}`, adp.CodePayloadSchemaViolation, "seal_shape"},
		{"key low order (zero)", `{"public_key":"` + identity.EncodeB64(make([]byte, 32)) + `"}`, adp.CodePayloadSchemaViolation, "seal_shape"},
		{"key extra field", `{"public_key":"` + identity.EncodeB64(a.priv.Public()) + `","x":1}`, adp.CodePayloadSchemaViolation, "seal_shape"},
	}
	for _, c := range cases {
		if got, r := code(st.CheckKey([]byte(c.payload))); got != c.code || r != c.reason {
			t.Errorf("%s: %s %s", c.name, got, r)
		}
	}

	commit := good.Commit
	epochs := []struct {
		name, payload string
		code          adp.Code
		reason        string
	}{
		{"stale epoch", strings.Replace(goodEpoch, `"epoch":1`, `"epoch":5`, 1), adp.CodePermissionDenied, "seal_epoch_stale"},
		{"wrap for a non-member", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":%q},{"member":%q,"key_seq":3,"wrap":%q},{"member":%q,"key_seq":2,"wrap":%q}]}`,
			commit, a.id, wrap, b.id, wrap, newMember(t).id, wrap), adp.CodePermissionDenied, "seal_wraps_mismatch"},
		{"missing member", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":%q}]}`, commit, a.id, wrap), adp.CodePermissionDenied, "seal_wraps_mismatch"},
		{"old key seq", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":%q},{"member":%q,"key_seq":2,"wrap":%q}]}`, commit, a.id, wrap, b.id, wrap), adp.CodePermissionDenied, "seal_wraps_mismatch"},
		{"duplicate member", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":%q},{"member":%q,"key_seq":2,"wrap":%q}]}`, commit, a.id, wrap, a.id, wrap), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"short wrap", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":"AAAA"}]}`, commit, a.id), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"wrap extra field", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":%q,"note":"hi"}]}`, commit, a.id, wrap), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"bad member id", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[{"member":"bob","key_seq":2,"wrap":%q}]}`, commit, wrap), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"zero epoch", fmt.Sprintf(`{"epoch":0,"commit":%q,"wraps":[{"member":%q,"key_seq":2,"wrap":%q}]}`, commit, a.id, wrap), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"no wraps", fmt.Sprintf(`{"epoch":1,"commit":%q,"wraps":[]}`, commit), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"bad commit", fmt.Sprintf(`{"epoch":1,"commit":"AA","wraps":[{"member":%q,"key_seq":2,"wrap":%q}]}`, a.id, wrap), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"plaintext smuggled in", strings.Replace(goodEpoch, `"epoch":1`, `"epoch":1,"note":"secret"`, 1), adp.CodePayloadSchemaViolation, "seal_shape"},
	}
	for _, c := range epochs {
		if got, r := code(st.CheckEpoch([]byte(c.payload), active)); got != c.code || r != c.reason {
			t.Errorf("%s: %s %s", c.name, got, r)
		}
	}
	// Too many wraps: refused by count before any member is looked at.
	many := &EpochPayload{Epoch: 1, Commit: commit}
	for i := 0; i <= MaxWraps; i++ {
		many.Wraps = append(many.Wraps, Wrap{Member: a.id, KeySeq: 2, Wrap: wrap})
	}
	if got, r := code(st.CheckEpoch(mustJSON(t, many), active)); got != adp.CodePayloadTooLarge || r != "seal_wraps" {
		t.Errorf("too many wraps: %s %s", got, r)
	}

	if err := st.CheckEpoch([]byte(goodEpoch), active); err != nil {
		t.Fatal(err)
	}
	st.Apply(4, a.id, TypeEpoch, []byte(goodEpoch))
	msg, _ := SealMessage(rand.Reader, key, room, 1, a.id, Inner{ContentType: "text/plain", Content: json.RawMessage(`"hi"`)})
	goodMsg := string(mustJSON(t, msg))
	nonce := msg.Content.Nonce
	msgs := []struct {
		name, payload string
		code          adp.Code
		reason        string
	}{
		{"plaintext", `{"content_type":"text/plain","content":"the secret"}`, adp.CodePayloadSchemaViolation, "seal_required"},
		{"stale epoch", strings.Replace(goodMsg, `"epoch":1`, `"epoch":0`, 1), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"future epoch", strings.Replace(goodMsg, `"epoch":1`, `"epoch":2`, 1), adp.CodePermissionDenied, "seal_epoch_stale"},
		{"content a string", `{"content_type":"` + ContentType + `","content":"abc"}`, adp.CodePayloadSchemaViolation, "seal_shape"},
		{"short nonce", fmt.Sprintf(`{"content_type":%q,"content":{"epoch":1,"nonce":"AAAA","ciphertext":%q}}`, ContentType, msg.Content.Ciphertext), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"no tag", fmt.Sprintf(`{"content_type":%q,"content":{"epoch":1,"nonce":%q,"ciphertext":"AAAA"}}`, ContentType, nonce), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"extra field", fmt.Sprintf(`{"content_type":%q,"content":{"epoch":1,"nonce":%q,"ciphertext":%q,"plain":"x"}}`, ContentType, nonce, msg.Content.Ciphertext), adp.CodePayloadSchemaViolation, "seal_shape"},
		{"oversized", fmt.Sprintf(`{"content_type":%q,"content":{"epoch":1,"nonce":%q,"ciphertext":%q}}`, ContentType, nonce, strings.Repeat("A", b64Len(MaxCiphertext)+4)), adp.CodePayloadTooLarge, "seal_ciphertext"},
	}
	for _, c := range msgs {
		if got, r := code(st.CheckMessage(a.id, []byte(c.payload), active)); got != c.code || r != c.reason {
			t.Errorf("%s: %s %s", c.name, got, r)
		}
	}
	if err := st.CheckMessage(a.id, []byte(goodMsg), active); err != nil {
		t.Fatal(err)
	}
	// b publishes a new key: the epoch is no longer fresh.
	b2 := member{b.id, mustKey(t)}
	st.Apply(6, b.id, TypeKey, keyPayload(b2))
	if got, r := code(st.CheckMessage(a.id, []byte(goodMsg), active)); got != adp.CodePermissionDenied || r != "seal_rotation_required" {
		t.Errorf("after a new key: %s %s", got, r)
	}
	// A member without a key may not send into an epoch it cannot read.
	c := newMember(t)
	if got, r := code(st.CheckMessage(c.id, []byte(goodMsg), []identity.AgentID{a.id, c.id})); got != adp.CodePermissionDenied || r != "seal_rotation_required" {
		t.Errorf("keyless sender, stale epoch: %s %s", got, r)
	}
}

func mustKey(t testing.TB) *PrivateKey {
	k, err := GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestModeOf(t *testing.T) {
	for in, want := range map[string]string{"": HubTrusted, `{}`: HubTrusted, `{"confidentiality":"member-only"}`: MemberOnly,
		`{"confidentiality":"hub-trusted","x":1}`: HubTrusted, `[1]`: HubTrusted} {
		if got, err := ModeOf(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("%s: %q %v", in, got, err)
		}
	}
	for _, in := range []string{`{"confidentiality":"secret"}`, `{"confidentiality":1}`} {
		if _, err := ModeOf(json.RawMessage(in)); adp.CodeOf(err) != adp.CodeInvalidEvent {
			t.Errorf("%s: %v", in, err)
		}
	}
}

// Bound on cost: a sealed message costs a fixed number of bytes over its
// plaintext (nonce, tag, field names) plus base64's 4/3; an epoch costs a
// fixed number of bytes per member.
func TestCostBounds(t *testing.T) {
	a := newMember(t)
	key := bytes.Repeat([]byte{1}, 32)
	for _, n := range []int{0, 1, 100, 4096, 60000} {
		text := strings.Repeat("x", n)
		plain := mustJSON(t, map[string]any{"content_type": "text/plain", "content": text})
		msg, err := SealMessage(rand.Reader, key, room, 1, a.id, Inner{ContentType: "text/plain", Content: mustJSON(t, text)})
		if err != nil {
			t.Fatal(err)
		}
		sealed := mustJSON(t, msg)
		// ciphertext = inner JSON (plain minus nothing) + 16-byte tag, in base64url.
		limit := b64Len(len(plain)+TagSize) + b64Len(NonceSize) + 120
		if len(sealed) > limit {
			t.Errorf("%d-byte text: sealed payload %d bytes > bound %d (plain %d)", n, len(sealed), limit, len(plain))
		}
		t.Logf("text %6d: plain payload %6d, sealed %6d, overhead %d", n, len(plain), len(sealed), len(sealed)-len(plain))
	}

	var per []int
	var prev int
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		var to []Recipient
		for i := 0; i < n; i++ {
			m := newMember(t)
			to = append(to, Recipient{m.id, MemberKey{int64(i + 2), m.priv.Public()}})
		}
		p, _, err := NewEpoch(rand.Reader, room, 1, to)
		if err != nil {
			t.Fatal(err)
		}
		size := len(mustJSON(t, p))
		if n > 1 {
			per = append(per, (size-prev)/(n/2))
		}
		prev = size
		// Fixed cost plus at most 200 bytes per member (member id 53, key_seq, wrap 107, names).
		if size > 100+200*n {
			t.Errorf("%d members: %d bytes", n, size)
		}
	}
	for _, d := range per[1:] {
		if d != per[0] && d != per[0]+1 && d != per[0]-1 {
			t.Errorf("per-member epoch growth is not constant: %v", per)
		}
	}
	t.Logf("epoch bytes per member: %v", per)
}

// The private key never prints.
func TestPrivateKeyDoesNotPrint(t *testing.T) {
	k := mustKey(t)
	s := fmt.Sprintf("%v %s %+v", k, k, k)
	if strings.Contains(s, identity.EncodeB64(k.Bytes())) || !strings.Contains(s, "redacted") {
		t.Fatalf("printed: %s", s)
	}
}

// A sealed custom event costs the sealed-message overhead plus the
// {type, payload} wrapper and the event content type, all under base64url:
// about 4/3 of the plaintext payload plus a fixed few hundred bytes.
func TestSealedEventCost(t *testing.T) {
	a := newMember(t)
	key := bytes.Repeat([]byte{1}, 32)
	for _, n := range []int{0, 100, 4000, 48000} {
		payload := mustJSON(t, map[string]any{"type": "propose", "text": strings.Repeat("x", n)})
		in, err := EventInner("round.turn", payload)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := SealMessage(rand.Reader, key, room, 1, a.id, in)
		if err != nil {
			t.Fatal(err)
		}
		sealed := mustJSON(t, msg)
		fixed := len(sealed) - b64Len(len(payload))
		if fixed > 300 {
			t.Errorf("%d-byte text: sealed event %d bytes for a %d-byte payload: %d beyond 4/3 of it", n, len(sealed), len(payload), fixed)
		}
		t.Logf("payload %6d: sealed event %6d, beyond 4/3 of the payload %d", len(payload), len(sealed), fixed)
		// It opens to the same event.
		got, err := OpenMessage(key, room, a.id, &msg.Content)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := ParseInnerEvent(got.Content)
		if err != nil || ev.Type != "round.turn" || !bytes.Equal(ev.Payload, payload) || got.ContentType != EventContentType {
			t.Fatalf("opened %+v %v", ev, err)
		}
	}
	// Hostile bodies are refused by ParseInnerEvent.
	for _, b := range []string{`{}`, `{"type":"x"}`, `{"type":"x","payload":[]}`, `{"type":"","payload":{}}`, `{"type":"x","payload":{},"more":1}`, `[]`} {
		if _, err := ParseInnerEvent([]byte(b)); err == nil {
			t.Errorf("%s accepted", b)
		}
	}
}
