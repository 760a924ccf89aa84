package types

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

type bundledSource map[string][]byte

func (s bundledSource) ExternalPack(uri, digest string) ([]byte, error) {
	return s[uri], nil
}

func TestBundledPacks(t *testing.T) {
	ps := BundledPacks()
	var ids []string
	for _, b := range ps {
		ids = append(ids, b.ID)
		if b.Digest != Digest(b.Raw) || !strings.HasSuffix(b.Name, ".json") || b.Pack == nil {
			t.Fatalf("bundled pack %s malformed: %+v", b.ID, b)
		}
		if strings.HasPrefix(b.ID, "adp:") {
			t.Fatalf("bundled pack %s in the registered namespace", b.ID)
		}
		if got, ok := BundledPackByDigest(b.Digest); !ok || got.ID != b.ID {
			t.Fatalf("by digest: %v %v", got.ID, ok)
		}
		if got, ok := BundledPackByName(b.Name); !ok || got.ID != b.ID {
			t.Fatalf("by name: %v %v", got.ID, ok)
		}
		// Imported as an external pack, with the default limits any host
		// applies, the declaration materializes every type of the pack.
		origin := "https://host.example"
		var decl json.RawMessage = b.Declaration(origin)
		defs, imp, err := ParseDeclaration(decl, bundledSource{b.URI(origin): b.Raw}, DefaultLimits())
		if err != nil {
			t.Fatalf("%s: %v", b.ID, err)
		}
		if imp.Pack != origin+"/v1/packs/"+b.Name || imp.Digest != b.Digest || len(defs) != len(b.Pack.Types) {
			t.Fatalf("%s: import %+v, %d defs", b.ID, imp, len(defs))
		}
		// A tampered copy is refused by its digest.
		bad := append([]byte(nil), b.Raw...)
		bad[len(bad)-2] ^= 1
		_, _, err = ParseDeclaration(decl, bundledSource{b.URI(origin): bad}, DefaultLimits())
		wantCode(t, err, adp.CodePackUnavailable, ReasonDigestMismatch)
	}
	if strings.Join(ids, " ") != "adpnode:coordination/1.0 adpnode:deal/1.0" {
		t.Fatalf("bundled ids %v", ids)
	}
	if b, _ := BundledPackByID("adpnode:deal/1.0"); b.Name != "adpnode-deal-1.0.json" {
		t.Fatalf("name %q", b.Name)
	}
	// Callers get copies: changing one does not change the bundled bytes.
	b, _ := BundledPackByID("adpnode:deal/1.0")
	b.Raw[0] = 'x'
	if b2, _ := BundledPackByID("adpnode:deal/1.0"); b2.Raw[0] != '{' {
		t.Fatal("bundled bytes shared with a caller")
	}
}

func bundledType(t *testing.T, name string) *Definition {
	t.Helper()
	for _, b := range BundledPacks() {
		if d, ok := b.Pack.Type(name); ok {
			return d
		}
	}
	t.Fatalf("no bundled type %s", name)
	return nil
}

func TestBundledSchemas(t *testing.T) {
	const h = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	sig := strings.Repeat("A", 86)
	many := make([]string, 17)
	for i := range many {
		many[i] = `{"id":"o` + string(rune('a'+i)) + `","title":"t"}`
	}
	cases := []struct {
		typ, payload string
		ok           bool
	}{
		{"round.turn", `{"type":"propose","text":"hi","goal":"g","options":[{"id":"a","title":"A","fields":{"price":10},"refs":["https://x.example/f.pdf"]}],"due":1900000000,"on_timeout":"cancel"}`, true},
		{"round.turn", `{"type":"accept","text":"ok","ref":"` + h + `","choice":"a"}`, true},
		{"round.turn", `{"type":"deliver","text":"here","ref":"` + h + `","options":[{"id":"d1","title":"D","review":{"verdict":"approve","score":90}}]}`, true},
		{"round.turn", `{"type":"propose","text":"hi"}`, false},                                                              // propose needs a goal
		{"round.turn", `{"type":"propose","text":"hi","goal":"g","ref":"` + h + `"}`, false},                                 // propose opens, refs nothing
		{"round.turn", `{"type":"accept","text":"ok"}`, false},                                                               // other turns name their round
		{"round.turn", `{"type":"rewind","text":"x","ref":"` + h + `"}`, false},                                              // unknown turn type
		{"round.turn", `{"type":"counter","text":"x","ref":"` + h + `","options":[` + strings.Join(many, ",") + `]}`, false}, // over maxItems
		{"round.turn", `{"type":"deliver","text":"x","ref":"` + h + `","options":[{"id":"d","title":"D","review":{"verdict":"maybe"}}]}`, false},
		{"round.turn", `{"type":"deliver","text":"x","ref":"` + h + `","options":[{"id":"d","title":"D","blob":"AAAA"}]}`, false}, // no inline files
		{"round.turn", `{"type":"cancel","text":"x","ref":"` + h + `","due":1.5}`, false},
		{"deal.receipt", `{"type":"adpnode.deal.receipt/1","partyA":"did:agent:` + h + `","partyB":"did:agent:` + h + `","termsHash":"` + h + `","context":"room","ref":"` + h + `","ts":1,"sigA":"` + sig + `","sigB":"` + sig + `"}`, true},
		{"deal.receipt", `{"type":"adpnode.deal.receipt/1","partyA":"did:agent:` + h + `","partyB":"did:agent:` + h + `","termsHash":"` + h + `","context":"room","ref":"` + h + `","ts":1,"sigA":"` + sig + `"}`, false},
		{"deal.receipt", `{"type":"adpnode.deal.receipt/1","partyA":"bob","partyB":"did:agent:` + h + `","termsHash":"` + h + `","context":"room","ref":"` + h + `","ts":1,"sigA":"` + sig + `","sigB":"` + sig + `"}`, false},
		{"deal.receipt", `{"type":"adpnode.deal.receipt/1","partyA":"did:agent:` + h + `","partyB":"did:agent:` + h + `","termsHash":"` + h + `","context":"room","ref":"` + h + `","ts":1,"sigA":"` + sig + `","sigB":"` + sig + `","terms":"secret"}`, false},
	}
	for i, c := range cases {
		err := bundledType(t, c.typ).ValidatePayload([]byte(c.payload))
		if (err == nil) != c.ok {
			t.Errorf("case %d (%s): ok=%v, err=%v", i, c.typ, c.ok, err)
		}
		if err != nil {
			wantCode(t, err, adp.CodePayloadSchemaViolation, "")
		}
	}
}
