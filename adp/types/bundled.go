package types

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

//go:embed packs/adpnode-bundled.packs.json
var bundledPacksFile []byte

// BundledPackPath is the path under a host's origin where it serves each
// bundled pack document: <origin>/v1/packs/<name>.
const BundledPackPath = "/v1/packs/"

// BundledPack is a type pack adpnode ships beside the registered packs of
// the specification. The specification reserves "use" for its registered
// packs, so a room imports a bundled pack the standard external way (§13.5):
// {"pack": URI, "digest": Digest}, with URI any location serving Raw (this
// host's <origin>/v1/packs/<Name>). Any ADP host with external packs can
// fetch and check it; an adpnode host resolves it from its bundled copy by
// digest, without the network.
type BundledPack struct {
	ID     string // e.g. adpnode:coordination/1.0
	Name   string // the served file name, e.g. adpnode-coordination-1.0.json
	Digest string // "sha256:" digest of Raw
	Raw    []byte // the pack document: the compact JSON of the pack object
	Pack   *Pack
}

// URI returns the location origin serves the pack at.
func (b BundledPack) URI(origin string) string {
	return strings.TrimRight(origin, "/") + BundledPackPath + b.Name
}

// Declaration returns the type declaration importing the whole pack from
// origin: {"pack": URI, "digest": Digest}.
func (b BundledPack) Declaration(origin string) json.RawMessage {
	out, _ := json.Marshal(struct {
		Pack   string `json:"pack"`
		Digest string `json:"digest"`
	}{b.URI(origin), b.Digest})
	return out
}

type bundledSet struct {
	order    []BundledPack
	byDigest map[string]int
	byName   map[string]int
	byID     map[string]int
}

// bundled parses the embedded bundled packs once with the default host
// limits (a pack other hosts could not accept is a build defect: panic).
var bundled = sync.OnceValue(func() bundledSet {
	var file struct {
		Packs []json.RawMessage `json:"packs"`
	}
	if err := json.Unmarshal(bundledPacksFile, &file); err != nil {
		panic("types: embedded bundled packs file: " + err.Error())
	}
	s := bundledSet{byDigest: map[string]int{}, byName: map[string]int{}, byID: map[string]int{}}
	for i, raw := range file.Packs {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			panic(fmt.Sprintf("types: bundled pack %d: %v", i, err))
		}
		doc := buf.Bytes()
		name := bundledName(jsonID(doc))
		p, err := ParseExternalPack("bundled:"+name, Digest(doc), doc, DefaultLimits())
		if err != nil {
			panic(fmt.Sprintf("types: bundled pack %d: %v", i, err))
		}
		if _, ok := RegisteredPack(p.ID); ok || strings.HasPrefix(p.ID, "adp:") {
			panic("types: bundled pack id in the registered namespace: " + p.ID)
		}
		if _, dup := s.byID[p.ID]; dup {
			panic("types: bundled pack id repeated: " + p.ID)
		}
		b := BundledPack{ID: p.ID, Name: name, Digest: Digest(doc), Raw: doc, Pack: p}
		s.byID[b.ID] = len(s.order)
		s.byName[b.Name] = len(s.order)
		s.byDigest[b.Digest] = len(s.order)
		s.order = append(s.order, b)
	}
	return s
})

func jsonID(doc []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(doc, &v)
	return v.ID
}

// bundledName maps a pack id to its file name: adpnode:deal/1.0 becomes
// adpnode-deal-1.0.json.
func bundledName(id string) string {
	return strings.NewReplacer(":", "-", "/", "-").Replace(id) + ".json"
}

func clonePack(b BundledPack) BundledPack {
	b.Raw = bytes.Clone(b.Raw)
	return b
}

// BundledPacks returns the bundled packs in file order.
func BundledPacks() []BundledPack {
	out := make([]BundledPack, 0, len(bundled().order))
	for _, b := range bundled().order {
		out = append(out, clonePack(b))
	}
	return out
}

// BundledPackByID returns the bundled pack with the given id.
func BundledPackByID(id string) (BundledPack, bool) {
	s := bundled()
	i, ok := s.byID[id]
	if !ok {
		return BundledPack{}, false
	}
	return clonePack(s.order[i]), true
}

// BundledPackByName returns the bundled pack served under name.
func BundledPackByName(name string) (BundledPack, bool) {
	s := bundled()
	i, ok := s.byName[name]
	if !ok {
		return BundledPack{}, false
	}
	return clonePack(s.order[i]), true
}

// BundledPackByDigest returns the bundled pack document whose digest is
// digest ("sha256:..." as Digest writes it).
func BundledPackByDigest(digest string) (BundledPack, bool) {
	s := bundled()
	i, ok := s.byDigest[digest]
	if !ok {
		return BundledPack{}, false
	}
	return clonePack(s.order[i]), true
}
