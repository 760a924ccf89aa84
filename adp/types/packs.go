package types

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha3"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

//go:embed packs/agent-discourse-1.0.packs.json
var registeredPacksFile []byte

// Pack is a type pack (§13.5): a versioned collection of type definitions.
// Packs are immutable once built.
type Pack struct {
	ID          string
	Title       string
	Description string
	Types       []*Definition   // in document order; Definition.Pack is the registered id, or the URI of an external pack
	Raw         json.RawMessage // the pack document bytes (for the archive)
}

// Type returns the pack's definition of name.
func (p *Pack) Type(name string) (*Definition, bool) {
	for _, d := range p.Types {
		if d.Type == name {
			return d, true
		}
	}
	return nil, false
}

type registry struct {
	order []string
	packs map[string]*Pack
}

// registered parses the embedded packs file once. The file is part of the
// program, so a failure is a build defect and panics.
var registered = sync.OnceValue(func() registry {
	var file struct {
		Packs []json.RawMessage `json:"packs"`
	}
	if err := json.Unmarshal(registeredPacksFile, &file); err != nil {
		panic("types: embedded packs file: " + err.Error())
	}
	reg := registry{packs: map[string]*Pack{}}
	// Registered packs are part of the specification: they are not subject to
	// a host's schema size limit.
	lim := Limits{MaxSchemaBytes: 1 << 20, MaxTypes: DefaultMaxTypes}
	for i, raw := range file.Packs {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			panic(fmt.Sprintf("types: embedded pack %d: %v", i, err))
		}
		p, err := parsePack(buf.Bytes(), "", lim)
		if err != nil {
			panic(fmt.Sprintf("types: embedded pack %d: %v", i, err))
		}
		if _, dup := reg.packs[p.ID]; dup {
			panic("types: embedded pack id repeated: " + p.ID)
		}
		reg.order = append(reg.order, p.ID)
		reg.packs[p.ID] = p
	}
	return reg
})

// RegisteredPackIDs returns the ids of the registered packs in file order
// (adp:reactions/1.0, adp:deliberation/1.0, adp:curation/1.0,
// adp:moderation/1.0, adp:realtime/1.0).
func RegisteredPackIDs() []string {
	return append([]string(nil), registered().order...)
}

// RegisteredPack returns the registered pack with the given id.
func RegisteredPack(id string) (*Pack, bool) {
	p, ok := registered().packs[id]
	return p, ok
}

// RegisteredPacksDocument returns the embedded registered packs file
// (agent-discourse-1.0.packs.json) as shipped.
func RegisteredPacksDocument() []byte {
	return bytes.Clone(registeredPacksFile)
}

// ParseExternalPack verifies digest over raw (§13.5) and then parses raw as
// a single pack object {"id","title","description"?,"types":[definitions]}.
// A malformed or unsupported digest, or a mismatch, is pack_unavailable;
// invalid pack content is invalid_event. The definitions' Pack field is uri.
func ParseExternalPack(uri, digest string, raw []byte, lim Limits) (*Pack, error) {
	if err := VerifyDigest(digest, raw); err != nil {
		return nil, err
	}
	return parsePack(raw, uri, lim.norm())
}

// Supported digest algorithms, written "<alg>:<unpadded base64url digest>".
const (
	DigestSHA256  = "sha256"
	DigestSHA3256 = "sha3-256"
)

// VerifyDigest checks that digest ("sha256:..." or "sha3-256:...", canonical
// unpadded base64url) matches raw. Failures are pack_unavailable.
func VerifyDigest(digest string, raw []byte) error {
	alg, want, err := parseDigest(digest)
	if err != nil {
		return err
	}
	var got []byte
	switch alg {
	case DigestSHA256:
		s := sha256.Sum256(raw)
		got = s[:]
	case DigestSHA3256:
		s := sha3.Sum256(raw)
		got = s[:]
	}
	if !bytes.Equal(got, want) {
		return unavailable(ReasonDigestMismatch, "pack digest mismatch")
	}
	return nil
}

// Digest returns the "sha256:" digest of raw in the form packs are pinned by.
func Digest(raw []byte) string {
	s := sha256.Sum256(raw)
	return DigestSHA256 + ":" + base64.RawURLEncoding.EncodeToString(s[:])
}

func parseDigest(digest string) (alg string, sum []byte, err error) {
	alg, enc, ok := strings.Cut(digest, ":")
	if !ok || (alg != DigestSHA256 && alg != DigestSHA3256) {
		return "", nil, unavailable(ReasonBadDigest, "pack digest must be sha256:<base64url> or sha3-256:<base64url>")
	}
	sum, err = base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(sum) != 32 {
		return "", nil, unavailable(ReasonBadDigest, "pack digest is not an unpadded base64url 32-byte hash")
	}
	return alg, sum, nil
}

var packFields = set("id", "title", "description", "types")

// parsePack parses one pack object. source is "" for a registered pack (the
// definitions' Pack becomes the pack id) or the external pack URI.
func parsePack(raw []byte, source string, lim Limits) (*Pack, error) {
	members, err := objectMembers(raw, "type pack")
	if err != nil {
		return nil, err
	}
	p := &Pack{Raw: json.RawMessage(raw)}
	var typesRaw json.RawMessage
	have := map[string]bool{}
	for _, m := range members {
		if !packFields[m.Key] {
			return nil, invalid(ReasonUnknownField, m.Key, "unknown type pack member "+quote(m.Key))
		}
		have[m.Key] = true
		switch m.Key {
		case "id":
			if p.ID, err = jsonString(m.Value, "id"); err != nil {
				return nil, err
			}
			if p.ID == "" {
				return nil, invalid(ReasonBadField, "id", "pack id must not be empty")
			}
		case "title":
			if p.Title, err = jsonString(m.Value, "title"); err != nil {
				return nil, err
			}
		case "description":
			if p.Description, err = jsonString(m.Value, "description"); err != nil {
				return nil, err
			}
		case "types":
			typesRaw = m.Value
		}
	}
	for _, f := range []string{"id", "title", "types"} {
		if !have[f] {
			return nil, invalid(ReasonMissingField, f, "type pack lacks "+quote(f))
		}
	}
	var defs []json.RawMessage
	if typesRaw[0] != '[' || json.Unmarshal(typesRaw, &defs) != nil || len(defs) == 0 {
		return nil, invalid(ReasonBadField, "types", "pack types must be a non-empty array of type definitions")
	}
	origin := source
	if origin == "" {
		origin = p.ID
	}
	seen := map[string]bool{}
	for i, dr := range defs {
		d, err := ParseDefinition(dr, lim)
		if err != nil {
			return nil, withField(err, fmt.Sprintf("types[%d]", i))
		}
		if seen[d.Type] {
			return nil, invalid(ReasonDuplicateType, fmt.Sprintf("types[%d].type", i), "pack defines "+quote(d.Type)+" twice")
		}
		seen[d.Type] = true
		d.Pack = origin
		p.Types = append(p.Types, d)
	}
	return p, nil
}
