package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecode(t *testing.T) {
	for _, c := range []struct {
		name, in string
		kind     Kind
		keys     string
	}{
		{"empty object", `{}`, 0, ""},
		{"whitespace around", " \n{ \"a\" : 1 , \"b\":[1,{\"c\":\"}\"}] }\t", 0, "a,b"},
		{"values of every kind", `{"s":"x\"}","n":-1.5e3,"t":true,"f":false,"z":null,"o":{},"a":[]}`, 0, "s,n,t,f,z,o,a"},
		{"escaped name", `{"a\u0062":1}`, 0, "ab"},
		{"duplicate", `{"a":1,"a":2}`, Duplicate, ""},
		{"duplicate after unescaping", `{"ab":1,"a\u0062":2}`, Duplicate, ""},
		{"nested duplicates are the caller's", `{"a":{"b":1,"b":2}}`, 0, "a"},
		{"array", `[1]`, NotObject, ""},
		{"string", `"x"`, NotObject, ""},
		{"empty", ``, Syntax, ""},
		{"truncated", `{"a":`, Syntax, ""},
		{"trailing data", `{"a":1}{}`, Syntax, ""},
		{"trailing comma", `{"a":1,}`, Syntax, ""},
		{"bad UTF-8", "{\"a\":\"\xff\"}", Syntax, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := Decode([]byte(c.in))
			if c.kind != 0 {
				var e *Error
				if !errors.As(err, &e) || e.Kind != c.kind {
					t.Fatalf("Decode(%q) = %v, want kind %d", c.in, err, c.kind)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%q): %v", c.in, err)
			}
			var keys []string
			for _, m := range o.Members {
				keys = append(keys, m.Key)
			}
			if got := strings.Join(keys, ","); got != c.keys {
				t.Fatalf("keys %q, want %q", got, c.keys)
			}
		})
	}
}

func TestValuesAreExact(t *testing.T) {
	o, err := Decode([]byte(`{"a" : [1, 2] ,"b":"x\\\"","c":{"d":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": `[1, 2]`, "b": `"x\\\""`, "c": `{"d":null}`} {
		if v, ok := o.Get(k); !ok || string(v) != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	if o.Has("d") {
		t.Error("nested member reported at the top level")
	}
}

func TestClosed(t *testing.T) {
	if _, err := Closed([]byte(`{"a":1,"b":2}`), "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := Closed([]byte(`{"a":1,"B":2}`), "a", "b"); !errors.As(err, &e) || e.Kind != Unknown || e.Key != "B" {
		t.Fatalf("case-different name: %v", err)
	}
	if _, err := Closed([]byte(`{"a":1}`)); !errors.As(err, &e) || e.Kind != Unknown {
		t.Fatalf("closed object with no allowed members accepted a member: %v", err)
	}
	var v struct{ A int }
	if err := Unmarshal([]byte(`{"A":1,"a":2}`), &v, "a"); err == nil {
		t.Fatal("Unmarshal let encoding/json match a name case-insensitively")
	}
	if err := Unmarshal([]byte(`{"a":2}`), &v, "a"); err != nil || v.A != 2 {
		t.Fatalf("Unmarshal = %v, %+v", err, v)
	}
}

// TestManyMembersCostLinear bounds a hostile object's cost: 100k distinct
// members must not take quadratic time (a linear scan per name would be
// 5e9 comparisons), and a duplicate at the end is still found.
func TestManyMembersCostLinear(t *testing.T) {
	const n = 100_000
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"k7":0}`)
	allocs := testing.AllocsPerRun(1, func() {
		var e *Error
		if _, err := Decode(b.Bytes()); !errors.As(err, &e) || e.Kind != Duplicate || e.Key != "k7" {
			t.Fatalf("duplicate at the end: %v", err)
		}
	})
	if allocs > 4*n {
		t.Fatalf("%v allocations for %d members", allocs, n)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"]"]},"c":"\u0041"}`, `{"a":1,"a":2}`, `[]`, `{"a":`, ` {"x" : null } `,
		` [ 1 , "a,]" , {"b":[2,3]} , null ] `, `[[]]`, `"[1]"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// On valid JSON, ClosedStrict (which skips the validity scans)
		// answers exactly what Closed does.
		if utf8.Valid(b) && json.Valid(b) {
			o1, e1 := Closed(b, "a", "x")
			o2, e2 := ClosedStrict(b, "a", "x")
			if !reflect.DeepEqual(o1, o2) || !reflect.DeepEqual(e1, e2) {
				t.Fatalf("%q: Closed %v %v, ClosedStrict %v %v", b, o1, e1, o2, e2)
			}
		}
		// On valid JSON, Elements splits an array as encoding/json does.
		if utf8.Valid(b) && json.Valid(b) {
			els, err := Elements(b)
			var want []json.RawMessage
			if json.Unmarshal(b, &want) != nil {
				if err == nil {
					t.Fatalf("%q is no array, Elements gave %q", b, els)
				}
			} else if err != nil || len(els) != len(want) {
				t.Fatalf("%q: Elements %q %v, encoding/json %q", b, els, err, want)
			} else {
				for i := range els {
					if !bytes.Equal(els[i], want[i]) {
						t.Fatalf("%q: element %d is %q, encoding/json %q", b, i, els[i], want[i])
					}
				}
			}
		}
		o, err := Decode(b)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		// Accepted implies: encoding/json reads the same object, with the
		// same members and values.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("accepted %q, encoding/json: %v", b, err)
		}
		if len(m) != len(o.Members) {
			t.Fatalf("%q: %d members, encoding/json sees %d", b, len(o.Members), len(m))
		}
		for _, mem := range o.Members {
			if !json.Valid(mem.Value) {
				t.Fatalf("%q: member %q value %q is not JSON", b, mem.Key, mem.Value)
			}
			var x, y any
			_ = json.Unmarshal(mem.Value, &x)
			_ = json.Unmarshal(m[mem.Key], &y)
			if fmt.Sprint(x) != fmt.Sprint(y) {
				t.Fatalf("%q: member %q = %q, encoding/json %q", b, mem.Key, mem.Value, m[mem.Key])
			}
			// String answers as encoding/json does.
			var want string
			wantOK := json.Unmarshal(mem.Value, &want) == nil && mem.Value[0] == '"'
			if got, ok := String(mem.Value); ok != wantOK || got != want {
				t.Fatalf("%q: String(%q) = %q, %v; encoding/json %q, %v", b, mem.Value, got, ok, want, wantOK)
			}
		}
	})
}

func TestString(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{`"plain"`, "plain", true},
		{`""`, "", true},
		{`"a\"b"`, `a"b`, true},
		{`"\u0064\n"`, "d\n", true},
		{`"é ✓"`, "é ✓", true},
		{`1`, "", false},
		{`null`, "", false},
		{`["x"]`, "", false},
		{`"`, "", false},
	} {
		if got, ok := String(json.RawMessage(c.in)); got != c.want || ok != c.ok {
			t.Errorf("String(%s) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

var payload = []byte(`{"content":"a message of ordinary length, with a few words in it","content_type":"text/plain","extra":{"k":"v"},"references":["QmFzZTY0dXJsLXByZXZpb3VzLXJlY29yZC1oYXNoMDA"]}`)

func BenchmarkClosed(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Closed(payload, "content_type", "content", "references", "extra"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalMap is what room payloads were decoded with before.
func BenchmarkUnmarshalMap(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// TestClosedAllocatesOnce bounds what splitting a closed object costs: one
// allocation for the object and its first eight members, none per name
// (an allowed name without escapes is the allowed string itself).
func TestClosedAllocatesOnce(t *testing.T) {
	o, err := ClosedStrict(payload, "content_type", "content", "references", "extra")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := o.Get("content_type"); string(v) != `"text/plain"` {
		t.Fatalf("content_type = %s", v)
	}
	if n := testing.AllocsPerRun(100, func() {
		_, _ = ClosedStrict(payload, "content_type", "content", "references", "extra")
	}); n != 1 {
		t.Fatalf("ClosedStrict allocates %v times per object, want 1", n)
	}
}
