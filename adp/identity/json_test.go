package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

func TestCheckJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	var wide, wideDup strings.Builder
	wide.WriteString("{")
	wideDup.WriteString("{")
	for i := 0; i < 40; i++ {
		if i > 0 {
			wide.WriteString(",")
			wideDup.WriteString(",")
		}
		k := fmt.Sprintf(`"k%d":1`, i)
		wide.WriteString(k)
		wideDup.WriteString(k)
	}
	wide.WriteString("}")
	wideDup.WriteString(`,"\u006b7":2}`)

	cases := []struct {
		name string
		text string
		ok   bool
	}{
		{"scalar", "1", true},
		{"ws around", " \t\r\n{ \"a\" : [ 1 , 2 ] }\n", true},
		{"string top", `"x"`, true},
		{"literals", `[true,false,null]`, true},
		{"empty containers", `{"a":{},"b":[]}`, true},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00e9\u2028"`, true},
		{"surrogate pair", `"\ud83d\ude00"`, true},
		{"uppercase hex", `"\u00E9"`, true},
		{"raw DEL and U+2028", "\"\x7f\u2028\"", true},
		{"safe max", "9007199254740991", true},
		{"safe min", "-9007199254740991", true},
		{"minus zero", "-0", true},
		{"fraction", "1.5", true},
		{"exponent", "1E+2", true},
		{"integral fraction in range", "9007199254740991.0", true},
		{"underflow to zero", "1e-400", true},
		{"small float", "-2.5e-300", true},
		{"depth 128 arrays", deep(128), true},
		{"depth 128 objects", deepObj(128), true},
		{"wide object", wide.String(), true},

		{"empty", "", false},
		{"only ws", "  ", false},
		{"depth 129 arrays", deep(129), false},
		{"depth 129 objects", deepObj(129), false},
		{"deep 100000", deep(100000), false},
		{"invalid utf8 byte", "\"\xff\"", false},
		{"overlong utf8", "\"\xc0\xaf\"", false},
		{"utf8 encoded surrogate", "\"\xed\xa0\x80\"", false},
		{"truncated utf8", "\"\xe2\x82\"", false},
		{"utf8 outside string", "[1,\xc3\xa9]", false},
		{"bom", "\xef\xbb\xbf{}", false},
		{"lone high", `"\ud800"`, false},
		{"lone low", `"\udc00"`, false},
		{"high then ascii", `"\ud800\u0041"`, false},
		{"high then char", `"\ud800x"`, false},
		{"high then high", `"\ud800\ud800"`, false},
		{"high at end", `"\ud83d`, false},
		{"low then high", `"\ude00\ud83d"`, false},
		{"dup name", `{"a":1,"a":2}`, false},
		{"dup escaped name", `{"a":1,"\u0061":2}`, false},
		{"dup nested", `{"x":[{"b":1,"b":1}]}`, false},
		{"dup in wide object", wideDup.String(), false},
		{"dup pair-escaped", `{"😀":1,"\ud83d\ude00":2}`, false},
		{"leading zero", "01", false},
		{"leading zero neg", "-01", false},
		{"double zero", "[00]", false},
		{"trailing comma array", "[1,]", false},
		{"trailing comma object", `{"a":1,}`, false},
		{"missing value", `{"a":}`, false},
		{"missing colon", `{"a" 1}`, false},
		{"unquoted name", `{a:1}`, false},
		{"single quotes", `['a']`, false},
		{"NaN", "NaN", false},
		{"Infinity", "[Infinity]", false},
		{"neg Infinity", "-Infinity", false},
		{"1e400", "1e400", false},
		{"-1e400", "-1e400", false},
		{"1e308 integral", "1e308", false},
		{"2^53 float", "9007199254740992.0", false},
		{"2^53", "9007199254740992", false},
		{"-2^53", "-9007199254740992", false},
		{"long int", "100000000000000000000", false},
		{"plus", "+1", false},
		{"dot first", ".5", false},
		{"dot last", "1.", false},
		{"bare e", "1e", false},
		{"e sign only", "1e+", false},
		{"hex", "0x10", false},
		{"control char", "\"a\x01b\"", false},
		{"raw tab", "\"a\tb\"", false},
		{"raw newline", "\"a\nb\"", false},
		{"nul", "\"\x00\"", false},
		{"bad escape", `"\x"`, false},
		{"bad escape quote", `"\'"`, false},
		{"short u", `"\u12"`, false},
		{"bad u hex", `"\u12g4"`, false},
		{"unterminated", `"abc`, false},
		{"unterminated escape", `"\`, false},
		{"trailing garbage", "{}x", false},
		{"two values", "{} {}", false},
		{"partial literal", "tru", false},
		{"bad literal", "nulll", false},
		{"unclosed array", "[1", false},
		{"unclosed object", `{"a":1`, false},
		{"comment", "[1]//", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckJSON([]byte(c.text))
			if c.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !c.ok {
				var je *JSONError
				if !errors.As(err, &je) {
					t.Fatalf("accepted or wrong error type: %v", err)
				}
				if je.Offset < 0 || je.Offset > len(c.text) {
					t.Fatalf("offset %d out of range", je.Offset)
				}
			}
			_, perr := ParseJSON([]byte(c.text))
			if (perr == nil) != (err == nil) {
				t.Fatalf("ParseJSON disagrees: %v vs %v", perr, err)
			}
			if err == nil && !json.Valid([]byte(c.text)) {
				t.Fatal("accepted text encoding/json calls invalid")
			}
		})
	}
}

func TestJSONErrorOffset(t *testing.T) {
	err := CheckJSON([]byte(`{"a":1,"a":2}`))
	var je *JSONError
	if !errors.As(err, &je) || je.Offset != 7 || !strings.Contains(je.Error(), "byte 7") {
		t.Fatalf("got %v", err)
	}
}

func TestParseJSONTree(t *testing.T) {
	v, err := ParseJSON([]byte(`{"s":"a\u00e9\ud83d\ude00","n":-12,"f":1.5e3,"b":[true,false,null],"o":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["s"] != "aé😀" || m["n"] != json.Number("-12") || m["f"] != json.Number("1.5e3") {
		t.Fatalf("got %#v", m)
	}
	b := m["b"].([]any)
	if len(b) != 3 || b[0] != true || b[1] != false || b[2] != nil {
		t.Fatalf("got %#v", b)
	}
	if o, ok := m["o"].(map[string]any); !ok || len(o) != 0 {
		t.Fatalf("got %#v", m["o"])
	}
	if a, err := ParseJSON([]byte(`[]`)); err != nil || a == nil {
		t.Fatalf("empty array: %#v %v", a, err)
	}
}

func TestCanonicalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"<>&` + "\u2028\u2029" + `"`, `"<>&` + "\u2028\u2029" + `"`},
		{`"\u003c\u2028\/"`, "\"<\u2028/\""},
		{`"\u001F\u0007\b\u0009"`, `"\u001f\u0007\b\t"`},
		{`"\u007f"`, "\"\x7f\""},
		{`{"b":1, "a":[1.0, 1e2, -0, 1.5e-7, 1e-7, 0.000001, 123456789.125]}`, `{"a":[1,100,0,1.5e-7,1e-7,0.000001,123456789.125],"b":1}`},
		{`{"` + "\ue000" + `":1,"😀":2,"z":3,"é":4}`, `{"z":3,"é":4,"😀":2,"` + "\ue000" + `":1}`},
		{` 1 `, `1`},
		{`{"a":{"d":1,"c":2}}`, `{"a":{"c":2,"d":1}}`},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Canonicalize(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
		ref, err := jcs.Transform([]byte(c.in))
		if err != nil || !bytes.Equal(ref, got) {
			t.Errorf("jcs.Transform(%s) = %s, %v", c.in, ref, err)
		}
		again, err := Canonicalize(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Errorf("Canonicalize not idempotent on %s: %s %v", got, again, err)
		}
	}
	// Input that is already canonical is copied, not aliased.
	in := []byte(`{"a":1}`)
	out, _ := Canonicalize(in)
	out[0] = 'x'
	if in[0] != '{' {
		t.Fatal("Canonicalize aliases its input")
	}
}

func TestCanonicalDetection(t *testing.T) {
	for _, s := range []string{
		`{"a":1}`, `[1,2]`, `1.5`, `1e-7`, `1.5e-300`, `-0.000001`, `"\u0000"`, `"\n"`, `{"é":1,"😀":2,"` + "\ue000" + `":3}`, `{"":1,"a":2}`,
	} {
		if c, err := checkJSON([]byte(s)); err != nil || !c {
			t.Errorf("%s: canonical=%v err=%v", s, c, err)
		}
	}
	for _, s := range []string{
		`{"b":1,"a":2}`, `[1, 2]`, `"\u000a"`, `"\u001F"`, `"\/"`, `"\u0041"`, `-0`, `1.0`, `1e2`, `1E-7`, `1e-07`, `0.10`, `1.5E-300`,
		`{"` + "\ue000" + `":1,"😀":2}`, `{"ab":1,"a":2}`, `"\ud83d\ude00"`, ` 1`,
	} {
		if c, err := checkJSON([]byte(s)); err != nil || c {
			t.Errorf("%s: canonical=%v err=%v", s, c, err)
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	order := []string{"", "A", "B", "a", "aa", "b", "\u007f", "é", "\u2028", "！"[:0] + "\ud7ff", "😀", "\U0001F601", "\ue000", "！", "\uffff"}
	for i := range order {
		for j := range order {
			got := compareUTF16([]byte(order[i]), []byte(order[j]))
			if (i < j && got >= 0) || (i > j && got <= 0) || (i == j && got != 0) {
				t.Errorf("compare(%q,%q) = %d", order[i], order[j], got)
			}
		}
	}
}
