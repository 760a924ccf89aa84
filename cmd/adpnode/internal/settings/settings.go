// Package settings declares a command's settings once, as a table, and
// derives from it the command-line flags, the strict YAML reader, the
// ADPNODE_ environment variables, validation, the commented reference
// file and the settings table of the docs.
//
// Precedence for every setting: flag, then environment variable, then
// the configuration file, then the default. Errors name the setting by its
// YAML key, never a Go type.
package settings

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Kind is how a setting's value is written and read.
type Kind int

const (
	String   Kind = iota
	Int           // a whole number
	Bool          // true or false
	Duration      // a Go duration such as 30s or 1h
	Size          // bytes, or a number with KiB, MiB, GiB, KB, MB or GB
	List          // a YAML list; repeatable flag; comma-separated in the environment
	Group         // a YAML mapping that holds other settings (Key and Help only)
)

var kindNames = [...]string{"string", "integer", "boolean", "duration", "size", "list", "group"}

func (k Kind) String() string { return kindNames[k] }

// Setting is the one declaration of a setting.
type Setting struct {
	// Key is the YAML key; dots nest (federation.nat.port_map).
	Key string
	// Flag is the command-line flag without dashes ("": file and
	// environment only).
	Flag string
	// Invert: the flag says the opposite of the key (--no-federation
	// sets federation.enabled to false).
	Invert bool
	Kind   Kind
	// Default is the value as written in YAML ("" for none).
	Default string
	// Example, when set, is written commented out in the reference file
	// instead of the default.
	Example string
	// Help describes the setting: the flag's usage and the reference
	// file's comment.
	Help string
	// ZeroIsDefault: a written 0 means the default (older files wrote
	// 0 for "the default").
	ZeroIsDefault bool
	// Validate checks a parsed value (string, int, bool, time.Duration,
	// int64 for sizes, []string for lists); its error is prefixed with
	// the key.
	Validate func(v any) error
}

// Env is the setting's environment variable: ADPNODE_ and the flag (or,
// for a setting without a flag, the key) in upper case with dashes and
// dots as underscores.
func (s *Setting) Env() string {
	n := s.Flag
	if n == "" {
		n = s.Key
	}
	return "ADPNODE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(n))
}

// Source is where an effective value came from.
type Source string

const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromFile    Source = "file"
	FromDefault Source = "default"
	FromDerived Source = "derived" // computed from other settings (public_url)
)

// Value is a setting's effective value.
type Value struct {
	Setting *Setting
	V       any
	Source  Source
}

// Table is a command's settings, in the order of the reference file: a
// group's settings follow it.
type Table []Setting

// Lookup returns the setting with that key.
func (t Table) Lookup(key string) (*Setting, bool) {
	for i := range t {
		if t[i].Key == key {
			return &t[i], true
		}
	}
	return nil, false
}

// Register adds a flag for every setting that has one.
func (t Table) Register(fs *pflag.FlagSet) {
	for i := range t {
		s := &t[i]
		if s.Flag == "" {
			continue
		}
		usage := s.Help + " (" + s.Key + ", " + s.Env() + ")"
		if s.Invert {
			usage = "set " + s.Key + " to false: " + usage
		}
		switch s.Kind {
		case Bool:
			def, _ := strconv.ParseBool(s.Default)
			fs.Bool(s.Flag, def != s.Invert, usage)
		case Int:
			def, _ := strconv.Atoi(s.Default)
			fs.Int(s.Flag, def, usage)
		case List:
			fs.StringArray(s.Flag, splitList(s.Default), usage)
		default:
			fs.String(s.Flag, s.Default, usage)
		}
	}
}

// Values are the effective settings.
type Values struct {
	m    map[string]*Value
	file map[string]*yaml.Node
	read map[string]bool
}

// Get returns the effective value of key; it panics on a key the table
// does not declare (a programming error, caught by the tests).
func (v *Values) Get(key string) *Value {
	x, ok := v.m[key]
	if !ok {
		panic("settings: undeclared key " + key)
	}
	v.read[key] = true
	return x
}

func (v *Values) String(key string) string          { return v.Get(key).V.(string) }
func (v *Values) Int(key string) int                { return v.Get(key).V.(int) }
func (v *Values) Bool(key string) bool              { return v.Get(key).V.(bool) }
func (v *Values) Duration(key string) time.Duration { return v.Get(key).V.(time.Duration) }
func (v *Values) Size(key string) int64             { return v.Get(key).V.(int64) }
func (v *Values) List(key string) []string          { return v.Get(key).V.([]string) }

// Given reports whether key was given by flag or environment or file.
func (v *Values) Given(key string) bool { return v.Get(key).Source != FromDefault }

// FileText returns key's scalar text as written in the file ("" if not).
func (v *Values) FileText(key string) string {
	if n := v.file[key]; n != nil && n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return ""
}

// Set replaces key's effective value (a value derived from others).
func (v *Values) Set(key string, x any, src Source) {
	v.Get(key)
	v.m[key].V, v.m[key].Source = x, src
}

// Unread lists the keys no one has read: settings declared but not
// applied.
func (v *Values) Unread() []string {
	var out []string
	for k := range v.m {
		if !v.read[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Resolve computes every setting's effective value from the parsed
// flags, the environment (lookupEnv, as os.LookupEnv) and the YAML file
// (nil: none), then validates each.
func (t Table) Resolve(fs *pflag.FlagSet, lookupEnv func(string) (string, bool), file []byte) (*Values, error) {
	nodes, err := t.readFile(file)
	if err != nil {
		return nil, err
	}
	v := &Values{m: map[string]*Value{}, file: nodes, read: map[string]bool{}}
	for i := range t {
		s := &t[i]
		if s.Kind == Group {
			continue
		}
		x, src, err := s.resolve(fs, lookupEnv, nodes[s.Key])
		if err != nil {
			return nil, fmt.Errorf("%s: %w%s", s.Key, err, from(s, src))
		}
		v.m[s.Key] = &Value{Setting: s, V: x, Source: src}
	}
	return v, nil
}

// from names where a bad value came from, when not the file.
func from(s *Setting, src Source) string {
	switch src {
	case FromFlag:
		return " (flag --" + s.Flag + ")"
	case FromEnv:
		return " (" + s.Env() + ")"
	case FromDefault:
		return " (the default)"
	}
	return ""
}

func (s *Setting) resolve(fs *pflag.FlagSet, lookupEnv func(string) (string, bool), n *yaml.Node) (any, Source, error) {
	var (
		x   any
		err error
		src Source
	)
	env, envOK := "", false
	if lookupEnv != nil {
		env, envOK = lookupEnv(s.Env())
	}
	switch {
	case s.Flag != "" && fs.Changed(s.Flag):
		src = FromFlag
		f := fs.Lookup(s.Flag)
		if s.Kind == List {
			l, _ := fs.GetStringArray(s.Flag)
			x = append([]string(nil), l...)
		} else {
			x, err = s.parse(f.Value.String())
		}
	case envOK:
		src = FromEnv
		x, err = s.parse(env)
	case n != nil:
		src = FromFile
		x, err = s.decode(n)
	default:
		src = FromDefault
		x, err = s.parse(s.Default)
	}
	if err != nil {
		return nil, src, err
	}
	if s.Invert && (src == FromFlag || src == FromEnv) {
		x = !x.(bool)
	}
	if s.ZeroIsDefault && (x == 0 || x == int64(0)) {
		if x, err = s.parse(s.Default); err != nil {
			return nil, FromDefault, err
		}
	}
	if s.Validate != nil {
		if err := s.Validate(x); err != nil {
			return nil, src, err
		}
	}
	return x, src, nil
}

// parse reads a value from its text (flag, environment, default).
func (s *Setting) parse(text string) (any, error) {
	switch s.Kind {
	case Int:
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("want a whole number, got %q", text)
		}
		return n, nil
	case Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", text)
		}
		return b, nil
	case Duration:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("want a duration such as 30s or 1h, got %q", text)
		}
		return d, nil
	case Size:
		return ParseSize(text)
	case List:
		return splitList(text), nil
	}
	return text, nil
}

// decode reads a value from the YAML file.
func (s *Setting) decode(n *yaml.Node) (any, error) {
	if s.Kind == List {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("want a list (line %d)", n.Line)
		}
		out := []string{}
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("want a list of single values (line %d)", e.Line)
			}
			out = append(out, e.Value)
		}
		return out, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("want a single %s value (line %d)", s.Kind, n.Line)
	}
	return s.parse(n.Value)
}

func splitList(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// readFile flattens the YAML file to its keys. Unknown and repeated keys
// are errors naming the key; a null value counts as not written.
func (t Table) readFile(b []byte) (map[string]*yaml.Node, error) {
	out := map[string]*yaml.Node{}
	if len(b) == 0 {
		return out, nil
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		return nil, err
	}
	if len(doc.Content) == 0 {
		return out, nil
	}
	return out, t.walk(doc.Content[0], "", out)
}

func (t Table) walk(m *yaml.Node, prefix string, out map[string]*yaml.Node) error {
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil
	}
	if m.Kind != yaml.MappingNode {
		if prefix == "" {
			return fmt.Errorf("want a mapping of settings (line %d)", m.Line)
		}
		return fmt.Errorf("%s: want a mapping of settings (line %d)", strings.TrimSuffix(prefix, "."), m.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, val := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		if seen[key] {
			return fmt.Errorf("%s: given twice (line %d)", key, k.Line)
		}
		seen[key] = true
		s, ok := t.Lookup(key)
		switch {
		case !ok:
			return fmt.Errorf("unknown setting %s (line %d)", key, k.Line)
		case s.Kind == Group:
			if err := t.walk(val, key+".", out); err != nil {
				return err
			}
		case val.Kind == yaml.ScalarNode && val.Tag == "!!null":
		default:
			out[key] = val
		}
	}
	return nil
}

// ParseSize reads a byte count: a plain number of bytes, or a number with
// a unit (KiB, MiB, GiB, KB, MB, GB; case-insensitive). Negative and
// malformed sizes are errors.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	units := []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"b", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want bytes or a number with KiB, MiB or GiB", s)
	}
	return v * mult, nil
}

// AtLeast accepts an integer or size of at least min.
func AtLeast(min int64) func(any) error {
	return func(v any) error {
		n := toInt64(v)
		if n < min {
			return fmt.Errorf("must be ≥ %d, got %d", min, n)
		}
		return nil
	}
}

// OneOf accepts one of the given strings.
func OneOf(vals ...string) func(any) error {
	return func(v any) error {
		for _, x := range vals {
			if v == x {
				return nil
			}
		}
		q := make([]string, len(vals))
		for i, x := range vals {
			q[i] = strconv.Quote(x)
		}
		return fmt.Errorf("want one of %s, got %q", strings.Join(q, ", "), v)
	}
}

// PositiveDuration accepts a duration above zero.
func PositiveDuration(v any) error {
	if d := v.(time.Duration); d <= 0 {
		return fmt.Errorf("want a positive duration such as 30s, got %s", d)
	}
	return nil
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	}
	panic(fmt.Sprintf("settings: %T is not a number", v))
}

// Document is the effective settings as a YAML document, in the table's
// order, each value with its source as a line comment. Sizes are bytes
// and durations Go durations.
func (t Table) Document(v *Values) *yaml.Node {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for i := range t {
		s := &t[i]
		if s.Kind == Group {
			continue
		}
		x := v.Get(s.Key)
		val := x.V
		if d, ok := val.(time.Duration); ok {
			val = d.String()
		}
		n := &yaml.Node{}
		if err := n.Encode(val); err != nil {
			panic(err)
		}
		if n.Kind != yaml.ScalarNode {
			n.Style = yaml.FlowStyle // keeps the comment on the key's line
		}
		n.LineComment = string(x.Source)
		if x.Source == FromEnv {
			n.LineComment += " " + s.Env()
		}
		Put(root, s.Key, n)
	}
	return root
}

// Put sets key (dotted) in the mapping root to n, adding the mappings on
// the way.
func Put(root *yaml.Node, key string, n *yaml.Node) {
	name, rest, nested := strings.Cut(key, ".")
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == name {
			if nested {
				Put(root.Content[i+1], rest, n)
			} else {
				root.Content[i+1] = n
			}
			return
		}
	}
	k := &yaml.Node{Kind: yaml.ScalarNode, Value: name}
	if !nested {
		root.Content = append(root.Content, k, n)
		return
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	root.Content = append(root.Content, k, m)
	Put(m, rest, n)
}
