package types

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/adpnode/adpnode/adp/jsonobj"
)

// member is one member of a JSON object, in document order.
type member = jsonobj.Member

// objectMembers splits raw, which must hold exactly one JSON object, into its
// members (jsonobj: duplicate member names and invalid UTF-8 are rejected).
func objectMembers(raw []byte, what string) ([]member, error) {
	o, err := jsonobj.Decode(raw)
	if err != nil {
		e := err.(*jsonobj.Error)
		switch e.Kind {
		case jsonobj.NotObject:
			return nil, invalid(ReasonNotObject, "", what+" "+e.Msg)
		case jsonobj.Duplicate:
			return nil, invalid(ReasonBadJSON, e.Key, what+" "+e.Msg)
		}
		return nil, invalid(ReasonBadJSON, "", what+" "+e.Msg)
	}
	return o.Members, nil
}

// jsonString decodes a JSON string value.
func jsonString(v json.RawMessage, field string) (string, error) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", invalid(ReasonBadField, field, field+" must be a string")
	}
	return s, nil
}

// jsonStrings decodes a JSON array of strings.
func jsonStrings(v json.RawMessage, field string) ([]string, error) {
	var raw []json.RawMessage
	if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &raw) != nil {
		return nil, invalid(ReasonBadField, field, field+" must be an array of strings")
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		s, err := jsonString(r, field)
		if err != nil {
			return nil, invalid(ReasonBadField, field, field+" must be an array of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// maxSafeInteger is the largest integer exactly representable by every JSON
// implementation (2^53 - 1).
const maxSafeInteger = 1<<53 - 1

// positiveInt decodes a JSON number that must be a positive safe integer. An
// integral value written with a fraction or exponent (2.0, 1e3) is accepted,
// as JSON Schema's "integer" does.
func positiveInt(v json.RawMessage, field string) (int64, error) {
	bad := invalid(ReasonBadField, field, field+" must be a positive integer")
	if len(v) == 0 || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		return 0, bad
	}
	var n json.Number
	if json.Unmarshal(v, &n) != nil {
		return 0, bad
	}
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		if i < 1 || i > maxSafeInteger {
			return 0, bad
		}
		return i, nil
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > maxSafeInteger {
		return 0, bad
	}
	return int64(f), nil
}

// encodeMembers renders members back as one JSON object, in order.
func encodeMembers(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Value)
	}
	b.WriteByte('}')
	return b.Bytes()
}
