package identity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxSafeInt is 2^53-1, the largest integer every JSON implementation holds
// exactly (I-JSON).
const MaxSafeInt = 1<<53 - 1

// MaxJSONDepth is the deepest nesting of arrays and objects CheckJSON accepts.
const MaxJSONDepth = 128

// dupMapThreshold is the member count above which duplicate detection switches
// from a linear scan to a map.
const dupMapThreshold = 16

// JSONError reports the first strict-JSON problem and its byte offset.
type JSONError struct {
	Offset int
	Msg    string
}

func (e *JSONError) Error() string {
	return "json: " + e.Msg + " at byte " + strconv.Itoa(e.Offset)
}

// CheckJSON reports whether data is one strict I-JSON text (Identity §3):
// valid UTF-8, RFC 8259 syntax, no duplicate member names at any depth
// (compared after unescaping), no unpaired surrogate escapes, integer literals
// within ±(2^53−1), numbers with a fraction or exponent finite and, when
// integral, within ±(2^53−1), nesting at most MaxJSONDepth, nothing but
// whitespace after the value. It does not reject Unicode noncharacters.
func CheckJSON(data []byte) error {
	_, err := checkJSON(data)
	return err
}

// checkJSON is CheckJSON that also reports whether data is already in JCS
// canonical form.
func checkJSON(data []byte) (canonical bool, err error) {
	np := getNames()
	p := parser{d: data, canon: true, names: *np}
	defer func() { putNames(np, p.names) }()
	if _, err := p.document(); err != nil {
		return false, err
	}
	return p.canon, nil
}

// namesPool holds parsers' member-name stacks: a checked document or
// envelope otherwise allocates one (a parser's fields all leak to the heap
// in escape analysis, so a stack array does not stay on the stack).
var namesPool = sync.Pool{New: func() any { s := make([][]byte, 0, 16); return &s }}

func getNames() *[][]byte { return namesPool.Get().(*[][]byte) }

// putNames returns a stack (s, as the parser left it, in the holder np
// it came in), cleared: its entries point into the parsed document, which
// the pool must not keep alive.
func putNames(np *[][]byte, s [][]byte) {
	if cap(s) > 256 {
		return
	}
	*np = cleared(s)
	namesPool.Put(np)
}

// cleared empties s and zeroes its backing array.
func cleared(s [][]byte) [][]byte {
	s = s[:cap(s)]
	clear(s)
	return s[:0]
}

// ParseJSON is CheckJSON that also returns the value: map[string]any, []any,
// string, json.Number (the literal text), bool or nil.
func ParseJSON(data []byte) (any, error) {
	p := parser{d: data, build: true}
	return p.document()
}

// Canonicalize checks data with CheckJSON and returns its JCS (RFC 8785) form
// in a new slice. Errors are *JSONError.
func Canonicalize(data []byte) ([]byte, error) {
	out, err := canonicalize(data)
	if err != nil {
		return nil, err
	}
	if len(out) == len(data) && len(data) > 0 && &out[0] == &data[0] {
		return bytes.Clone(data), nil
	}
	return out, nil
}

// canonicalize is Canonicalize that returns data itself when it is already
// canonical.
func canonicalize(data []byte) ([]byte, error) {
	canon, err := checkJSON(data)
	if err != nil {
		return nil, err
	}
	if canon {
		return data, nil
	}
	out, err := jcs.Transform(data)
	if err != nil {
		// Unreachable for input that passed checkJSON.
		return nil, &JSONError{Offset: 0, Msg: "jcs: " + err.Error()}
	}
	return out, nil
}

// parser is a single-pass strict I-JSON parser. It optionally builds the value
// tree and tracks whether the text is already in JCS canonical form.
type parser struct {
	d     []byte
	i     int
	depth int
	canon bool     // every token so far is in JCS form
	build bool     // build the value tree
	names [][]byte // member names of the open objects (unescaped)
}

func (p *parser) fail(off int, msg string) error { return &JSONError{Offset: off, Msg: msg} }

func (p *parser) failf(off int, format string, args ...any) error {
	return &JSONError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// document parses one value followed only by whitespace.
func (p *parser) document() (any, error) {
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	return v, nil
}

// end requires nothing but whitespace after the current position.
func (p *parser) end() error {
	p.ws()
	if p.i != len(p.d) {
		return p.fail(p.i, "trailing data after the JSON value")
	}
	return nil
}

func (p *parser) ws() {
	for p.i < len(p.d) {
		switch p.d[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
			p.canon = false
		default:
			return
		}
	}
}

// describe renders the byte at off for an error message.
func (p *parser) unexpected(off int, want string) error {
	if off >= len(p.d) {
		return p.fail(off, "unexpected end of input, expected "+want)
	}
	c := p.d[off]
	if c >= 0x20 && c < 0x7f {
		return p.failf(off, "unexpected character %q, expected %s", c, want)
	}
	return p.failf(off, "unexpected byte 0x%02x, expected %s", c, want)
}

// value parses one value after optional whitespace.
func (p *parser) value() (any, error) {
	p.ws()
	if p.i >= len(p.d) {
		return nil, p.unexpected(p.i, "a value")
	}
	switch c := p.d[p.i]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		s, err := p.str()
		if err != nil || !p.build {
			return nil, err
		}
		return string(s), nil
	case 't':
		return true, p.lit("true")
	case 'f':
		return false, p.lit("false")
	case 'n':
		return nil, p.lit("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := p.i
			if _, _, err := p.number(); err != nil || !p.build {
				return nil, err
			}
			return json.Number(p.d[start:p.i]), nil
		}
		return nil, p.unexpected(p.i, "a value")
	}
}

func (p *parser) lit(s string) error {
	if len(p.d)-p.i < len(s) || string(p.d[p.i:p.i+len(s)]) != s {
		return p.fail(p.i, "invalid literal")
	}
	p.i += len(s)
	return nil
}

// enter and leave bound the nesting depth.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxJSONDepth {
		return p.failf(p.i, "nesting deeper than %d", MaxJSONDepth)
	}
	return nil
}

func (p *parser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // '{'
	var m map[string]any
	if p.build {
		m = map[string]any{}
	}
	base := len(p.names)
	var set map[string]struct{}
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == '}' {
		p.i++
		p.depth--
		if p.build {
			return m, nil
		}
		return nil, nil
	}
	for {
		p.ws()
		if p.i >= len(p.d) || p.d[p.i] != '"' {
			return nil, p.unexpected(p.i, "a member name")
		}
		off := p.i
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.addName(base, &set, name, off); err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.d) || p.d[p.i] != ':' {
			return nil, p.unexpected(p.i, "':'")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			m[string(name)] = v
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
		return nil, p.unexpected(p.i, "',' or '}'")
	}
	p.names = p.names[:base]
	p.depth--
	if p.build {
		return m, nil
	}
	return nil, nil
}

// addName records a member name of the object whose names start at base,
// rejecting duplicates and clearing canon when names are out of JCS order.
func (p *parser) addName(base int, set *map[string]struct{}, name []byte, off int) error {
	names := p.names[base:]
	if *set != nil {
		if _, dup := (*set)[string(name)]; dup {
			return p.failf(off, "duplicate member name %s", quoteName(name))
		}
		(*set)[string(name)] = struct{}{}
	} else {
		for _, q := range names {
			if bytes.Equal(q, name) {
				return p.failf(off, "duplicate member name %s", quoteName(name))
			}
		}
		if len(names)+1 > dupMapThreshold {
			*set = make(map[string]struct{}, 2*dupMapThreshold)
			for _, q := range names {
				(*set)[string(q)] = struct{}{}
			}
			(*set)[string(name)] = struct{}{}
		}
	}
	if p.canon && len(names) > 0 && compareUTF16(names[len(names)-1], name) > 0 {
		p.canon = false
	}
	p.names = append(p.names, name)
	return nil
}

func (p *parser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // '['
	var a []any
	if p.build {
		a = []any{}
	}
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == ']' {
		p.i++
		p.depth--
		if p.build {
			return a, nil
		}
		return nil, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			a = append(a, v)
		}
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
		return nil, p.unexpected(p.i, "',' or ']'")
	}
	p.depth--
	if p.build {
		return a, nil
	}
	return nil, nil
}

// str parses a string at p.i (the opening quote) and returns its unescaped
// UTF-8 bytes. The result aliases p.d when the string has no escapes.
func (p *parser) str() ([]byte, error) {
	d := p.d
	start := p.i + 1
	for i := start; i < len(d); i++ {
		c := d[i]
		if c == '"' {
			p.i = i + 1
			return d[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return p.strSlow(start, i)
		}
	}
	return nil, p.fail(p.i, "unterminated string")
}

func (p *parser) strSlow(start, i int) ([]byte, error) {
	d := p.d
	var buf []byte // nil until the first escape
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			p.i = i + 1
			if buf == nil {
				return d[start:i], nil
			}
			return buf, nil
		case c < 0x20:
			return nil, p.failf(i, "control character 0x%02x in string", c)
		case c < 0x80:
			if c != '\\' {
				if buf != nil {
					buf = append(buf, c)
				}
				i++
				continue
			}
			if buf == nil {
				buf = make([]byte, i-start, i-start+16)
				copy(buf, d[start:i])
			}
			n, err := p.escape(i, &buf)
			if err != nil {
				return nil, err
			}
			i += n
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, p.fail(i, "invalid UTF-8 in string")
			}
			if buf != nil {
				buf = append(buf, d[i:i+size]...)
			}
			i += size
		}
	}
	return nil, p.fail(start-1, "unterminated string")
}

// escape decodes the escape sequence at d[i] (a backslash) onto buf and
// returns its length in the input.
func (p *parser) escape(i int, buf *[]byte) (int, error) {
	d := p.d
	if i+1 >= len(d) {
		return 0, p.fail(i, "unterminated escape")
	}
	switch c := d[i+1]; c {
	case '"', '\\':
		*buf = append(*buf, c)
	case '/':
		*buf = append(*buf, '/')
		p.canon = false
	case 'b':
		*buf = append(*buf, '\b')
	case 'f':
		*buf = append(*buf, '\f')
	case 'n':
		*buf = append(*buf, '\n')
	case 'r':
		*buf = append(*buf, '\r')
	case 't':
		*buf = append(*buf, '\t')
	case 'u':
		u, lower, ok := hex4(d, i+2)
		if !ok {
			return 0, p.fail(i, "invalid \\u escape")
		}
		switch {
		case u >= 0xdc00 && u <= 0xdfff:
			return 0, p.fail(i, "unpaired low surrogate escape")
		case u >= 0xd800 && u <= 0xdbff:
			if i+11 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' {
				lo, _, ok := hex4(d, i+8)
				if ok && lo >= 0xdc00 && lo <= 0xdfff {
					r := 0x10000 + (rune(u)-0xd800)<<10 + (rune(lo) - 0xdc00)
					*buf = utf8.AppendRune(*buf, r)
					p.canon = false
					return 12, nil
				}
			}
			return 0, p.fail(i, "unpaired high surrogate escape")
		}
		*buf = utf8.AppendRune(*buf, rune(u))
		// JCS writes \u only for control characters without a short form,
		// with lowercase hex.
		if u >= 0x20 || u == '\b' || u == '\t' || u == '\n' || u == '\f' || u == '\r' || !lower {
			p.canon = false
		}
		return 6, nil
	default:
		return 0, p.failf(i, "invalid escape character %q", rune(c))
	}
	return 2, nil
}

// hex4 reads four hex digits at d[i:] and reports whether none was uppercase.
func hex4(d []byte, i int) (v uint16, lower, ok bool) {
	if i+4 > len(d) {
		return 0, false, false
	}
	lower = true
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint16(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint16(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint16(c-'A'+10)
			lower = false
		default:
			return 0, false, false
		}
	}
	return v, lower, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses a number at p.i. For an integer literal (no fraction or
// exponent) it returns isInt and its value.
func (p *parser) number() (isInt bool, v int64, err error) {
	d := p.d
	start := p.i
	i := start
	neg := d[i] == '-'
	if neg {
		i++
	}
	if i >= len(d) || !isDigit(d[i]) {
		return false, 0, p.fail(start, "invalid number")
	}
	if d[i] == '0' {
		i++
		if i < len(d) && isDigit(d[i]) {
			return false, 0, p.fail(start, "leading zero in number")
		}
	} else {
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	intEnd := i
	isInt = true
	if i < len(d) && d[i] == '.' {
		isInt = false
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return false, 0, p.fail(i, "digit expected after decimal point")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		isInt = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return false, 0, p.fail(i, "digit expected in exponent")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	p.i = i
	if isInt {
		digits := d[start:intEnd]
		if neg {
			digits = digits[1:]
		}
		if len(digits) > 16 {
			return false, 0, p.fail(start, "integer outside ±(2^53-1)")
		}
		for _, c := range digits {
			v = v*10 + int64(c-'0')
		}
		if v > MaxSafeInt {
			return false, 0, p.fail(start, "integer outside ±(2^53-1)")
		}
		if neg {
			if v == 0 {
				p.canon = false // "-0"
			}
			v = -v
		}
		return true, v, nil
	}
	lit := string(d[start:i])
	f, perr := strconv.ParseFloat(lit, 64)
	if perr != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return false, 0, p.fail(start, "number out of the float64 range")
	}
	if f == math.Trunc(f) && math.Abs(f) > MaxSafeInt {
		return false, 0, p.fail(start, "integral number outside ±(2^53-1)")
	}
	if p.canon {
		if s, err := jcs.NumberToJSON(f); err != nil || s != lit {
			p.canon = false
		}
	}
	return false, 0, nil
}

// quoteName quotes a member name for an error message, truncated so that
// hostile input cannot flood logs.
func quoteName(name []byte) string {
	const max = 64
	if len(name) > max {
		return strconv.Quote(string(name[:max])) + "..."
	}
	return strconv.Quote(string(name))
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// the JCS member order.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < 0x80 && b[0] < 0x80 {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			ha, la := utf16Units(ra)
			hb, lb := utf16Units(rb)
			if ha != hb {
				return int(ha) - int(hb)
			}
			return int(la) - int(lb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Units returns the UTF-16 code units of r (second is 0 for BMP runes).
func utf16Units(r rune) (uint16, uint16) {
	if r < 0x10000 {
		return uint16(r), 0
	}
	r -= 0x10000
	return uint16(0xd800 + r>>10), uint16(0xdc00 + r&0x3ff)
}

// appendJCSString appends s as a JCS string literal. It fails when s is not
// valid UTF-8.
func appendJCSString(buf []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return buf, false
	}
	buf = append(buf, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[last:i]...)
		last = i + 1
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\r':
			buf = append(buf, '\\', 'r')
		default:
			const hexd = "0123456789abcdef"
			buf = append(buf, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		}
	}
	buf = append(buf, s[last:]...)
	return append(buf, '"'), true
}
