package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

var testSeed = bytes.Repeat([]byte{7}, 32)

func testKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := KeyFromSeed(testSeed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ptr[T any](v T) *T { return &v }

func testEvent(t testing.TB) Event {
	return Event{
		Protocol:  adp.Protocol,
		Type:      "message.create",
		Actor:     AgentIDFromKey(testKey(t).Public().(ed25519.PublicKey)),
		CreatedAt: 1779753700000,
		Nonce:     1779753700001,
		Payload:   []byte(`{"content":"hi","content_type":"text/markdown"}`),
		RoomID:    ptr("d8ftedhpqhsusbg001tg"),
		BaseSeq:   ptr(int64(41)),
		BaseHash:  ptr("QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"),
		Mentions:  []string{},
	}
}

// eventFields is the member list of a test event as raw JSON values.
type eventFields [][2]string

func baseFields() eventFields {
	return eventFields{
		{"protocol", `"agent-discourse/1.0"`},
		{"type", `"message.create"`},
		{"actor", `"did:agent:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw"`},
		{"created_at", `1779753700000`},
		{"nonce", `1779753700001`},
		{"payload", `{"content":"hi"}`},
		{"room_id", `"d8ftedhpqhsusbg001tg"`},
		{"base_seq", `41`},
		{"base_hash", `"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"`},
		{"mentions", `[]`},
	}
}

func (f eventFields) with(name, raw string) eventFields {
	out := eventFields{}
	found := false
	for _, kv := range f {
		if kv[0] == name {
			found = true
			if raw == "" {
				continue
			}
			kv[1] = raw
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, [2]string{name, raw})
	}
	return out
}

func (f eventFields) json() []byte {
	var b strings.Builder
	b.WriteString("{")
	for i, kv := range f {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + kv[0] + `":` + kv[1])
	}
	b.WriteString("}")
	return []byte(b.String())
}

const (
	someHash = "QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"
	someSig  = "bFrZgIic7m8hath5TzIStusfp6_7z3lBIh3WcBj4YLJ4u7hUOkcj2dCP_aWwIfjIdj-PrG0xzcv7pR5S_boeBA"
)

func TestParseEnvelopeFields(t *testing.T) {
	if _, err := ParseEnvelope(envelopeJSON(someHash, baseFields().json(), someSig)); err != nil {
		t.Fatalf("base event rejected: %v", err)
	}
	bad := []struct {
		name, field, raw string
		code             adp.Code
	}{
		{"protocol number", "protocol", `1`, adp.CodeInvalidEvent},
		{"protocol missing", "protocol", ``, adp.CodeInvalidEvent},
		{"type null", "type", `null`, adp.CodeInvalidEvent},
		{"type missing", "type", ``, adp.CodeInvalidEvent},
		{"actor number", "actor", `5`, adp.CodeInvalidEvent},
		{"actor missing", "actor", ``, adp.CodeInvalidEvent},
		{"actor malformed", "actor", `"did:agent:abc"`, adp.CodeInvalidActor},
		{"actor padded", "actor", `"did:agent:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw="`, adp.CodeInvalidActor},
		{"actor wrong prefix", "actor", `"did:key:6kpsY-KcUgq-9VB7Ey7F-ZVHdq6-vnuSQh7qaRRG0iw"`, adp.CodeInvalidActor},
		{"created_at string", "created_at", `"1"`, adp.CodeInvalidEvent},
		{"created_at negative", "created_at", `-1`, adp.CodeInvalidEvent},
		{"created_at fraction", "created_at", `1779753700000.0`, adp.CodeInvalidEvent},
		{"created_at 2^53", "created_at", `9007199254740992`, adp.CodeInvalidEvent},
		{"created_at missing", "created_at", ``, adp.CodeInvalidEvent},
		{"nonce 0", "nonce", `0`, adp.CodeInvalidEvent},
		{"nonce -1", "nonce", `-1`, adp.CodeInvalidEvent},
		{"nonce 2^53", "nonce", `9007199254740992`, adp.CodeInvalidEvent},
		{"nonce exponent", "nonce", `1e3`, adp.CodeInvalidEvent},
		{"nonce float", "nonce", `1.5`, adp.CodeInvalidEvent},
		{"nonce bool", "nonce", `true`, adp.CodeInvalidEvent},
		{"nonce missing", "nonce", ``, adp.CodeInvalidEvent},
		{"payload missing", "payload", ``, adp.CodeInvalidEvent},
		{"payload bad json", "payload", `{"a":1,"a":2}`, adp.CodeInvalidEvent},
		{"payload lone surrogate", "payload", `"\ud800"`, adp.CodeInvalidEvent},
		{"room_id number", "room_id", `3`, adp.CodeInvalidEvent},
		{"base_seq 0", "base_seq", `0`, adp.CodeInvalidEvent},
		{"base_seq string", "base_seq", `"41"`, adp.CodeInvalidEvent},
		{"base_seq fraction", "base_seq", `41.0`, adp.CodeInvalidEvent},
		{"base_hash number", "base_hash", `5`, adp.CodeInvalidEvent},
		{"base_hash 31 bytes", "base_hash", `"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMA"`, adp.CodeInvalidEvent},
		{"base_hash 33 bytes", "base_hash", `"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDAw"`, adp.CodeInvalidEvent},
		{"base_hash trailing bits", "base_hash", `"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDB"`, adp.CodeInvalidEvent},
		{"base_hash std alphabet", "base_hash", `"QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNo+DA"`, adp.CodeInvalidEvent},
		{"mentions string", "mentions", `"x"`, adp.CodeInvalidEvent},
		{"mentions object", "mentions", `{}`, adp.CodeInvalidEvent},
		{"mentions non-string entry", "mentions", `[1]`, adp.CodeInvalidEvent},
		{"mentions null", "mentions", `null`, adp.CodeInvalidEvent},
		{"unknown field", "audience", `"x"`, adp.CodeInvalidEvent},
		{"unknown field null", "extra", `null`, adp.CodeInvalidEvent},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEnvelope(envelopeJSON(someHash, baseFields().with(c.field, c.raw).json(), someSig))
			wantCode(t, err, c.code)
		})
	}

	// Optional fields may be absent; mentions entries are not validated here.
	ok := baseFields().with("room_id", "").with("base_seq", "").with("base_hash", "").with("mentions", "")
	env, err := ParseEnvelope(envelopeJSON(someHash, ok.json(), someSig))
	if err != nil {
		t.Fatal(err)
	}
	if env.Event.RoomID != nil || env.Event.BaseSeq != nil || env.Event.BaseHash != nil || env.Event.Mentions != nil {
		t.Fatalf("absent fields came back present: %+v", env.Event)
	}
	env, err = ParseEnvelope(envelopeJSON(someHash, baseFields().with("mentions", `["not an id","x"]`).json(), someSig))
	if err != nil || len(env.Event.Mentions) != 2 || env.Event.Mentions[0] != "not an id" {
		t.Fatalf("mentions: %v %+v", err, env)
	}
	env, err = ParseEnvelope(envelopeJSON(someHash, baseFields().json(), someSig))
	if err != nil || env.Event.Mentions == nil || len(env.Event.Mentions) != 0 {
		t.Fatalf("empty mentions: %v", err)
	}
	if string(env.Event.Payload) != `{"content":"hi"}` || *env.Event.BaseSeq != 41 || env.Event.Nonce != 1779753700001 {
		t.Fatalf("fields: %+v", env.Event)
	}
}

func TestParseEnvelopeShape(t *testing.T) {
	ev := string(baseFields().json())
	cases := []struct {
		name, text string
		code       adp.Code
	}{
		{"unknown envelope member", `{"hash":"` + someHash + `","event":` + ev + `,"signature":"` + someSig + `","x":1}`, adp.CodeInvalidEvent},
		{"missing hash", `{"event":` + ev + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"missing event", `{"hash":"` + someHash + `","signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"missing signature", `{"hash":"` + someHash + `","event":` + ev + `}`, adp.CodeInvalidEvent},
		{"duplicate hash", `{"hash":"` + someHash + `","hash":"` + someHash + `","event":` + ev + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"duplicate event member", `{"hash":"` + someHash + `","event":` + ev[:len(ev)-1] + `,"nonce":5}` + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"escaped duplicate event member", `{"hash":"` + someHash + `","event":` + ev[:len(ev)-1] + `,"\u006eonce":5}` + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"event array", `{"hash":"` + someHash + `","event":[],"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"hash number", `{"hash":1,"event":` + ev + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"hash short", `{"hash":"AAAA","event":` + ev + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"hash padded", `{"hash":"` + someHash + `=","event":` + ev + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"signature short", `{"hash":"` + someHash + `","event":` + ev + `,"signature":"` + someSig[:85] + `"}`, adp.CodeInvalidEvent},
		{"signature trailing bits", `{"hash":"` + someHash + `","event":` + ev + `,"signature":"` + someSig[:85] + `C"}`, adp.CodeInvalidEvent},
		{"signature null", `{"hash":"` + someHash + `","event":` + ev + `,"signature":null}`, adp.CodeInvalidEvent},
		{"not an object", `[]`, adp.CodeInvalidEvent},
		{"empty", ``, adp.CodeInvalidEvent},
		{"empty object", `{}`, adp.CodeInvalidEvent},
		{"trailing garbage", `{"hash":"` + someHash + `","event":` + ev + `,"signature":"` + someSig + `"}x`, adp.CodeInvalidEvent},
		{"truncated", `{"hash":"` + someHash + `","event":` + ev, adp.CodeInvalidEvent},
		{"invalid utf8 in payload", `{"hash":"` + someHash + `","event":` + strings.Replace(ev, `"hi"`, "\"\xff\"", 1) + `,"signature":"` + someSig + `"}`, adp.CodeInvalidEvent},
		{"json error beats bad actor", `{"hash":"` + someHash + `","event":` + string(baseFields().with("actor", `"x"`).json()) + `,"signature":"` + someSig + `",}`, adp.CodeInvalidEvent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(c.text))
			wantCode(t, err, c.code)
		})
	}
}

func TestSignOpenVerify(t *testing.T) {
	priv := testKey(t)
	env, err := Sign(priv, testEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEnvelope(env.Raw); err != nil {
		t.Fatal(err)
	}
	if d, _ := env.Event.Digest(); d != env.Digest {
		t.Fatal("Event.Digest differs from envelope digest")
	}
	if m, _ := env.Event.MarshalJSON(); !bytes.Equal(m, env.Raw[len(`{"event":`):len(`{"event":`)+len(m)]) {
		t.Fatal("MarshalJSON differs from Raw")
	}

	// A non-canonical rendering of the same envelope has the same Raw and digest.
	var noisy bytes.Buffer
	noisy.WriteString("{ \"signature\" : \"" + env.Signature + "\",\n \"ha\\u0073h\": \"" + env.Hash + "\", \"event\": ")
	canon, _ := env.Event.Canonical()
	noisy.Write(reorder(canon))
	noisy.WriteString(" }\n")
	env2, err := OpenEnvelope(noisy.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, noisy.Bytes())
	}
	if !bytes.Equal(env2.Raw, env.Raw) || env2.Digest != env.Digest {
		t.Fatalf("Raw differs\n%s\n%s", env2.Raw, env.Raw)
	}

	// Tampering.
	other := *env
	other.Hash = EncodeB64(make([]byte, 32))
	wantCode(t, other.Verify(), adp.CodeInvalidEventHash)
	other = *env
	other.Digest[0] ^= 1
	wantCode(t, other.Verify(), adp.CodeInvalidEventHash)
	sig, _ := DecodeB64(env.Signature)
	sig[5] ^= 1
	other = *env
	other.Signature = EncodeB64(sig)
	wantCode(t, other.Verify(), adp.CodeInvalidSignature)
	_, err = OpenEnvelope(bytes.Replace(env.Raw, []byte(`"nonce":1779753700001`), []byte(`"nonce":1779753700002`), 1))
	wantCode(t, err, adp.CodeInvalidEventHash)
	// Re-signed by another key but claiming the original actor.
	otherKey, _ := KeyFromSeed(bytes.Repeat([]byte{8}, 32))
	forged := ed25519.Sign(otherKey, env.Digest[:])
	_, err = OpenEnvelope(bytes.Replace(env.Raw, []byte(env.Signature), []byte(EncodeB64(forged)), 1))
	wantCode(t, err, adp.CodeInvalidSignature)
}

// reorder renders a canonical object with its members reversed and spaced,
// and the payload with escaped characters.
func reorder(canon []byte) []byte {
	v, _ := ParseJSON(canon)
	m := v.(map[string]any)
	var b bytes.Buffer
	b.WriteString("{")
	keys := []string{"type", "room_id", "protocol", "payload", "nonce", "mentions", "created_at", "base_seq", "base_hash", "actor"}
	first := true
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			continue
		}
		if !first {
			b.WriteString(" , ")
		}
		first = false
		b.WriteString(`"` + k + `" : `)
		switch k {
		case "payload":
			b.WriteString(`{ "content_type" : "text\/markdown", "content":"\u0068i" }`)
		default:
			sub := canonMember(canon, k)
			b.Write(sub)
		}
	}
	b.WriteString("}")
	return b.Bytes()
}

// canonMember extracts the raw value of a top-level member of a flat canonical
// object whose values are scalars or empty arrays.
func canonMember(canon []byte, k string) []byte {
	i := bytes.Index(canon, []byte(`"`+k+`":`)) + len(k) + 3
	j := i
	for j < len(canon) && canon[j] != ',' && canon[j] != '}' {
		j++
	}
	return canon[i:j]
}

func TestSignErrors(t *testing.T) {
	priv := testKey(t)
	ev := testEvent(t)
	ev.Actor = AgentIDFromKey(make([]byte, 32))
	_, err := Sign(priv, ev)
	wantCode(t, err, adp.CodeInvalidActor)

	_, err = Sign(priv[:10], testEvent(t))
	wantCode(t, err, adp.CodeInvalidRequest)

	for name, mut := range map[string]func(*Event){
		"nonce 0":          func(e *Event) { e.Nonce = 0 },
		"nonce 2^53":       func(e *Event) { e.Nonce = MaxSafeInt + 1 },
		"created negative": func(e *Event) { e.CreatedAt = -1 },
		"base_seq 0":       func(e *Event) { e.BaseSeq = ptr(int64(0)) },
		"base_hash short":  func(e *Event) { e.BaseHash = ptr("AAAA") },
		"payload empty":    func(e *Event) { e.Payload = nil },
		"payload invalid":  func(e *Event) { e.Payload = []byte(`{"a":1,"a":1}`) },
		"type bad utf8":    func(e *Event) { e.Type = "\xff" },
		"mention bad utf8": func(e *Event) { e.Mentions = []string{"\xff"} },
	} {
		t.Run(name, func(t *testing.T) {
			ev := testEvent(t)
			mut(&ev)
			_, err := Sign(priv, ev)
			wantCode(t, err, adp.CodeInvalidEvent)
			_, err = ev.MarshalJSON()
			wantCode(t, err, adp.CodeInvalidEvent)
		})
	}

	// Strings needing escapes and a non-canonical payload round-trip.
	ev = testEvent(t)
	ev.Type = "x\"\\\x01\n<>&\u2028"
	ev.Payload = []byte(` { "b" : 1.0 , "a" : "\u00e9" } `)
	ev.Mentions = nil
	env, err := Sign(priv, ev)
	if err != nil {
		t.Fatal(err)
	}
	if env.Event.Type != ev.Type || string(env.Event.Payload) != `{"a":"é","b":1}` || env.Event.Mentions != nil {
		t.Fatalf("round trip: %+v", env.Event)
	}
	if !bytes.Contains(env.Raw, []byte(`"type":"x\"\\\u0001\n<>&`+"\u2028"+`"`)) {
		t.Fatalf("escaping: %s", env.Raw)
	}
	if _, err := OpenEnvelope(env.Raw); err != nil {
		t.Fatal(err)
	}
}

// --- Ed25519 ---

var (
	bigP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	bigL = func() *big.Int {
		l, _ := new(big.Int).SetString("27742317777372353535851937790883648493", 10)
		return l.Add(l, new(big.Int).Lsh(big.NewInt(1), 252))
	}()
)

// le32 encodes n as 32 little-endian bytes.
func le32(n *big.Int) []byte {
	be := n.FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		be[i], be[j] = be[j], be[i]
	}
	return be
}

func TestVerifyStrictExtra(t *testing.T) {
	priv := testKey(t)
	pub := priv.Public().(ed25519.PublicKey)
	msg := make([]byte, 32)
	msg[0] = 9
	sig := ed25519.Sign(priv, msg)
	if !VerifyStrict(pub, msg, sig) {
		t.Fatal("honest signature rejected")
	}

	smallOrderHex := []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	}
	var bad [][]byte
	for _, h := range smallOrderHex {
		b, _ := hex.DecodeString(h)
		withTop := append([]byte(nil), b...)
		withTop[31] |= 0x80
		bad = append(bad, b, withTop)
	}
	// Non-canonical y: p, p+1, 2^255-1, each with and without the top bit.
	for _, y := range []*big.Int{bigP, new(big.Int).Add(bigP, big.NewInt(1)), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(1))} {
		b := le32(y)
		withTop := append([]byte(nil), b...)
		withTop[31] |= 0x80
		bad = append(bad, b, withTop)
	}
	for i, enc := range bad {
		if strictPoint(enc) {
			t.Errorf("strictPoint accepted bad encoding %d %x", i, enc)
		}
		if VerifyStrict(enc, msg, sig) {
			t.Errorf("accepted bad A %x", enc)
		}
		r := append(append([]byte(nil), enc...), sig[32:]...)
		if VerifyStrict(pub, msg, r) {
			t.Errorf("accepted bad R %x", enc)
		}
	}
	// A lenient verifier accepts the small-order forgery; VerifyStrict does not.
	ident, _ := hex.DecodeString(smallOrderHex[0])
	forgery := append(append([]byte(nil), ident...), make([]byte, 32)...)
	if !ed25519.Verify(ident, msg, forgery) {
		t.Log("note: crypto/ed25519 now rejects the small-order forgery itself")
	}
	if VerifyStrict(ident, msg, forgery) {
		t.Fatal("small-order forgery accepted")
	}
	// p-2 is canonical (and not small order).
	if !strictPoint(le32(new(big.Int).Sub(bigP, big.NewInt(2)))) {
		t.Fatal("canonical y = p-2 rejected")
	}
	// S + L.
	s := new(big.Int).SetBytes(reverse(sig[32:]))
	sl := append(append([]byte(nil), sig[:32]...), le32(s.Add(s, bigL))...)
	if VerifyStrict(pub, msg, sl) {
		t.Fatal("S+L accepted")
	}
	// Lengths.
	for _, c := range []struct{ pub, msg, sig []byte }{
		{pub[:31], msg, sig}, {append(pub, 0), msg, sig}, {pub, msg, sig[:63]}, {pub, msg, append(sig, 0)},
		{pub, msg[:31], sig}, {nil, nil, nil},
	} {
		if VerifyStrict(c.pub, c.msg, c.sig) {
			t.Fatalf("accepted wrong lengths %d %d %d", len(c.pub), len(c.msg), len(c.sig))
		}
	}
	long := []byte("a JWS signing input of any length")
	if !VerifyStrictMessage(pub, long, ed25519.Sign(priv, long)) || VerifyStrict(pub, long, ed25519.Sign(priv, long)) {
		t.Fatal("VerifyStrictMessage / VerifyStrict length handling")
	}
}

func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[len(b)-1-i] = b[i]
	}
	return out
}

func TestEnvelopeJSONMethods(t *testing.T) {
	env, err := Sign(testKey(t), testEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	type record struct {
		Seq      int       `json:"seq"`
		Envelope *Envelope `json:"envelope"`
	}
	b, err := json.Marshal(record{Seq: 3, Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	var back record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Envelope.Raw, env.Raw) || back.Envelope.Verify() != nil {
		t.Fatalf("round trip through encoding/json failed: %s", b)
	}
	err = json.Unmarshal([]byte(`{"seq":1,"envelope":{"hash":"x"}}`), &back)
	wantCode(t, err, adp.CodeInvalidEvent)
	long := strings.Repeat("n", 10000)
	_, err = ParseEnvelope([]byte(`{"` + long + `":1}`))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error message not bounded: %d bytes", len(err.Error()))
	}
	err = CheckJSON([]byte(`{"` + long + `":1,"` + long + `":2}`))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error message not bounded")
	}
}

func TestAppendJCSString(t *testing.T) {
	var all []byte
	for c := 1; c < 0x80; c++ {
		all = append(all, byte(c))
	}
	s := string(all) + "\x00é\u2028😀"
	got, ok := appendJCSString(nil, s)
	if !ok {
		t.Fatal("rejected valid UTF-8")
	}
	lit, _ := json.Marshal(s)
	want, err := Canonicalize(lit)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("appendJCSString\n got %s\nwant %s (%v)", got, want, err)
	}
	if _, ok := appendJCSString(nil, "\xed\xa0\x80"); ok {
		t.Fatal("accepted invalid UTF-8")
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func TestKeys(t *testing.T) {
	k, err := GenerateKey(bytes.NewReader(testSeed))
	if err != nil || !bytes.Equal(k, testKey(t)) {
		t.Fatalf("GenerateKey from a fixed reader: %v", err)
	}
	if k, err := GenerateKey(nil); err != nil || len(k) != ed25519.PrivateKeySize {
		t.Fatalf("GenerateKey(nil): %v", err)
	}
	_, err = GenerateKey(failReader{})
	wantCode(t, err, adp.CodeInternal)
	_, err = KeyFromSeed(make([]byte, 31))
	wantCode(t, err, adp.CodeInvalidRequest)
}
