//go:build e2e

package hostapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/adpnode/adpnode/attention"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/metrics"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/node"
)

// The OpenAPI description (hostapi/openapi.json) is checked four ways:
// its paths and methods equal the routes the server registers; it is
// well formed (operation IDs, summaries, responses, parameters, security,
// references, the error-code table); every schema compiles as JSON Schema
// 2020-12; and real answers of a host, and of a federated pair with a
// mirror, validate against the schemas it documents for them.

const openAPIFile = "openapi.json"

var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openAPIDoc reads and decodes the document.
func openAPIDoc(t testing.TB) ([]byte, map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s is not valid JSON: %v", openAPIFile, err)
	}
	return raw, doc
}

// fullServer builds a Server with every optional component the HTTP layer
// can have without a libp2p host: metrics (federation and mirror routes are
// registered unconditionally and answer not_found without them).
func fullServer(t testing.TB) *hostapi.Server {
	t.Helper()
	n, err := node.Open(node.Config{InMemory: true, PublicURL: "http://127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	att, err := attention.Open(attention.ForNode(n, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { att.Close(); n.Close() })
	return hostapi.New(n, hostapi.Options{Metrics: metrics.New(n), Attention: att})
}

var ginParam = regexp.MustCompile(`/[:*]([A-Za-z0-9_]+)`)
var openAPIParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// ginStyle converts an OpenAPI path to gin's form: {room_id} → :room_id.
func ginStyle(p string) string { return openAPIParam.ReplaceAllString(p, ":$1") }

// normalRoute maps a gin catch-all (/v1/mirrors/targets/*id, /ui/*file) to
// the named-parameter form the OpenAPI path documents ({id}, {file}).
func normalRoute(r string) string { return ginParam.ReplaceAllString(r, "/:$1") }

func TestOpenAPIRoutes(t *testing.T) {
	_, doc := openAPIDoc(t)
	routes := map[string]string{} // normalized → as registered
	for _, r := range fullServer(t).Routes() {
		routes[normalRoute(r)] = r
	}
	documented := map[string]bool{}
	for p, item := range doc["paths"].(map[string]any) {
		for _, m := range openAPIMethods {
			if _, ok := item.(map[string]any)[m]; ok {
				documented[strings.ToUpper(m)+" "+ginStyle(p)] = true
			}
		}
	}
	var missing, extra []string
	for norm, r := range routes {
		if !documented[norm] {
			missing = append(missing, r)
		}
	}
	for d := range documented {
		if _, ok := routes[d]; !ok {
			extra = append(extra, d)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, r := range missing {
		t.Errorf("route %q is registered but not documented in hostapi/%s", r, openAPIFile)
	}
	for _, r := range extra {
		t.Errorf("hostapi/%s documents %q, which the server does not register", openAPIFile, r)
	}
	if len(routes) < 30 {
		t.Fatalf("only %d routes registered: %v", len(routes), routes)
	}
}

// TestOpenAPIServed checks GET /openapi.json answers the file's bytes.
func TestOpenAPIServed(t *testing.T) {
	raw, _ := openAPIDoc(t)
	w := httptest.NewRecorder()
	fullServer(t).Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %s", w.Code, w.Body)
	}
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); mt != "application/json" {
		t.Fatalf("Content-Type %q", w.Header().Get("Content-Type"))
	}
	if !bytes.Equal(w.Body.Bytes(), raw) || !bytes.Equal(hostapi.OpenAPI(), raw) {
		t.Fatal("the served document differs from hostapi/openapi.json")
	}
}

// dupKeys walks one JSON value and reports member names that occur twice in
// an object: encoding/json would silently keep the last (two documented
// "/v1/rooms" paths, say).
func dupKeys(dec *json.Decoder, path string, report func(string)) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				report(path + "/" + key)
			}
			seen[key] = true
			if err := dupKeys(dec, path+"/"+key, report); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := dupKeys(dec, path+"/"+strconv.Itoa(i), report); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// resolvePointer resolves a local reference ("#/components/schemas/Room").
func resolvePointer(doc map[string]any, ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = doc
	for _, tok := range strings.Split(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// deref follows $ref until it reaches an object that is not a reference.
func deref(t testing.TB, doc map[string]any, v any) map[string]any {
	t.Helper()
	for i := 0; i < 10; i++ {
		m, _ := v.(map[string]any)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if v, ok = resolvePointer(doc, ref); !ok {
			t.Fatalf("unresolvable $ref %q", ref)
		}
	}
	t.Fatal("reference loop")
	return nil
}

func TestOpenAPIDocument(t *testing.T) {
	raw, doc := openAPIDoc(t)
	if err := dupKeys(json.NewDecoder(bytes.NewReader(raw)), "#", func(p string) { t.Errorf("duplicate member %s", p) }); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] == nil || info["version"] == nil {
		t.Error("info needs title and version")
	}
	comps := doc["components"].(map[string]any)

	// Every $ref resolves, and every component is used.
	used := map[string]bool{}
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if _, ok := resolvePointer(doc, ref); !ok {
					t.Errorf("%s: $ref %q does not resolve", where, ref)
				}
				used[ref] = true
			}
			for k, x := range v {
				walk(where+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(where+"/"+strconv.Itoa(i), x)
			}
		}
	}
	walk("#", doc)
	for kind, m := range comps {
		if kind == "securitySchemes" {
			continue
		}
		for name := range m.(map[string]any) {
			if ref := "#/components/" + kind + "/" + name; !used[ref] {
				t.Errorf("%s is never referenced", ref)
			}
		}
	}

	// The error codes are the one table's (httpwire.Codes), and the
	// per-status error schemas partition it.
	table := hostapi.ErrorCodes()
	var want []string
	byStatus := map[int][]string{}
	for c, s := range table {
		want = append(want, string(c))
		byStatus[s] = append(byStatus[s], string(c))
	}
	schemas := comps["schemas"].(map[string]any)
	if got := strs(schemas["ErrorCode"].(map[string]any)["enum"]); !sameSet(got, want) {
		t.Errorf("ErrorCode enum %v, want the httpwire table %v", got, want)
	}
	for status, codes := range byStatus {
		s, ok := schemas["Error"+strconv.Itoa(status)].(map[string]any)
		if !ok {
			t.Errorf("no Error%d schema", status)
			continue
		}
		enum := s["allOf"].([]any)[1].(map[string]any)["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"]
		if got := strs(enum); !sameSet(got, codes) {
			t.Errorf("Error%d codes %v, want %v", status, got, codes)
		}
	}

	schemes := comps["securitySchemes"].(map[string]any)
	tags := map[string]bool{}
	for _, tg := range doc["tags"].([]any) {
		tags[tg.(map[string]any)["name"].(string)] = true
	}
	opIDs := map[string]string{}
	for p, item := range doc["paths"].(map[string]any) {
		item := item.(map[string]any)
		vars := map[string]bool{}
		for _, m := range openAPIParam.FindAllStringSubmatch(p, -1) {
			vars[m[1]] = true
		}
		for _, method := range openAPIMethods {
			o, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			where := strings.ToUpper(method) + " " + p
			id, _ := o["operationId"].(string)
			if id == "" {
				t.Errorf("%s: no operationId", where)
			} else if prev, dup := opIDs[id]; dup {
				t.Errorf("%s: operationId %q already used by %s", where, id, prev)
			}
			opIDs[id] = where
			if s, _ := o["summary"].(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s: no summary", where)
			}
			for _, tg := range o["tags"].([]any) {
				if !tags[tg.(string)] {
					t.Errorf("%s: tag %q is not declared", where, tg)
				}
			}
			resps, _ := o["responses"].(map[string]any)
			if len(resps) == 0 {
				t.Errorf("%s: no responses", where)
			}
			for code, r := range resps {
				if deref(t, doc, r)["description"] == nil {
					t.Errorf("%s %s: response without description", where, code)
				}
				if n, err := strconv.Atoi(code); err == nil && n >= 400 && len(byStatus[n]) == 0 {
					t.Errorf("%s: documents HTTP %s, which no error code maps to", where, code)
				}
			}
			// Security: every requirement names a declared scheme.
			sec, ok := o["security"].([]any)
			if !ok {
				t.Errorf("%s: no security (use [] for none)", where)
			}
			for _, req := range sec {
				for name := range req.(map[string]any) {
					if schemes[name] == nil {
						t.Errorf("%s: security scheme %q is not declared", where, name)
					}
				}
			}
			// Parameters: the path's variables exactly, no duplicates.
			seen := map[string]bool{}
			pathParams := map[string]bool{}
			params, _ := item["parameters"].([]any)
			params = append(slices.Clone(params), anySlice(o["parameters"])...)
			for _, pr := range params {
				pm := deref(t, doc, pr)
				name, in := pm["name"].(string), pm["in"].(string)
				if seen[in+" "+name] {
					t.Errorf("%s: parameter %s %q twice", where, in, name)
				}
				seen[in+" "+name] = true
				if pm["schema"] == nil {
					t.Errorf("%s: parameter %q has no schema", where, name)
				}
				if in == "path" {
					pathParams[name] = true
					if pm["required"] != true {
						t.Errorf("%s: path parameter %q must be required", where, name)
					}
				}
			}
			for v := range vars {
				if !pathParams[v] {
					t.Errorf("%s: path variable {%s} has no parameter", where, v)
				}
			}
			for v := range pathParams {
				if !vars[v] {
					t.Errorf("%s: path parameter %q is not in the path", where, v)
				}
			}
			if rb, ok := o["requestBody"]; ok {
				if c, _ := deref(t, doc, rb)["content"].(map[string]any); len(c) == 0 {
					t.Errorf("%s: request body without content", where)
				}
			}
		}
	}
	if len(opIDs) < 30 {
		t.Errorf("only %d operations", len(opIDs))
	}
}

func anySlice(v any) []any { s, _ := v.([]any); return s }

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// oaSpec validates real answers against the document.
type oaSpec struct {
	doc   map[string]any
	c     *jsonschema.Compiler
	ops   map[string]map[string]any // operationId → operation
	mu    sync.Mutex
	cache map[string]*jsonschema.Schema
}

const oaBase = "mem:///openapi.json"

func loadSpec(t testing.TB) *oaSpec {
	t.Helper()
	raw, doc := openAPIDoc(t)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(oaBase, inst); err != nil {
		t.Fatal(err)
	}
	s := &oaSpec{doc: doc, c: c, ops: map[string]map[string]any{}, cache: map[string]*jsonschema.Schema{}}
	for _, item := range doc["paths"].(map[string]any) {
		for _, m := range openAPIMethods {
			if o, ok := item.(map[string]any)[m].(map[string]any); ok {
				s.ops[o["operationId"].(string)] = o
			}
		}
	}
	return s
}

func pointerTok(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// schemaAt compiles the schema at a JSON pointer of the document.
func (s *oaSpec) schemaAt(t testing.TB, ptr string) *jsonschema.Schema {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.cache[ptr]; ok {
		return sch
	}
	sch, err := s.c.Compile(oaBase + "#" + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	s.cache[ptr] = sch
	return sch
}

// validate checks a JSON text against the schema at ptr.
func (s *oaSpec) validate(t testing.TB, what, ptr string, body []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: body is not JSON: %v: %.300s", what, err, body)
		return
	}
	if err := s.schemaAt(t, ptr).Validate(inst); err != nil {
		t.Errorf("%s: does not match %s:\n%v\nbody: %.1500s", what, ptr, err, body)
	}
}

// responseAt returns the documented response for status (or "default")
// and the pointer of the object it was found at.
func (s *oaSpec) responseAt(t testing.TB, opID string, status int) (map[string]any, string) {
	t.Helper()
	o, ok := s.ops[opID]
	if !ok {
		t.Fatalf("no operation %q in the document", opID)
	}
	resps := o["responses"].(map[string]any)
	code := strconv.Itoa(status)
	r, ok := resps[code]
	if !ok {
		if r, ok = resps["default"]; !ok {
			t.Errorf("%s: HTTP %d is not documented", opID, status)
			return nil, ""
		}
		code = "default"
	}
	ptr := ""
	for p, item := range s.doc["paths"].(map[string]any) {
		for m, x := range item.(map[string]any) {
			if xo, ok := x.(map[string]any); ok && xo["operationId"] == opID {
				ptr = "/paths/" + pointerTok(p) + "/" + m + "/responses/" + code
			}
		}
	}
	m := r.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		ptr = strings.TrimPrefix(ref, "#")
		m = deref(t, s.doc, m)
	}
	return m, ptr
}

// adpHeaders are the headers of ADP answers a document must mention where
// they occur.
var adpHeaders = []string{"Max-Seen-Nonce", "Retry-After", "X-ADP-Relayed", "Location"}

// check validates an answer of operation opID: its status is documented,
// its media type is one documented for that status, the body matches the
// schema (JSON, or each line of JSON lines), and the ADP headers it carries
// are documented.
func (s *oaSpec) check(t testing.TB, opID string, r *adptest.Response) {
	t.Helper()
	s.checkAnswer(t, opID, r, true)
}

// checkStream is check for a streaming answer, whose body is read as it
// comes (checkEvent validates the events).
func (s *oaSpec) checkStream(t testing.TB, opID string, r *adptest.Response) {
	t.Helper()
	s.checkAnswer(t, opID, r, false)
}

func (s *oaSpec) checkAnswer(t testing.TB, opID string, r *adptest.Response, body bool) {
	t.Helper()
	resp, ptr := s.responseAt(t, opID, r.Status)
	if resp == nil {
		t.Logf("answer: %s", short(r))
		return
	}
	what := fmt.Sprintf("%s → %d", opID, r.Status)
	hs, _ := resp["headers"].(map[string]any)
	for _, h := range adpHeaders {
		if r.Header.Get(h) != "" && hs[h] == nil {
			t.Errorf("%s: answer carries %s, which is not documented", what, h)
		}
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(r.Body) != 0 {
			t.Errorf("%s: documented without content, answered %.200q", what, r.Body)
		}
		return
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s: Content-Type %q: %v", what, r.Header.Get("Content-Type"), err)
		return
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		t.Errorf("%s: media type %s is not documented (have %v)", what, mt, keys(content))
		return
	}
	if !body {
		return
	}
	mptr := ptr + "/content/" + pointerTok(mt)
	switch {
	case mt == "application/json":
		s.validate(t, what, mptr+"/schema", r.Body)
	case media["x-jsonl-lines"] != nil:
		lines := bytes.Split(bytes.TrimSuffix(r.Body, []byte("\n")), []byte("\n"))
		for i, line := range lines {
			s.validate(t, fmt.Sprintf("%s line %d", what, i+1), mptr+"/x-jsonl-lines/"+strconv.Itoa(min(i, 1)), line)
		}
	case len(r.Body) == 0:
		t.Errorf("%s: empty %s body", what, mt)
	}
}

// checkEvent validates an SSE event of a streaming operation.
func (s *oaSpec) checkEvent(t testing.TB, opID string, it sseItem) {
	t.Helper()
	_, ptr := s.responseAt(t, opID, http.StatusOK)
	evs, _ := resolvePointer(s.doc, "#"+ptr+"/content/text~1event-stream/x-sse-events")
	if m, _ := evs.(map[string]any); m[it.Event] == nil {
		t.Errorf("%s: SSE event %q is not documented", opID, it.Event)
		return
	}
	s.validate(t, opID+" SSE "+it.Event, ptr+"/content/text~1event-stream/x-sse-events/"+pointerTok(it.Event), it.Data)
}

// checkRequest validates a request body we send against the operation's.
func (s *oaSpec) checkRequest(t testing.TB, opID string, body []byte) {
	t.Helper()
	for p, item := range s.doc["paths"].(map[string]any) {
		for m, x := range item.(map[string]any) {
			if xo, ok := x.(map[string]any); ok && xo["operationId"] == opID {
				s.validate(t, opID+" request", "/paths/"+pointerTok(p)+"/"+m+"/requestBody/content/application~1json/schema", body)
				return
			}
		}
	}
	t.Fatalf("no operation %q", opID)
}

func TestOpenAPISchemasCompile(t *testing.T) {
	s := loadSpec(t)
	for name := range s.doc["components"].(map[string]any)["schemas"].(map[string]any) {
		s.schemaAt(t, "/components/schemas/"+pointerTok(name))
	}
}

// oaDo sends a request with optional bearer token and extra headers.
func oaDo(t testing.TB, method, url, token string, body []byte, hdr ...string) *adptest.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &adptest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// oaStream opens an SSE stream at url and returns it after the subscribed
// comment; on another answer it returns the answer.
func oaStream(t testing.TB, url, token string) (*sseStream, *adptest.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ans := &adptest.Response{Status: resp.StatusCode, Header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		ans.Body, _ = io.ReadAll(resp.Body)
		return nil, ans
	}
	s := &sseStream{t: t, resp: resp, items: make(chan sseItem, 1024), cancel: cancel}
	go s.read()
	t.Cleanup(s.Close)
	if it, ok := s.nextAny(20 * time.Second); !ok || !strings.HasPrefix(it.Comment, "subscribed") {
		t.Fatalf("%s: first SSE item %+v", url, it)
	}
	return s, ans
}

// TestOpenAPIConformance drives one host through every endpoint family and
// validates each answer against the document.
func TestOpenAPIConformance(t *testing.T) {
	spec := loadSpec(t)
	h := adptest.StartHost(t, node.Config{Rates: highRates()})
	alice, bob, carol := adptest.NewAgent("alice"), adptest.NewAgent("bob"), adptest.NewAgent("carol")
	now := h.Clock.Ms
	// do sends a request and checks the answer; send also checks the
	// request body against the documented one.
	do := func(opID, method, path string, a *adptest.Agent, body []byte, hdr ...string) *adptest.Response {
		t.Helper()
		r := oaDo(t, method, h.URL+path, tok(h, a), body, hdr...)
		spec.check(t, opID, r)
		return r
	}
	send := func(opID, method, path string, a *adptest.Agent, body []byte) *adptest.Response {
		t.Helper()
		spec.checkRequest(t, opID, body)
		return do(opID, method, path, a, body)
	}
	want := func(r *adptest.Response, status int, code adp.Code) {
		t.Helper()
		if r.Status != status || code != "" && r.ErrorCode() != string(code) {
			t.Fatalf("want %d %s, got %s", status, code, short(r))
		}
	}
	jsonBody := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	want(do("getDiscovery", "GET", "/.well-known/agent-discourse", nil, nil), 200, "")
	want(do("getHealth", "GET", "/healthz", nil, nil), 200, "")
	want(do("getReady", "GET", "/readyz", nil, nil), 200, "")
	want(do("getOpenAPI", "GET", "/openapi.json", nil, nil), 200, "")

	// Writes: creation, resubmission, records, and the error headers.
	create := alice.Envelope(now(), "room.create", "", 0, "", roomPayload("public", now(), 20*time.Minute))
	created := send("createRoom", "POST", "/v1/rooms", nil, create)
	want(created, 201, "")
	want(send("createRoom", "POST", "/v1/rooms", nil, create), 200, "")
	id := decode[struct{ ID string }](t, created).ID
	want(do("createRoom", "POST", "/v1/rooms", nil, []byte(`{"hash":1}`)), 400, "")
	head := h.Head(t, alice, id)
	env := alice.Envelope(now(), "message.create", id, head.Seq, head.Hash, msg("hello"))
	want(send("submitEvent", "POST", "/v1/rooms/"+id, nil, env), 201, "")
	want(do("submitEvent", "POST", "/v1/rooms/"+id, nil, env), 200, "")
	stale := alice.Envelope(now(), "message.create", id, head.Seq, head.Hash, msg("stale"))
	want(do("submitEvent", "POST", "/v1/rooms/"+id, nil, stale), 409, adp.CodeRoomHeadMismatch)
	head = h.Head(t, alice, id)
	ev := alice.Event(now(), "message.create", id, head.Seq, head.Hash, msg("old nonce"))
	ev.Nonce = 1
	r := do("submitEvent", "POST", "/v1/rooms/"+id, nil, alice.Sign(ev))
	want(r, 409, adp.CodeNonceNotGreater)
	if r.Header.Get("Max-Seen-Nonce") == "" {
		t.Error("nonce_not_greater without Max-Seen-Nonce")
	}
	want(do("submitEvent", "POST", "/v1/rooms/"+id, nil, bytes.Repeat([]byte(" "), 2<<20)), 413, adp.CodePayloadTooLarge)
	want(do("submitEvent", "POST", "/v1/rooms/aaaaaaaaaaaaaaaaaaaa", nil,
		alice.Envelope(now(), "message.create", "aaaaaaaaaaaaaaaaaaaa", 1, head.Hash, msg("x"))), 404, adp.CodeRoomNotFound)

	// Reads.
	want(do("getRoom", "GET", "/v1/rooms/"+id, nil, nil), 200, "")
	want(do("getRoom", "GET", "/v1/rooms/"+id, alice, nil), 200, "")
	want(do("getRoom", "GET", "/v1/rooms/aaaaaaaaaaaaaaaaaaaa", nil, nil), 404, adp.CodeRoomNotFound)
	r = do("listEvents", "GET", "/v1/rooms/"+id+"/events?limit=1", nil, nil)
	want(r, 200, "")
	page := decode[eventsPage](t, r)
	if page.NextCursor == nil {
		t.Fatal("no next_cursor")
	}
	want(do("listEvents", "GET", "/v1/rooms/"+id+"/events?cursor="+*page.NextCursor, nil, nil), 200, "")
	want(do("listEvents", "GET", "/v1/rooms/"+id+"/events?limit=0", nil, nil), 400, adp.CodeInvalidRequest)
	want(do("listMembers", "GET", "/v1/rooms/"+id+"/members", nil, nil), 200, "")

	// The live stream: room.event, room.join_request, room.agent_status.
	live, ans := oaStream(t, h.URL+"/v1/rooms/"+id+"/events/live", tok(h, alice))
	if live == nil {
		t.Fatalf("live: %s", short(ans))
	}
	spec.checkStream(t, "streamEvents", ans)
	r = oaDo(t, "GET", h.URL+"/v1/rooms/"+id+"/events/live", "", nil)
	spec.check(t, "streamEvents", r)
	want(r, 401, adp.CodeInvalidToken)
	h.MustPost(t, alice, id, "message.create", msg("live"))
	spec.checkEvent(t, "streamEvents", live.mustNext("room.event"))

	// Join requests (public: approved at once; managers are notified).
	want(send("createJoinRequest", "POST", "/v1/rooms/"+id+"/join-requests", bob,
		jsonBody(map[string]any{"role": "speaker", "perspective": "skeptic", "reason": "curious"})), 201, "")
	spec.checkEvent(t, "streamEvents", live.mustNext("room.join_request"))
	want(do("createJoinRequest", "POST", "/v1/rooms/"+id+"/join-requests", carol, []byte(`{"role":"king"}`)), 400, adp.CodeInvalidRequest)
	want(do("createJoinRequest", "POST", "/v1/rooms/"+id+"/join-requests", nil, jsonBody(map[string]any{"role": "speaker"})), 401, adp.CodeInvalidToken)
	r = do("listJoinRequests", "GET", "/v1/rooms/"+id+"/join-requests", alice, nil)
	want(r, 200, "")
	reqID := decode[struct{ Result []jrView }](t, r).Result[0].id()
	want(do("listJoinRequests", "GET", "/v1/rooms/"+id+"/join-requests?status=approved", alice, nil), 200, "")
	want(do("listJoinRequests", "GET", "/v1/rooms/"+id+"/join-requests", bob, nil), 403, adp.CodePermissionDenied)
	want(do("getJoinRequest", "GET", "/v1/rooms/"+id+"/join-requests/"+reqID, bob, nil), 200, "")
	want(do("getJoinRequest", "GET", "/v1/rooms/"+id+"/join-requests/nope", alice, nil), 404, adp.CodeJoinRequestNotFound)
	h.MustPost(t, bob, id, "room.join", map[string]any{"role": "speaker", "request_id": reqID})
	spec.checkEvent(t, "streamEvents", live.mustNext("room.event"))
	want(do("listMembers", "GET", "/v1/rooms/"+id+"/members", nil, nil), 200, "")

	// Agent status.
	st := jsonBody(map[string]any{"state": "thinking", "summary": "reading", "seen_seq": 2, "extra": map[string]any{"k": 1}})
	want(send("putAgentStatus", "PUT", "/v1/rooms/"+id+"/agent-status", alice, st), 200, "")
	spec.checkEvent(t, "streamEvents", live.mustNext("room.agent_status"))
	want(do("putAgentStatus", "PUT", "/v1/rooms/"+id+"/agent-status", alice, []byte(`{"mood":"x"}`)), 400, adp.CodeInvalidRequest)
	want(do("putAgentStatus", "PUT", "/v1/rooms/"+id+"/agent-status", carol, st), 403, adp.CodeMembershipRequired)
	want(do("listAgentStatus", "GET", "/v1/rooms/"+id+"/agent-status", nil, nil), 200, "")
	want(do("getAgentStatus", "GET", "/v1/rooms/"+id+"/agent-status/"+string(alice.ID), nil, nil), 200, "")
	want(do("getAgentStatus", "GET", "/v1/rooms/"+id+"/agent-status/"+string(carol.ID), nil, nil), 404, adp.CodeAgentStatusNotFound)
	want(do("getAgentStatus", "GET", "/v1/rooms/"+id+"/agent-status/alice", nil, nil), 400, adp.CodeInvalidRequest)

	// Directory and your rooms.
	want(do("listPublicRooms", "GET", "/v1/rooms/public", nil, nil), 200, "")
	want(do("listPublicRooms", "GET", "/v1/rooms/public?scope=local&status=active,scheduled&tag=x&keyword=test&limit=5", nil, nil), 200, "")
	want(do("listPublicRooms", "GET", "/v1/rooms/public?status=open", nil, nil), 400, adp.CodeInvalidRequest)
	want(do("listMyRooms", "GET", "/v1/me/rooms", alice, nil), 200, "")
	want(do("listMyRooms", "GET", "/v1/me/rooms?membership=active&status=active", bob, nil), 200, "")
	want(do("listMyRooms", "GET", "/v1/me/rooms", nil, nil), 401, adp.CodeInvalidToken)

	// Operator components that are off on this host.
	want(do("listFederationPeers", "GET", "/v1/federation/peers", nil, nil), 404, adp.CodeNotFound)
	want(do("listFederationHosts", "GET", "/v1/federation/hosts", nil, nil), 404, adp.CodeNotFound)
	want(do("listFederationConflicts", "GET", "/v1/federation/conflicts", nil, nil), 404, adp.CodeNotFound)
	want(do("getMirrors", "GET", "/v1/mirrors", nil, nil), 404, adp.CodeNotFound)
	want(do("getMirroredRoom", "GET", "/v1/mirrors/rooms/"+id, nil, nil), 404, adp.CodeNotFound)

	// The web viewer.
	r = do("getViewer", "GET", "/", nil, nil)
	want(r, 200, "")
	want(do("getViewer", "GET", "/", nil, nil, "If-None-Match", r.Header.Get("ETag")), 304, "")
	want(do("getViewerAsset", "GET", "/ui/app.js", nil, nil), 200, "")
	want(do("getViewerAsset", "GET", "/ui/style.css", nil, nil), 200, "")
	want(do("getViewerAsset", "GET", "/ui/nope.js", nil, nil), 404, adp.CodeNotFound)
	r = send("createViewerToken", "POST", "/v1/viewer-tokens", nil, jsonBody(map[string]any{"room_id": id}))
	want(r, 201, "")
	vt := decode[struct{ Token string }](t, r).Token
	want(do("createViewerToken", "POST", "/v1/viewer-tokens", nil, jsonBody(map[string]any{"room_id": "aaaaaaaaaaaaaaaaaaaa"})), 404, adp.CodeRoomNotFound)
	view, ans := oaStream(t, h.URL+"/v1/rooms/"+id+"/events/view?token="+vt, "")
	if view == nil {
		t.Fatalf("viewer stream: %s", short(ans))
	}
	spec.checkStream(t, "streamViewerEvents", ans)
	h.MustPost(t, alice, id, "message.create", msg("viewed"))
	spec.checkEvent(t, "streamViewerEvents", view.mustNext("room.event"))
	want(do("streamViewerEvents", "GET", "/v1/rooms/"+id+"/events/view?token=bad", nil, nil), 401, adp.CodeInvalidToken)

	// Archives: unavailable until the room ends, then all three forms.
	want(do("getArchive", "GET", "/v1/rooms/"+id+"/archive", nil, nil), 409, "archive_unavailable")
	h.Clock.Advance(21 * time.Minute)
	want(do("getRoom", "GET", "/v1/rooms/"+id, nil, nil), 200, "")
	want(do("getArchive", "GET", "/v1/rooms/"+id+"/archive", nil, nil), 200, "")
	want(do("getArchiveJSONL", "GET", "/v1/rooms/"+id+"/archive.jsonl", nil, nil), 200, "")
	want(do("getArchiveMarkdown", "GET", "/v1/rooms/"+id+"/archive.md", nil, nil), 200, "")
	want(do("submitEvent", "POST", "/v1/rooms/"+id, nil,
		alice.Envelope(now(), "message.create", id, head.Seq, head.Hash, msg("late"))), 409, "")

	// Metrics (a server with metrics).
	w := httptest.NewRecorder()
	fullServer(t).Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	spec.check(t, "getMetrics", &adptest.Response{Status: w.Code, Header: w.Header(), Body: w.Body.Bytes()})
}

// TestOpenAPIFederatedConformance validates the federation, relay and
// mirror answers on two federated peers, B mirroring A.
func TestOpenAPIFederatedConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts libp2p peers")
	}
	spec := loadSpec(t)
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: highRates(), Mirror: true})
	a, b := peers[0], peers[1]
	alice := adptest.NewAgent("alice")
	do := func(opID, method, url string, body []byte) *adptest.Response {
		t.Helper()
		tok := ""
		if method != http.MethodGet { // operator endpoints: POST and DELETE /v1/mirrors…
			tok = b.OperatorToken
		}
		r := oaDo(t, method, url, tok, body)
		spec.check(t, opID, r)
		return r
	}
	want := func(r *adptest.Response, status int, code adp.Code) {
		t.Helper()
		if r.Status != status || code != "" && r.ErrorCode() != string(code) {
			t.Fatalf("want %d %s, got %s", status, code, short(r))
		}
	}

	want(oaDo(t, "POST", b.URL+"/v1/mirrors", "", []byte(`{"kind":"all"}`)), 403, adp.CodePermissionDenied)
	target := []byte(`{"kind":"all"}`)
	spec.checkRequest(t, "addMirrorTarget", target)
	want(do("addMirrorTarget", "POST", b.URL+"/v1/mirrors", target), 201, "")
	want(do("addMirrorTarget", "POST", b.URL+"/v1/mirrors", []byte(`{"kind":"planet"}`)), 400, adp.CodeInvalidRequest)
	want(do("getDiscovery", "GET", a.URL+"/.well-known/agent-discourse", nil), 200, "")

	now := a.Clock.Ms()
	create := alice.Envelope(now, "room.create", "", 0, "", roomPayload("public", now, 15*time.Minute))
	r := do("createRoom", "POST", a.URL+"/v1/rooms", create)
	want(r, 201, "")
	id := decode[struct{ ID string }](t, r).ID
	testwait.Until(t, 10*time.Second, "B lists A's room", func() bool {
		list, _, _ := directory.Page(b.Fed.Directory(), directory.Query{Limit: 100})
		return slices.ContainsFunc(list, func(s directory.Entry) bool { return s.ID == id })
	})
	want(do("listPublicRooms", "GET", b.URL+"/v1/rooms/public", nil), 200, "")

	// A write relayed through B: the host's answer plus X-ADP-Relayed.
	head, _ := a.Node.Room(id, "")
	env := alice.Envelope(a.Clock.Ms(), "message.create", id, head.Head.Seq, head.Head.Hash, msg("via B"))
	r = do("submitEvent", "POST", b.URL+"/v1/rooms/"+id, env)
	want(r, 201, "")
	if r.Header.Get("X-ADP-Relayed") != "true" {
		t.Fatalf("relayed write without X-ADP-Relayed: %v", r.Header)
	}
	want(do("submitEvent", "POST", b.URL+"/v1/rooms/"+id, alice.Envelope(a.Clock.Ms(), "message.create", id,
		head.Head.Seq, head.Head.Hash, msg("stale"))), 409, adp.CodeRoomHeadMismatch)

	testwait.Until(t, 10*time.Second, "B verified the room", func() bool {
		mr, ok := b.Mir.Room(id, "")
		return ok && mr.Tip() == 2
	})
	live, ans := oaStream(t, b.URL+"/v1/mirrors/rooms/"+id+"/events/live", "")
	if live == nil {
		t.Fatalf("mirror live: %s", short(ans))
	}
	spec.checkStream(t, "streamMirroredEvents", ans)
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("mirrored live"))
	spec.checkEvent(t, "streamMirroredEvents", live.mustNext("room.event"))

	want(do("getMirrors", "GET", b.URL+"/v1/mirrors", nil), 200, "")
	want(do("getMirroredRoom", "GET", b.URL+"/v1/mirrors/rooms/"+id, nil), 200, "")
	want(do("getMirroredRoom", "GET", b.URL+"/v1/mirrors/rooms/"+id+"?host="+string(a.Fed.Binding().Key), nil), 200, "")
	want(do("getMirroredRoom", "GET", b.URL+"/v1/mirrors/rooms/aaaaaaaaaaaaaaaaaaaa", nil), 404, adp.CodeRoomNotFound)
	want(do("listMirroredEvents", "GET", b.URL+"/v1/mirrors/rooms/"+id+"/events?limit=1", nil), 200, "")
	want(do("listMirrorEvidence", "GET", b.URL+"/v1/mirrors/evidence", nil), 200, "")
	want(do("getMirroredArchive", "GET", b.URL+"/v1/mirrors/rooms/"+id+"/archive", nil), 409, "archive_unavailable")
	want(do("listFederationPeers", "GET", b.URL+"/v1/federation/peers", nil), 200, "")
	testwait.Until(t, 10*time.Second, "B knows A as a host", func() bool { return len(b.Fed.KnownHosts()) > 0 })
	want(do("listFederationHosts", "GET", b.URL+"/v1/federation/hosts", nil), 200, "")
	want(do("listFederationConflicts", "GET", b.URL+"/v1/federation/conflicts", nil), 200, "")
	r = do("getMetrics", "GET", a.URL+"/metrics", nil)
	want(r, 200, "")

	// Once the room has ended, the mirror serves its archive.
	a.Clock.Advance(16 * time.Minute)
	want(do("getArchive", "GET", a.URL+"/v1/rooms/"+id+"/archive", nil), 200, "")
	want(do("getMirroredArchive", "GET", b.URL+"/v1/mirrors/rooms/"+id+"/archive", nil), 200, "")
	want(do("getMirroredArchiveJSONL", "GET", b.URL+"/v1/mirrors/rooms/"+id+"/archive.jsonl", nil), 200, "")

	want(do("removeMirrorTarget", "DELETE", b.URL+"/v1/mirrors/targets/"+mirror.TargetAll+":", nil), 204, "")
	want(do("removeMirrorTarget", "DELETE", b.URL+"/v1/mirrors/targets/tag:none?purge=true", nil), 404, adp.CodeNotFound)
}
