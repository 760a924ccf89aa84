package types

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// member is one member of a JSON object, in document order.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers splits raw, which must hold exactly one JSON object, into its
// members. Duplicate member names and invalid UTF-8 are rejected.
func objectMembers(raw []byte, what string) ([]member, error) {
	if !utf8.Valid(raw) {
		return nil, invalid(ReasonBadJSON, "", what+" is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, invalid(ReasonBadJSON, "", what+" is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalid(ReasonNotObject, "", what+" must be a JSON object")
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid(ReasonBadJSON, "", what+" is not valid JSON")
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, invalid(ReasonBadJSON, key, what+" has a duplicate member "+strconv.Quote(key))
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalid(ReasonBadJSON, key, what+" is not valid JSON")
		}
		out = append(out, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, invalid(ReasonBadJSON, "", what+" is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid(ReasonBadJSON, "", what+" has trailing data")
	}
	return out, nil
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

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
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}
