// Package jsonobj is the kernel's one decoder of closed JSON objects: a
// record, an event payload, a type definition or pack, a piece of evidence.
// It splits exactly one JSON object into its members in document order and
// refuses what every caller refuses: invalid UTF-8, invalid JSON, anything
// but an object, trailing data, duplicate member names (compared after
// unescaping) and, when the caller names the allowed members, any other.
// Callers turn the *Error it returns into their ADP code and reason.
//
// Limits are the caller's: the size of raw is bounded before it gets here
// (body, payload and schema limits), and nesting is bounded by the strict
// I-JSON parser (identity.CheckJSON) for wire input and by encoding/json's
// own depth limit otherwise.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// mapThreshold is the member count above which duplicate detection uses a
// map instead of a linear scan, so a hostile object with many members costs
// linear time.
const mapThreshold = 16

// Kind classifies a decoding failure.
type Kind int

// Kinds of failure.
const (
	Syntax    Kind = iota + 1 // not valid UTF-8 JSON, or trailing data
	NotObject                 // valid JSON, but not an object
	Duplicate                 // a member name occurs twice
	Unknown                   // a member name the caller does not allow
	NotArray                  // valid JSON, but not an array (Elements)
)

// Error is a decoding failure. Key is the member concerned (Duplicate,
// Unknown), Msg says what is wrong without naming the object.
type Error struct {
	Kind Kind
	Key  string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Member is one member of an object. Value aliases the decoded input and
// has no surrounding whitespace.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Object is a decoded object: its members in document order.
type Object struct {
	Members []Member
}

// Get returns the value of member key.
func (o *Object) Get(key string) (json.RawMessage, bool) {
	for i := range o.Members {
		if o.Members[i].Key == key {
			return o.Members[i].Value, true
		}
	}
	return nil, false
}

// Has reports whether the object has member key.
func (o *Object) Has(key string) bool { _, ok := o.Get(key); return ok }

// Decode splits raw, which must hold exactly one JSON object (whitespace
// around it allowed), into its members. Values alias raw.
func Decode(raw []byte) (*Object, error) {
	if err := valid(raw); err != nil {
		return nil, err
	}
	return decode(raw, false, nil)
}

// Closed is Decode for a closed object: every member name must be one of
// allowed.
func Closed(raw []byte, allowed ...string) (*Object, error) {
	if err := valid(raw); err != nil {
		return nil, err
	}
	return decode(raw, true, allowed)
}

// ClosedStrict is Closed for raw that identity.CheckJSON accepted (strict
// I-JSON: valid UTF-8, valid JSON, one value), which it does not check
// again: a record is checked whole before it is split, and scanning it
// twice more cost a tenth of its parse beyond the signature.
func ClosedStrict(raw []byte, allowed ...string) (*Object, error) { return decode(raw, true, allowed) }

// String returns the text of v, a member value split out by Decode,
// Closed or ClosedStrict (so a whole, valid JSON value); ok is false if v
// is not a string. A string without a backslash is its own text between
// the quotes, so most need no decoding; one with escapes is decoded.
func String(v json.RawMessage) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func valid(raw []byte) error {
	if !utf8.Valid(raw) {
		return &Error{Kind: Syntax, Msg: "is not valid UTF-8"}
	}
	if !json.Valid(raw) {
		return &Error{Kind: Syntax, Msg: "is not valid JSON"}
	}
	return nil
}

// decode splits raw, which must be valid JSON.
func decode(raw []byte, closed bool, allowed []string) (*Object, error) {
	i := skipWS(raw, 0)
	if raw[i] != '{' {
		return nil, &Error{Kind: NotObject, Msg: "must be a JSON object"}
	}
	// raw is valid JSON from here on, so the scan below need not check
	// syntax: it only finds where each name and value begins and ends.
	// The object and room for its first members in one allocation.
	ob := &objectBuf{}
	o := &ob.o
	o.Members = ob.m[:0]
	var seen map[string]struct{} // member names, once there are many
	i = skipWS(raw, i+1)
	if raw[i] == '}' {
		return o, nil
	}
	for {
		end := skipString(raw, i)
		key, known := "", false
		if closed {
			// An allowed name written without escapes is that string: no
			// copy of it is made.
			key, known = allowedName(raw[i+1:end-1], allowed)
		}
		if !known {
			var err error
			if key, err = name(raw[i:end]); err != nil {
				return nil, err
			}
			if closed && !contains(allowed, key) {
				return nil, &Error{Kind: Unknown, Key: key, Msg: "has unknown member " + strconv.Quote(key)}
			}
		}
		if seen == nil && len(o.Members) >= mapThreshold {
			seen = make(map[string]struct{}, 2*len(o.Members))
			for _, m := range o.Members {
				seen[m.Key] = struct{}{}
			}
		}
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			_, dup = o.Get(key)
		}
		if dup {
			return nil, &Error{Kind: Duplicate, Key: key, Msg: "has a duplicate member " + strconv.Quote(key)}
		}
		i = skipWS(raw, end)
		i = skipWS(raw, i+1) // ':'
		vend := skipValue(raw, i)
		o.Members = append(o.Members, Member{Key: key, Value: raw[i:vend:vend]})
		i = skipWS(raw, vend)
		if raw[i] == '}' {
			return o, nil
		}
		i = skipWS(raw, i+1) // ','
	}
}

// objectBuf holds an Object and the first members' storage.
type objectBuf struct {
	o Object
	m [8]Member
}

// allowedName returns the allowed name equal to the raw text of a name
// (between its quotes), if the text has no escape.
func allowedName(text []byte, allowed []string) (string, bool) {
	for _, a := range allowed {
		if string(text) == a {
			return a, true
		}
	}
	return "", false
}

// Elements splits a JSON array into its elements' raw texts (sub-slices of
// raw, no copies). raw must be valid JSON (checked by the caller, as
// identity.CheckJSON does): the scan only finds where each element begins
// and ends. A value that is not an array is a NotArray error.
func Elements(raw []byte) ([]json.RawMessage, error) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, &Error{Kind: NotArray, Msg: "must be a JSON array"}
	}
	var out []json.RawMessage
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for i < len(raw) {
		end := skipValue(raw, i)
		out = append(out, raw[i:end:end])
		i = skipWS(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			break
		}
		i = skipWS(raw, i+1)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// name decodes a quoted member name.
func name(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", &Error{Kind: Syntax, Msg: "is not valid JSON"}
	}
	return s, nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// Unmarshal decodes a closed object into v with encoding/json, after Closed
// has checked its shape: exact (case-sensitive) member names from allowed,
// no duplicates, nothing after it.
func Unmarshal(raw []byte, v any, allowed ...string) error {
	if _, err := Closed(raw, allowed...); err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
