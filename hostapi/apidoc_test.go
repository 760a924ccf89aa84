package hostapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateAPIDoc = flag.Bool("update", false, "rewrite docs/api.md from hostapi/openapi.json")

const apiDocPath = "../docs/api.md"

// renderAPIDoc renders the OpenAPI description as Markdown: the
// document's own description, then per tag a table of its operations and
// each operation's description and parameters, in the file's order.
func renderAPIDoc(raw []byte) ([]byte, error) {
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
		Tags []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tags"`
		Paths      orderedPaths `json:"paths"`
		Components struct {
			Parameters map[string]apiParam `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# HTTP API\n\n")
	b.WriteString("Generated from `hostapi/openapi.json`, which every node serves at `GET /openapi.json`\n")
	b.WriteString("(`go test ./hostapi -run TestAPIDoc -update`); a test keeps the file equal to the routes\n")
	b.WriteString("the server registers, and another this page equal to the file. Errors and their HTTP\n")
	b.WriteString("statuses: [errors.md](errors.md). Limits: [limits.md](limits.md).\n\n")
	b.WriteString(strings.TrimSpace(doc.Info.Description) + "\n")
	auth := func(sec []map[string][]string) string {
		var opt, jwt, viewer bool
		for _, s := range sec {
			if len(s) == 0 {
				opt = true
			}
			_, j := s["requestJWT"]
			_, v := s["viewerToken"]
			jwt, viewer = jwt || j, viewer || v
		}
		switch {
		case jwt && opt:
			return "optional JWT"
		case jwt:
			return "JWT"
		case viewer:
			return "viewer token"
		}
		return "–"
	}
	for _, tag := range doc.Tags {
		var ops []apiOp
		for _, p := range doc.Paths {
			for _, o := range p.ops {
				for _, t := range o.Tags {
					if t == tag.Name {
						ops = append(ops, o)
					}
				}
			}
		}
		if len(ops) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| Method | Path | Auth | What |\n| --- | --- | --- | --- |\n", tag.Name, tag.Description)
		for _, o := range ops {
			fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", o.method, o.path, auth(o.Security), o.Summary)
		}
		for _, o := range ops {
			fmt.Fprintf(&b, "\n### %s %s\n\n%s.", o.method, o.path, strings.TrimSuffix(o.Summary, "."))
			if d := strings.TrimSpace(o.Description); d != "" {
				fmt.Fprintf(&b, " %s", d)
			}
			b.WriteString("\n")
			var params []string
			for _, p := range o.Parameters {
				if p.Ref != "" {
					p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
				if p.Name == "" {
					continue
				}
				params = append(params, fmt.Sprintf("- `%s` (%s): %s", p.Name, p.In, strings.TrimSpace(p.Description)))
			}
			if len(params) > 0 {
				fmt.Fprintf(&b, "\n%s\n", strings.Join(params, "\n"))
			}
		}
	}
	return b.Bytes(), nil
}

type apiParam struct {
	Ref         string `json:"$ref"`
	Name        string `json:"name"`
	In          string `json:"in"`
	Description string `json:"description"`
}

type apiOp struct {
	method, path string
	Summary      string                `json:"summary"`
	Description  string                `json:"description"`
	Tags         []string              `json:"tags"`
	Security     []map[string][]string `json:"security"`
	Parameters   []apiParam            `json:"parameters"`
}

type apiPath struct {
	path string
	ops  []apiOp
}

// orderedPaths keeps the paths, and each path's methods, in file order.
type orderedPaths []apiPath

func (ps *orderedPaths) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		p := apiPath{path: tok.(string)}
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			return err
		}
		idec := json.NewDecoder(bytes.NewReader(item))
		if _, err := idec.Token(); err != nil {
			return err
		}
		for idec.More() {
			tok, err := idec.Token()
			if err != nil {
				return err
			}
			var o apiOp
			if err := idec.Decode(&o); err != nil {
				return err
			}
			switch m := tok.(string); m {
			case "get", "put", "post", "delete", "patch", "head", "options":
				o.method, o.path = strings.ToUpper(m), p.path
				p.ops = append(p.ops, o)
			}
		}
		*ps = append(*ps, p)
	}
	return nil
}

// Property: docs/api.md is what hostapi/openapi.json says, every
// operation included.
func TestAPIDoc(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderAPIDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	if *updateAPIDoc {
		if err := os.WriteFile(apiDocPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/api.md is not what hostapi/openapi.json generates; run go test ./hostapi -run TestAPIDoc -update")
	}
	var n int
	var paths orderedPaths
	var doc struct {
		Paths *orderedPaths `json:"paths"`
	}
	doc.Paths = &paths
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		for _, o := range p.ops {
			n++
			if !bytes.Contains(got, []byte("\n### "+o.method+" "+o.path+"\n")) {
				t.Errorf("docs/api.md lacks %s %s", o.method, o.path)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d operations read from openapi.json", n)
	}
}
