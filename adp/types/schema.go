package types

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/adpnode/adpnode/adp"
)

// schemaURL is the synthetic location every definition schema is compiled
// from. It is never dereferenced.
const schemaURL = "urn:adp:schema"

// draft2020 is the only accepted value of $schema (§13.3: draft 2020-12).
const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// refuseLoader refuses every URL: definition schemas must be self-contained,
// and the kernel performs no I/O.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("remote schema %s not allowed", url)
}

// canonicalSchema checks that raw is a JSON object and returns its JCS form.
func canonicalSchema(raw json.RawMessage, lim Limits) ([]byte, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid(ReasonBadField, "schema", "schema must be a JSON object")
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, invalid(ReasonBadField, "schema", "schema is not canonicalizable JSON: "+truncate(err.Error()))
	}
	if len(canon) > lim.MaxSchemaBytes {
		e := invalid(ReasonSchemaTooLarge, "schema", fmt.Sprintf("schema is %d bytes, limit %d", len(canon), lim.MaxSchemaBytes))
		e.Data["limit"] = "max_schema_bytes"
		return nil, e
	}
	return canon, nil
}

// compileSchema compiles a canonical schema as a self-contained draft
// 2020-12 schema and checks its evaluation cost.
func compileSchema(canon []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
	if err != nil {
		return nil, invalid(ReasonBadField, "schema", "schema is not valid JSON")
	}
	if schemaDepth(doc, 0) > MaxSchemaDepth {
		return nil, tooExpensive(fmt.Sprintf("JSON nesting deeper than %d levels", MaxSchemaDepth))
	}
	if err := checkSchemaRefs(doc); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(compileRegexp)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, invalid(ReasonSchemaInvalid, "schema", "schema rejected: "+truncate(err.Error()))
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		var le *jsonschema.LoadURLError
		if errors.As(err, &le) {
			return nil, invalid(ReasonSchemaRemoteRef, "schema", "schema references a resource outside itself: "+truncate(le.URL))
		}
		return nil, invalid(ReasonSchemaInvalid, "schema", "invalid schema: "+truncate(err.Error()))
	}
	if err := checkCost(sch); err != nil {
		return nil, err
	}
	return sch, nil
}

// MaxSchemaDepth bounds the JSON nesting depth of a schema document. The
// schema compiler's cost grows faster than linearly with nesting, and real
// schemas stay far below it (the registered packs nest at most 8 levels).
const MaxSchemaDepth = 64

// schemaDepth returns the nesting depth of v, stopping once it exceeds
// MaxSchemaDepth.
func schemaDepth(v any, d int) int {
	if d > MaxSchemaDepth {
		return d
	}
	m := d
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			m = max(m, schemaDepth(x, d+1))
		}
	case []any:
		for _, x := range v {
			m = max(m, schemaDepth(x, d+1))
		}
	}
	return m
}

func truncate(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	const max = 300
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// sizedRegexp is a Go (RE2) regexp that knows its program size.
type sizedRegexp struct {
	*regexp.Regexp
	insts int
}

// compileRegexp is the schema compiler's regexp engine: Go's RE2 syntax
// (linear-time matching), with the program size recorded for the cost
// analysis and capped at maxPatternInsts.
func compileRegexp(expr string) (jsonschema.Regexp, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	if len(prog.Inst) > maxPatternInsts {
		return nil, fmt.Errorf("regular expression too large (%d instructions, limit %d)", len(prog.Inst), maxPatternInsts)
	}
	r, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return sizedRegexp{r, len(prog.Inst)}, nil
}

// regexpInsts returns the program size of a compiled pattern.
func regexpInsts(re jsonschema.Regexp) int {
	if s, ok := re.(sizedRegexp); ok {
		return s.insts
	}
	return maxPatternInsts + 1 // not ours: treat as too large
}

// Keyword tables for checkSchemaRefs (draft 2020-12 plus the legacy
// "definitions" container, which JSON Pointer references can still reach).
var (
	kwSchema    = set("additionalProperties", "propertyNames", "items", "contains", "not", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems")
	kwSchemaArr = set("allOf", "anyOf", "oneOf", "prefixItems")
	kwSchemaMap = set("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
	kwData      = set("enum", "const", "default", "examples")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkSchemaRefs walks the schema document and rejects any $ref or
// $dynamicRef that is not a same-document reference ("#...") and any
// $schema other than draft 2020-12 (§13.3). Whether internal references
// resolve is left to the compiler. Values of unknown keywords are scanned
// too, because JSON Pointer references can reach them.
func checkSchemaRefs(v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(obj) {
		val := obj[k]
		switch {
		case k == "$ref" || k == "$dynamicRef" || k == "$schema":
			if err := checkRefKeyword(k, val); err != nil {
				return err
			}
		case kwSchema[k]:
			if arr, ok := val.([]any); ok { // draft-07 style tuple items; the compiler rejects it
				for _, s := range arr {
					if err := checkSchemaRefs(s); err != nil {
						return err
					}
				}
			} else if err := checkSchemaRefs(val); err != nil {
				return err
			}
		case kwSchemaArr[k]:
			arr, _ := val.([]any)
			for _, s := range arr {
				if err := checkSchemaRefs(s); err != nil {
					return err
				}
			}
		case kwSchemaMap[k]:
			m, _ := val.(map[string]any)
			for _, mk := range sortedKeys(m) {
				if err := checkSchemaRefs(m[mk]); err != nil {
					return err
				}
			}
		case kwData[k]:
		default:
			if err := scanUnknown(val); err != nil {
				return err
			}
		}
	}
	return nil
}

func scanUnknown(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if k == "$ref" || k == "$dynamicRef" || k == "$schema" {
				if err := checkRefKeyword(k, v[k]); err != nil {
					return err
				}
			}
			if err := scanUnknown(v[k]); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := scanUnknown(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRefKeyword(k string, val any) error {
	s, ok := val.(string)
	if !ok {
		return nil // not a keyword use; the compiler validates the shape
	}
	if k == "$schema" {
		if s != draft2020 && s != draft2020+"#" {
			return invalid(ReasonSchemaDraft, "schema", "schema must be JSON Schema draft 2020-12, got $schema "+quote(s))
		}
		return nil
	}
	if !strings.HasPrefix(s, "#") {
		return invalid(ReasonSchemaRemoteRef, "schema", "schema "+k+" "+quote(s)+" is not an internal reference")
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// --- cost analysis ---

// Bounds of the cost analysis (see schemaCost). Measured on this host class,
// one subschema evaluation costs well under a microsecond and one regexp
// instruction step about 10 ns, so a 64 KiB payload costs at most a few
// hundred milliseconds to validate against any accepted schema. The
// registered packs need at most 16 evaluations for the payload, 6 for any
// other value and 57 regexp instructions per value.
const (
	// maxEvalRoot bounds the subschema evaluations for the payload itself.
	maxEvalRoot = 256
	// maxEvalMember bounds the subschema evaluations for any other value of
	// the payload (of which there can be many).
	maxEvalMember = 16
	// maxPatternInsts bounds the total regexp program size matched against
	// one string (pattern) or one object's member names (patternProperties):
	// regexp matching costs (string length) × (program size).
	maxPatternInsts = 256
	// maxCostStates and maxCostWork bound the analysis itself.
	maxCostStates = 4096
	maxCostWork   = 1_000_000
)

// checkCost rejects schemas that are too expensive to evaluate (§13.3 "MAY
// reject schemas it considers too expensive to evaluate").
func checkCost(root *jsonschema.Schema) error {
	_, err := schemaCost(root)
	return err
}

// schemaCost returns the largest number of subschema evaluations the schema
// can cause for a single value of any payload below the root, or an error
// when the bounds above are exceeded (or cannot be established within the
// analysis budget).
//
// Evaluating a subschema against a value evaluates its "in-place"
// subschemas ($ref, $dynamicRef, allOf, anyOf, oneOf, not, if/then/else,
// dependentSchemas) against the same value, and its "child" subschemas
// (properties, patternProperties, additionalProperties, propertyNames,
// unevaluatedProperties, prefixItems, items, contains, unevaluatedItems)
// against the value's members. The analysis explores, breadth first, the
// distinct multisets of subschemas that can be evaluated against one value:
// from a multiset it derives one successor per member name that any of its
// subschemas lists, one for any other name, one per prefixItems position and
// one for later positions (patterns are assumed to match any unlisted name;
// anyOf is assumed not to short-circuit). Every state is a sound bound for the
// values it stands for, and states repeat for recursive schemas, so the
// exploration ends. An in-place reference cycle never terminates and is
// rejected.
//
// Validation work is then at most maxEvalRoot + (number of values in the
// payload) × maxEvalMember subschema evaluations plus (payload length) ×
// maxPatternInsts regexp steps: linear in the payload size.
func schemaCost(root *jsonschema.Schema) (int, error) {
	a := &costAnalyzer{
		closures: map[*jsonschema.Schema]map[*jsonschema.Schema]int{},
		state:    map[*jsonschema.Schema]int{},
		ids:      map[*jsonschema.Schema]int{},
		anchors:  map[string][]*jsonschema.Schema{},
		parents:  map[*jsonschema.Schema]bool{},
	}
	a.collect(root)
	start, err := a.expand(map[*jsonschema.Schema]int{root: 1}, maxEvalRoot)
	if err != nil {
		return 0, err
	}
	worst := 0
	seen := map[string]bool{}
	queue := []map[*jsonschema.Schema]int{start}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		succ, err := a.successors(e)
		if err != nil {
			return 0, err
		}
		for _, arrivals := range succ {
			v, err := a.expand(arrivals, maxEvalMember)
			if err != nil {
				return 0, err
			}
			worst = max(worst, total(v))
			sig := a.signature(v)
			if seen[sig] {
				continue
			}
			seen[sig] = true
			if len(seen) > maxCostStates {
				return 0, tooExpensive("too many distinct evaluation states")
			}
			queue = append(queue, v)
		}
	}
	return worst, nil
}

func tooExpensive(msg string) error {
	return invalid(ReasonSchemaTooExpensive, "schema", "schema too expensive to evaluate: "+msg)
}

func total(m map[*jsonschema.Schema]int) int {
	t := 0
	for _, n := range m {
		t += n
	}
	return t
}

type costAnalyzer struct {
	closures map[*jsonschema.Schema]map[*jsonschema.Schema]int
	state    map[*jsonschema.Schema]int // 1 visiting, 2 done (closure DFS)
	ids      map[*jsonschema.Schema]int // discovery order, for signatures
	anchors  map[string][]*jsonschema.Schema
	parents  map[*jsonschema.Schema]bool // subschemas with child subschemas
	work     int
}

func (a *costAnalyzer) spend(n int) error {
	a.work += n
	if a.work > maxCostWork {
		return tooExpensive("analysis budget exhausted")
	}
	return nil
}

// collect numbers every reachable subschema and indexes dynamic anchors.
func (a *costAnalyzer) collect(root *jsonschema.Schema) {
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil {
			continue
		}
		if _, ok := a.ids[s]; ok {
			continue
		}
		a.ids[s] = len(a.ids)
		if s.DynamicAnchor != "" {
			a.anchors[s.DynamicAnchor] = append(a.anchors[s.DynamicAnchor], s)
		}
		stack = append(stack, staticInPlace(s)...)
		children := allChildren(s)
		a.parents[s] = len(children) > 0
		stack = append(stack, children...)
	}
}

func (a *costAnalyzer) sorted(m map[*jsonschema.Schema]int) []*jsonschema.Schema {
	out := make([]*jsonschema.Schema, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y *jsonschema.Schema) int { return a.ids[x] - a.ids[y] })
	return out
}

// signature identifies a state by the subschemas in it that have child
// subschemas: only those determine its successors.
func (a *costAnalyzer) signature(m map[*jsonschema.Schema]int) string {
	var sb strings.Builder
	for _, s := range a.sorted(m) {
		if !a.parents[s] {
			continue
		}
		sb.WriteString(strconv.Itoa(a.ids[s]))
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(m[s]))
		sb.WriteByte(',')
	}
	return sb.String()
}

// expand returns the multiset of subschemas evaluated against one value
// when the arrival subschemas are applied to it, and checks it against the
// evaluation limit and maxPatternInsts.
func (a *costAnalyzer) expand(arrivals map[*jsonschema.Schema]int, limit int) (map[*jsonschema.Schema]int, error) {
	out := map[*jsonschema.Schema]int{}
	t := 0
	for _, s := range a.sorted(arrivals) {
		cl, err := a.closure(s)
		if err != nil {
			return nil, err
		}
		for n, m := range cl {
			out[n] += m * arrivals[s]
			t += m * arrivals[s]
		}
		if t > limit {
			return nil, tooExpensive(fmt.Sprintf("more than %d subschema evaluations for one value", limit))
		}
		if err := a.spend(len(cl)); err != nil {
			return nil, err
		}
	}
	str, names := 0, 0
	for n, m := range out {
		if n.Pattern != nil {
			str += m * regexpInsts(n.Pattern)
		}
		for re := range n.PatternProperties {
			names += m * regexpInsts(re)
		}
	}
	if str > maxPatternInsts || names > maxPatternInsts {
		return nil, tooExpensive(fmt.Sprintf("regular expressions of more than %d instructions applied to one value", maxPatternInsts))
	}
	return out, nil
}

// successors returns, for the multiset e of subschemas evaluated against one
// value, the arrival multisets of its distinguishable members.
func (a *costAnalyzer) successors(e map[*jsonschema.Schema]int) ([]map[*jsonschema.Schema]int, error) {
	var nodes []*jsonschema.Schema
	for _, n := range a.sorted(e) {
		if a.parents[n] {
			nodes = append(nodes, n)
		}
	}
	baseObj := map[*jsonschema.Schema]int{}
	baseArr := map[*jsonschema.Schema]int{}
	var names []string
	byName := map[string][]*jsonschema.Schema{}
	byPos := map[int][]*jsonschema.Schema{}
	maxPrefix := 0
	for _, n := range nodes {
		for _, x := range propertyTargets(n, "", false) {
			baseObj[x] += e[n]
		}
		for _, x := range itemTargets(n, -1) {
			baseArr[x] += e[n]
		}
		for k := range n.Properties {
			if byName[k] == nil {
				names = append(names, k)
			}
			byName[k] = append(byName[k], n)
		}
		for i := range n.PrefixItems {
			byPos[i] = append(byPos[i], n)
		}
		maxPrefix = max(maxPrefix, len(n.PrefixItems))
		if err := a.spend(1 + len(n.Properties) + len(n.PrefixItems)); err != nil {
			return nil, err
		}
	}
	slices.Sort(names)
	var out []map[*jsonschema.Schema]int
	variant := func(base map[*jsonschema.Schema]int, ns []*jsonschema.Schema, targets func(*jsonschema.Schema, bool) []*jsonschema.Schema) error {
		m := make(map[*jsonschema.Schema]int, len(base))
		for x, v := range base {
			m[x] = v
		}
		for _, n := range ns {
			for _, x := range targets(n, false) {
				if m[x] -= e[n]; m[x] == 0 {
					delete(m, x)
				}
			}
			for _, x := range targets(n, true) {
				m[x] += e[n]
			}
		}
		if len(m) > 0 {
			out = append(out, m)
		}
		return a.spend(len(base) + len(ns))
	}
	if len(baseObj) > 0 {
		out = append(out, baseObj)
	}
	for _, name := range names {
		err := variant(baseObj, byName[name], func(n *jsonschema.Schema, named bool) []*jsonschema.Schema {
			return propertyTargets(n, name, named)
		})
		if err != nil {
			return nil, err
		}
	}
	if len(baseArr) > 0 {
		out = append(out, baseArr)
	}
	for i := 0; i < maxPrefix; i++ {
		err := variant(baseArr, byPos[i], func(n *jsonschema.Schema, at bool) []*jsonschema.Schema {
			if at {
				return itemTargets(n, i)
			}
			return itemTargets(n, -1)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// staticInPlace lists the subschemas applied to the same value as s.
func staticInPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(x *jsonschema.Schema) {
		if x != nil {
			out = append(out, x)
		}
	}
	add(s.Ref)
	add(s.RecursiveRef)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	add(s.Not)
	for _, x := range s.AllOf {
		add(x)
	}
	for _, x := range s.AnyOf {
		add(x)
	}
	for _, x := range s.OneOf {
		add(x)
	}
	add(s.If)
	add(s.Then)
	add(s.Else)
	for _, x := range s.DependentSchemas {
		add(x)
	}
	for _, x := range s.Dependencies {
		if xs, ok := x.(*jsonschema.Schema); ok {
			add(xs)
		}
	}
	return out
}

// inPlace is staticInPlace plus every possible target of a dynamic reference.
func (a *costAnalyzer) inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := staticInPlace(s)
	if s.DynamicRef != nil && s.DynamicRef.Anchor != "" {
		// The reference resolves to one of these at run time; count each
		// candidate once.
		for _, x := range a.anchors[s.DynamicRef.Anchor] {
			if x != s.DynamicRef.Ref {
				out = append(out, x)
			}
		}
	}
	return out
}

// allChildren lists every subschema applied to members of the value.
func allChildren(s *jsonschema.Schema) []*jsonschema.Schema {
	out := propertyTargets(s, "", false)
	for _, x := range s.Properties {
		out = append(out, x)
	}
	out = append(out, itemTargets(s, -1)...)
	return append(out, s.PrefixItems...)
}

// closure returns the multiset of subschemas evaluated when s is applied to
// one value (s itself included).
func (a *costAnalyzer) closure(s *jsonschema.Schema) (map[*jsonschema.Schema]int, error) {
	if c, ok := a.closures[s]; ok {
		return c, nil
	}
	if a.state[s] == 1 {
		return nil, tooExpensive("reference cycle that never moves into the value")
	}
	a.state[s] = 1
	c := map[*jsonschema.Schema]int{s: 1}
	t := 1
	for _, x := range a.inPlace(s) {
		xc, err := a.closure(x)
		if err != nil {
			return nil, err
		}
		for n, m := range xc {
			c[n] += m
			t += m
		}
		if t > maxEvalRoot {
			return nil, tooExpensive(fmt.Sprintf("more than %d subschema evaluations for one value", maxEvalRoot))
		}
		if err := a.spend(len(xc)); err != nil {
			return nil, err
		}
	}
	a.state[s] = 2
	a.closures[s] = c
	return c, nil
}

// propertyTargets lists the subschemas of s applied to the member called
// name (named) or to a member whose name s does not list (!named; every
// pattern is assumed to match).
func propertyTargets(s *jsonschema.Schema, name string, named bool) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	matched := false
	if named {
		if x, ok := s.Properties[name]; ok {
			out = append(out, x)
			matched = true
		}
	}
	for re, x := range s.PatternProperties {
		if !named || re.MatchString(name) {
			out = append(out, x)
			matched = true
		}
	}
	if x, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && x != nil && (!named || !matched) {
		out = append(out, x)
	}
	if s.PropertyNames != nil {
		out = append(out, s.PropertyNames)
	}
	if s.UnevaluatedProperties != nil {
		out = append(out, s.UnevaluatedProperties)
	}
	return out
}

// itemTargets lists the subschemas of s applied to array position i, or to
// a position past every prefixItems entry when i < 0.
func itemTargets(s *jsonschema.Schema, i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	if i >= 0 && i < len(s.PrefixItems) {
		out = append(out, s.PrefixItems[i])
	} else if s.Items2020 != nil {
		out = append(out, s.Items2020)
	}
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		if it != nil {
			out = append(out, it)
		}
	case []*jsonschema.Schema:
		out = append(out, it...)
	}
	if x, ok := s.AdditionalItems.(*jsonschema.Schema); ok && x != nil {
		out = append(out, x)
	}
	if s.Contains != nil {
		out = append(out, s.Contains)
	}
	if s.UnevaluatedItems != nil {
		out = append(out, s.UnevaluatedItems)
	}
	return out
}

// --- payload validation ---

// maxReportedErrors caps data.errors of payload_schema_violation.
const maxReportedErrors = 10

// validatePayload validates payload bytes against a compiled schema.
// Numbers are decoded as float64, the value JCS hashes and signs (§6), which
// also keeps number comparisons cheap.
func validatePayload(sch *jsonschema.Schema, payload []byte) error {
	var v any
	if err := json.Unmarshal(payload, &v); err != nil {
		return &adp.Error{Code: adp.CodePayloadSchemaViolation, Message: "payload is not valid JSON",
			Data: map[string]any{"errors": []map[string]string{{"path": "", "message": truncate(err.Error())}}}}
	}
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &adp.Error{Code: adp.CodePayloadSchemaViolation, Message: truncate(err.Error()),
			Data: map[string]any{"errors": []map[string]string{{"path": "", "message": truncate(err.Error())}}}}
	}
	var leaves []map[string]string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := ""
			if out := e.BasicOutput(); out != nil && out.Error != nil {
				msg = out.Error.String()
			}
			path := jsonPointer(e.InstanceLocation)
			key := path + "\x00" + msg
			if !seen[key] {
				seen[key] = true
				leaves = append(leaves, map[string]string{"path": path, "message": truncate(msg)})
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.SortFunc(leaves, func(x, y map[string]string) int {
		if c := strings.Compare(x["path"], y["path"]); c != 0 {
			return c
		}
		return strings.Compare(x["message"], y["message"])
	})
	if len(leaves) > maxReportedErrors {
		leaves = leaves[:maxReportedErrors]
	}
	msg := "payload does not satisfy the type schema"
	if len(leaves) > 0 {
		msg += ": at " + quote(leaves[0]["path"]) + ": " + leaves[0]["message"]
	}
	return &adp.Error{Code: adp.CodePayloadSchemaViolation, Message: msg, Data: map[string]any{"errors": leaves}}
}

func jsonPointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}
