package identity

import (
	"crypto/ed25519"
	"crypto/sha3"
	"encoding/json"
	"strconv"

	"github.com/adpnode/adpnode/adp"
	"github.com/gowebpki/jcs"
)

// Event is the closed ADP event object (Identity §5, ADP §6): the six base
// fields plus the optional ADP fields room_id, base_seq, base_hash and
// mentions. Optional fields are absent when nil.
type Event struct {
	Protocol  string
	Type      string
	Actor     AgentID
	CreatedAt int64           // Unix ms, 0..2^53-1
	Nonce     int64           // 1..2^53-1
	Payload   json.RawMessage // the payload value as canonical (JCS) bytes; any JSON value
	RoomID    *string         // nil = absent
	BaseSeq   *int64          // nil = absent; when present a positive safe integer
	BaseHash  *string         // nil = absent; when present canonical b64url of 32 bytes
	Mentions  []string        // nil = absent; entries are checked by the room layer
}

// Envelope is a parsed {hash, event, signature} envelope.
type Envelope struct {
	Hash      string   // as received: b64url of the 32-byte digest
	Event     Event    // Event.Payload aliases Raw
	Signature string   // as received: b64url of 64 bytes
	Digest    [32]byte // recomputed SHA3-256(JCS(event))
	Raw       []byte   // JCS(envelope): canonical bytes of {hash,event,signature}
}

func eventErr(reason, msg string) error { return adp.Reason(adp.CodeInvalidEvent, reason, msg) }

// validate checks the field ranges and encodings of e (not the payload).
func (e *Event) validate() error {
	if _, err := ParseAgentID(string(e.Actor)); err != nil {
		return err
	}
	if e.CreatedAt < 0 || e.CreatedAt > MaxSafeInt {
		return eventErr("field_range", "event.created_at must be an integer in 0..2^53-1")
	}
	if e.Nonce < 1 || e.Nonce > MaxSafeInt {
		return eventErr("field_range", "event.nonce must be an integer in 1..2^53-1")
	}
	if e.BaseSeq != nil && (*e.BaseSeq < 1 || *e.BaseSeq > MaxSafeInt) {
		return eventErr("field_range", "event.base_seq must be an integer in 1..2^53-1")
	}
	if e.BaseHash != nil && !validB64Len(*e.BaseHash, 32) {
		return eventErr("field_encoding", "event.base_hash must be canonical base64url of 32 bytes")
	}
	return nil
}

// MarshalJSON returns the JCS form of the event with only its present
// fields. It checks field ranges, the actor and that the payload is strict
// JSON; it does not check protocol, type or any room rule. Note that
// encoding/json.Marshal re-escapes <, >, & and U+2028/9 in this output; use
// Canonical for the signed bytes.
func (e *Event) MarshalJSON() ([]byte, error) {
	return e.appendCanonical(nil)
}

// Canonical returns JCS(event); see MarshalJSON for what it checks.
func (e *Event) Canonical() ([]byte, error) { return e.appendCanonical(nil) }

// Digest returns SHA3-256(JCS(event)), the event hash; see MarshalJSON for
// what it checks.
func (e *Event) Digest() ([32]byte, error) {
	b, err := e.appendCanonical(nil)
	if err != nil {
		return [32]byte{}, err
	}
	return sha3.Sum256(b), nil
}

func (e *Event) appendCanonical(buf []byte) ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	if len(e.Payload) == 0 {
		return nil, eventErr("missing_field", "event.payload is missing")
	}
	payload, err := canonicalize(e.Payload)
	if err != nil {
		return nil, eventErr("malformed_json", "event.payload: "+err.Error())
	}
	str := func(name, s string) error {
		var ok bool
		if buf, ok = appendJCSString(buf, s); !ok {
			return eventErr("field_encoding", "event."+name+" is not valid UTF-8")
		}
		return nil
	}
	buf = append(buf, `{"actor":"`...)
	buf = append(buf, e.Actor...)
	buf = append(buf, '"')
	if e.BaseHash != nil {
		buf = append(buf, `,"base_hash":"`...)
		buf = append(buf, *e.BaseHash...)
		buf = append(buf, '"')
	}
	if e.BaseSeq != nil {
		buf = append(buf, `,"base_seq":`...)
		buf = strconv.AppendInt(buf, *e.BaseSeq, 10)
	}
	buf = append(buf, `,"created_at":`...)
	buf = strconv.AppendInt(buf, e.CreatedAt, 10)
	if e.Mentions != nil {
		buf = append(buf, `,"mentions":[`...)
		for i, m := range e.Mentions {
			if i > 0 {
				buf = append(buf, ',')
			}
			if err := str("mentions", m); err != nil {
				return nil, err
			}
		}
		buf = append(buf, ']')
	}
	buf = append(buf, `,"nonce":`...)
	buf = strconv.AppendInt(buf, e.Nonce, 10)
	buf = append(buf, `,"payload":`...)
	buf = append(buf, payload...)
	buf = append(buf, `,"protocol":`...)
	if err := str("protocol", e.Protocol); err != nil {
		return nil, err
	}
	if e.RoomID != nil {
		buf = append(buf, `,"room_id":`...)
		if err := str("room_id", *e.RoomID); err != nil {
			return nil, err
		}
	}
	buf = append(buf, `,"type":`...)
	if err := str("type", e.Type); err != nil {
		return nil, err
	}
	return append(buf, '}'), nil
}

// Event member bits.
const (
	fProtocol uint16 = 1 << iota
	fType
	fActor
	fCreatedAt
	fNonce
	fPayload
	fRoomID
	fBaseSeq
	fBaseHash
	fMentions

	fRequired = fProtocol | fType | fActor | fCreatedAt | fNonce | fPayload
)

var requiredNames = []struct {
	bit  uint16
	name string
}{
	{fProtocol, "protocol"}, {fType, "type"}, {fActor, "actor"},
	{fCreatedAt, "created_at"}, {fNonce, "nonce"}, {fPayload, "payload"},
}

// parsedEvent is the result of parsing an event object in place.
type parsedEvent struct {
	ev               Event
	actor            string
	start, end       int // span of the event object
	payStart, payEnd int // span of the payload value
	canonical        bool
}

func jsonErr(err error) error {
	if _, ok := err.(*JSONError); ok {
		return eventErr("malformed_json", err.Error())
	}
	return err
}

// eventObject parses the event object at p.i. JSON errors are returned as
// *JSONError, shape and field errors as invalid_event. The actor is returned
// unchecked.
func (p *parser) eventObject(pe *parsedEvent) error {
	if p.i >= len(p.d) || p.d[p.i] != '{' {
		return eventErr("field_type", "event must be an object")
	}
	pe.start = p.i
	saved := p.canon
	p.canon = true
	if err := p.enter(); err != nil {
		return err
	}
	p.i++
	var seen uint16
	var prev []byte
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == '}' {
		p.i++
	} else {
		for {
			p.ws()
			if p.i >= len(p.d) || p.d[p.i] != '"' {
				return p.unexpected(p.i, "a member name")
			}
			off := p.i
			name, err := p.str()
			if err != nil {
				return err
			}
			var bit uint16
			switch string(name) {
			case "protocol":
				bit = fProtocol
			case "type":
				bit = fType
			case "actor":
				bit = fActor
			case "created_at":
				bit = fCreatedAt
			case "nonce":
				bit = fNonce
			case "payload":
				bit = fPayload
			case "room_id":
				bit = fRoomID
			case "base_seq":
				bit = fBaseSeq
			case "base_hash":
				bit = fBaseHash
			case "mentions":
				bit = fMentions
			default:
				return eventErr("unknown_field", "event has an unknown member "+quoteName(name))
			}
			if seen&bit != 0 {
				return p.failf(off, "duplicate member name %s", quoteName(name))
			}
			seen |= bit
			if prev != nil && compareUTF16(prev, name) > 0 {
				p.canon = false
			}
			prev = name
			p.ws()
			if p.i >= len(p.d) || p.d[p.i] != ':' {
				return p.unexpected(p.i, "':'")
			}
			p.i++
			p.ws()
			if err := p.eventMember(pe, bit); err != nil {
				return err
			}
			p.ws()
			if p.i < len(p.d) {
				if c := p.d[p.i]; c == ',' {
					p.i++
					continue
				} else if c == '}' {
					p.i++
					break
				}
			}
			return p.unexpected(p.i, "',' or '}'")
		}
	}
	p.depth--
	pe.end = p.i
	pe.canonical = p.canon
	p.canon = saved && p.canon
	if seen&fRequired != fRequired {
		for _, r := range requiredNames {
			if seen&r.bit == 0 {
				return eventErr("missing_field", "event."+r.name+" is missing")
			}
		}
	}
	return nil
}

func (p *parser) eventMember(pe *parsedEvent, bit uint16) error {
	e := &pe.ev
	switch bit {
	case fProtocol:
		s, err := p.stringField("protocol")
		e.Protocol = s
		return err
	case fType:
		s, err := p.stringField("type")
		e.Type = s
		return err
	case fActor:
		s, err := p.stringField("actor")
		pe.actor = s
		return err
	case fRoomID:
		s, err := p.stringField("room_id")
		e.RoomID = &s
		return err
	case fBaseHash:
		s, err := p.stringField("base_hash")
		if err != nil {
			return err
		}
		if !validB64Len(s, 32) {
			return eventErr("field_encoding", "event.base_hash must be canonical base64url of 32 bytes")
		}
		e.BaseHash = &s
		return nil
	case fCreatedAt:
		v, err := p.intField("created_at")
		if err != nil {
			return err
		}
		if v < 0 {
			return eventErr("field_range", "event.created_at must be an integer in 0..2^53-1")
		}
		e.CreatedAt = v
	case fNonce:
		v, err := p.intField("nonce")
		if err != nil {
			return err
		}
		if v < 1 {
			return eventErr("field_range", "event.nonce must be an integer in 1..2^53-1")
		}
		e.Nonce = v
	case fBaseSeq:
		v, err := p.intField("base_seq")
		if err != nil {
			return err
		}
		if v < 1 {
			return eventErr("field_range", "event.base_seq must be an integer in 1..2^53-1")
		}
		e.BaseSeq = &v
	case fPayload:
		pe.payStart = p.i
		if _, err := p.value(); err != nil {
			return err
		}
		pe.payEnd = p.i
	case fMentions:
		return p.mentions(e)
	}
	return nil
}

func (p *parser) stringField(name string) (string, error) {
	if p.i >= len(p.d) || p.d[p.i] != '"' {
		return "", eventErr("field_type", "event."+name+" must be a string")
	}
	b, err := p.str()
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (p *parser) intField(name string) (int64, error) {
	if p.i >= len(p.d) || (p.d[p.i] != '-' && !isDigit(p.d[p.i])) {
		return 0, eventErr("field_type", "event."+name+" must be an integer")
	}
	isInt, v, err := p.number()
	if err != nil {
		return 0, err
	}
	if !isInt {
		return 0, eventErr("field_type", "event."+name+" must be an integer literal without fraction or exponent")
	}
	return v, nil
}

func (p *parser) mentions(e *Event) error {
	if p.i >= len(p.d) || p.d[p.i] != '[' {
		return eventErr("field_type", "event.mentions must be an array")
	}
	if err := p.enter(); err != nil {
		return err
	}
	p.i++
	e.Mentions = []string{}
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == ']' {
		p.i++
		p.depth--
		return nil
	}
	for {
		p.ws()
		s, err := p.stringField("mentions entry")
		if err != nil {
			return err
		}
		e.Mentions = append(e.Mentions, s)
		p.ws()
		if p.i < len(p.d) {
			if c := p.d[p.i]; c == ',' {
				p.i++
				continue
			} else if c == ']' {
				p.i++
				break
			}
		}
		return p.unexpected(p.i, "',' or ']'")
	}
	p.depth--
	return nil
}

// Envelope member bits.
const (
	fEnvHash uint8 = 1 << iota
	fEnvEvent
	fEnvSignature
)

// ParseEnvelope strictly parses an envelope (Identity §3, §5): strict JSON,
// an object with exactly hash, event and signature, the closed event object
// and its field types and ranges, the actor as an Agent ID, hash and
// signature as canonical base64url of 32 and 64 bytes. It computes JCS(event),
// the digest and Raw. It does NOT compare the hash or verify the signature,
// and checks no protocol value, time window, nonce or room rule.
//
// Codes: invalid_event for malformed JSON, shape, field types and encodings;
// invalid_actor for a malformed actor.
func ParseEnvelope(data []byte) (*Envelope, error) {
	np := getNames()
	p := parser{d: data, canon: true, names: *np}
	defer func() { putNames(np, p.names) }()
	var pe parsedEvent
	var hash, sig string
	if err := p.envelope(&pe, &hash, &sig); err != nil {
		return nil, jsonErr(err)
	}
	if !validB64Len(hash, 32) {
		return nil, eventErr("field_encoding", "hash must be canonical base64url of 32 bytes")
	}
	if !validB64Len(sig, ed25519.SignatureSize) {
		return nil, eventErr("field_encoding", "signature must be canonical base64url of 64 bytes")
	}
	actor, err := ParseAgentID(pe.actor)
	if err != nil {
		return nil, err
	}
	pe.ev.Actor = actor

	canonEvent := data[pe.start:pe.end]
	payStart, payEnd := pe.payStart-pe.start, pe.payEnd-pe.start
	if !pe.canonical {
		canonEvent, err = jcs.Transform(canonEvent)
		if err != nil {
			return nil, adp.Errorf(adp.CodeInternal, "jcs of a checked event failed: %v", err)
		}
		// Re-parse the canonical bytes to find the canonical payload span.
		q := parser{d: canonEvent, canon: true}
		var qe parsedEvent
		if err := q.eventObject(&qe); err != nil || q.i != len(canonEvent) {
			return nil, adp.Errorf(adp.CodeInternal, "jcs output of an event is not canonical")
		}
		payStart, payEnd = qe.payStart, qe.payEnd
	}

	const (
		pre  = `{"event":`
		mid1 = `,"hash":"`
		mid2 = `","signature":"`
		post = `"}`
	)
	raw := make([]byte, 0, len(pre)+len(canonEvent)+len(mid1)+len(hash)+len(mid2)+len(sig)+len(post))
	raw = append(raw, pre...)
	raw = append(raw, canonEvent...)
	raw = append(raw, mid1...)
	raw = append(raw, hash...)
	raw = append(raw, mid2...)
	raw = append(raw, sig...)
	raw = append(raw, post...)

	ev := pe.ev
	ps, pend := len(pre)+payStart, len(pre)+payEnd
	ev.Payload = json.RawMessage(raw[ps:pend:pend])
	return &Envelope{
		Hash:      hash,
		Event:     ev,
		Signature: sig,
		Digest:    sha3.Sum256(raw[len(pre) : len(pre)+len(canonEvent)]),
		Raw:       raw,
	}, nil
}

// envelope parses the whole envelope text.
func (p *parser) envelope(pe *parsedEvent, hash, sig *string) error {
	p.ws()
	if p.i >= len(p.d) || p.d[p.i] != '{' {
		return eventErr("field_type", "envelope must be a JSON object")
	}
	if err := p.enter(); err != nil {
		return err
	}
	p.i++
	var seen uint8
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == '}' {
		p.i++
	} else {
		for {
			p.ws()
			if p.i >= len(p.d) || p.d[p.i] != '"' {
				return p.unexpected(p.i, "a member name")
			}
			off := p.i
			name, err := p.str()
			if err != nil {
				return err
			}
			var bit uint8
			switch string(name) {
			case "hash":
				bit = fEnvHash
			case "event":
				bit = fEnvEvent
			case "signature":
				bit = fEnvSignature
			default:
				return eventErr("unknown_field", "envelope has an unknown member "+quoteName(name))
			}
			if seen&bit != 0 {
				return p.failf(off, "duplicate member name %s", quoteName(name))
			}
			seen |= bit
			p.ws()
			if p.i >= len(p.d) || p.d[p.i] != ':' {
				return p.unexpected(p.i, "':'")
			}
			p.i++
			p.ws()
			switch bit {
			case fEnvHash, fEnvSignature:
				field := "hash"
				if bit == fEnvSignature {
					field = "signature"
				}
				if p.i >= len(p.d) || p.d[p.i] != '"' {
					return eventErr("field_type", field+" must be a string")
				}
				b, err := p.str()
				if err != nil {
					return err
				}
				if bit == fEnvHash {
					*hash = string(b)
				} else {
					*sig = string(b)
				}
			case fEnvEvent:
				if err := p.eventObject(pe); err != nil {
					return err
				}
			}
			p.ws()
			if p.i < len(p.d) {
				if c := p.d[p.i]; c == ',' {
					p.i++
					continue
				} else if c == '}' {
					p.i++
					break
				}
			}
			return p.unexpected(p.i, "',' or '}'")
		}
	}
	p.depth--
	if err := p.end(); err != nil {
		return err
	}
	for _, m := range []struct {
		bit  uint8
		name string
	}{{fEnvHash, "hash"}, {fEnvEvent, "event"}, {fEnvSignature, "signature"}} {
		if seen&m.bit == 0 {
			return eventErr("missing_field", "envelope."+m.name+" is missing")
		}
	}
	return nil
}

// Verify checks that the hash field equals the recomputed digest
// (invalid_event_hash) and that the signature verifies under the actor key
// with VerifyStrict (invalid_signature). It does not check the protocol
// value, time window, nonce or room rules.
func (e *Envelope) Verify() error {
	var hb [32]byte
	h, ok := appendB64(hb[:0], e.Hash)
	if !ok || len(h) != 32 || [32]byte(h) != e.Digest {
		return adp.Errorf(adp.CodeInvalidEventHash, "event hash does not match the event")
	}
	var sb [64]byte
	s, ok := appendB64(sb[:0], e.Signature)
	pub := e.Event.Actor.PublicKey()
	if !ok || pub == nil || !VerifyStrict(pub, e.Digest[:], s) {
		return adp.Errorf(adp.CodeInvalidSignature, "signature does not verify under the actor key")
	}
	return nil
}

// MarshalJSON returns a copy of Raw, or null for an envelope without Raw.
func (e *Envelope) MarshalJSON() ([]byte, error) {
	if e.Raw == nil {
		return []byte("null"), nil
	}
	return append([]byte(nil), e.Raw...), nil
}

// UnmarshalJSON replaces e with ParseEnvelope(data). Like ParseEnvelope it
// does not verify the hash or signature.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	env, err := ParseEnvelope(data)
	if err != nil {
		return err
	}
	*e = *env
	return nil
}

// OpenEnvelope is ParseEnvelope followed by Verify.
func OpenEnvelope(data []byte) (*Envelope, error) {
	env, err := ParseEnvelope(data)
	if err != nil {
		return nil, err
	}
	if err := env.Verify(); err != nil {
		return nil, err
	}
	return env, nil
}

// Sign computes the digest of ev, signs it with priv and returns the parsed
// envelope with Raw filled. It checks field ranges and encodings, that the
// payload is strict JSON and that ev.Actor is priv's Agent ID
// (invalid_actor); it checks no protocol, time, nonce or room rule.
func Sign(priv ed25519.PrivateKey, ev Event) (*Envelope, error) {
	priv, err := normalizeKey(priv)
	if err != nil {
		return nil, err
	}
	if AgentIDFromKey(priv.Public().(ed25519.PublicKey)) != ev.Actor {
		return nil, adp.Reason(adp.CodeInvalidActor, "key_mismatch", "event actor is not the signing key's agent id")
	}
	canon, err := ev.appendCanonical(nil)
	if err != nil {
		return nil, err
	}
	digest := sha3.Sum256(canon)
	sig := ed25519.Sign(priv, digest[:])
	raw := make([]byte, 0, len(canon)+160)
	raw = append(raw, `{"event":`...)
	raw = append(raw, canon...)
	raw = append(raw, `,"hash":"`...)
	raw = append(raw, EncodeB64(digest[:])...)
	raw = append(raw, `","signature":"`...)
	raw = append(raw, EncodeB64(sig)...)
	raw = append(raw, `"}`...)
	return ParseEnvelope(raw)
}
