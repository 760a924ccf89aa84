package settings

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

var table = Table{
	{Key: "name", Flag: "name", Kind: String, Default: "x", Help: "A name."},
	{Key: "count", Flag: "count", Kind: Int, Default: "4", ZeroIsDefault: true, Validate: AtLeast(1), Help: "A count."},
	{Key: "box", Kind: Group, Help: "A group."},
	{Key: "box.on", Flag: "no-box", Invert: true, Kind: Bool, Default: "true", Help: "On."},
	{Key: "box.every", Kind: Duration, Default: "30s", Validate: PositiveDuration, Help: "How often."},
	{Key: "box.size", Kind: Size, Default: "1MiB", Help: "How big."},
	{Key: "box.items", Flag: "item", Kind: List, Default: "a,b", Help: "Items."},
}

func resolve(t *testing.T, args []string, env map[string]string, file string) (*Values, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	table.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return table.Resolve(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, []byte(file))
}

// Property: one declaration gives each kind its flag, variable and YAML
// form, with flag > environment > file > default, an inverted flag, and a
// written 0 standing for the default where the setting says so.
func TestResolveKinds(t *testing.T) {
	v, err := resolve(t, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.String("name") != "x" || v.Int("count") != 4 || !v.Bool("box.on") || v.Duration("box.every") != 30*time.Second ||
		v.Size("box.size") != 1<<20 || strings.Join(v.List("box.items"), ",") != "a,b" || v.Given("name") {
		t.Fatalf("defaults: %+v", v.m)
	}
	file := "name: file\ncount: 0\nbox:\n  on: true\n  every: 1m\n  size: 2KiB\n  items: [c]\n"
	v, err = resolve(t, []string{"--no-box", "--item", "d", "--item", "e"}, map[string]string{"ADPNODE_NAME": "env", "ADPNODE_BOX_SIZE": "3"}, file)
	if err != nil {
		t.Fatal(err)
	}
	if v.String("name") != "env" || v.Get("name").Source != FromEnv || v.Int("count") != 4 || v.Bool("box.on") ||
		v.Duration("box.every") != time.Minute || v.Size("box.size") != 3 || strings.Join(v.List("box.items"), ",") != "d,e" {
		t.Fatalf("resolved: name %v count %v on %v every %v size %v items %v", v.String("name"), v.Int("count"), v.Bool("box.on"),
			v.Duration("box.every"), v.Size("box.size"), v.List("box.items"))
	}
	if u := v.Unread(); len(u) != 0 {
		t.Fatalf("unread %v", u)
	}
	if _, err := resolve(t, nil, map[string]string{"ADPNODE_ITEM": "p,q"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(t, nil, nil, "count: -2\n"); err == nil || err.Error() != "count: must be ≥ 1, got -2" {
		t.Fatalf("count -2: %v", err)
	}
}

// Property: the reference file is valid YAML that sets every setting to
// its default, and the document of effective values reads back the same.
func TestReferenceRoundTrip(t *testing.T) {
	ref := table.Reference("# head\n", "foot")
	v, err := resolve(t, nil, nil, string(ref))
	if err != nil {
		t.Fatal(err, string(ref))
	}
	for _, s := range table {
		if s.Kind != Group && v.Get(s.Key).Source != FromFile {
			t.Errorf("%s not in the reference file", s.Key)
		}
	}
	out, err := yaml.Marshal(table.Document(v))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(t, nil, nil, string(out)); err != nil {
		t.Fatalf("config check's document does not read back: %v\n%s", err, out)
	}
	if md := string(table.Markdown("")); !strings.Contains(md, "| `box.on` | `--no-box` (off) | `ADPNODE_NO_BOX` | boolean | `true` |") {
		t.Fatal(md)
	}
}
