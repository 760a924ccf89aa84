package room

import (
	"bytes"
	"errors"
	"testing"

	"github.com/adpnode/adpnode/adp/types"
)

type onePack struct {
	uri string
	raw []byte
}

func (p onePack) ExternalPack(uri, _ string) ([]byte, error) {
	if uri != p.uri {
		return nil, errors.New("unknown pack")
	}
	return p.raw, nil
}

// TestSnapshotKeepsExternalPackBytes: an external pack's document is kept
// byte for byte through Encode and Decode — its digest is over the raw
// bytes, so an archive built from a restored state must still verify.
// (Whitespace and member order are the pack author's, not ours.)
func TestSnapshotKeepsExternalPackBytes(t *testing.T) {
	raw := []byte("{\n  \"id\": \"ext:notes/1.0\",\n  \"title\": \"Notes\",\n  \"types\": [\n    {\"type\": \"note.add\", \"kind\": \"message\", \"title\": \"Note\",\n     \"schema\": {\"type\": \"object\"}}\n  ]\n}\n")
	uri := "https://packs.example/notes.json"
	h := newHarness(t)
	h.st.SetPackSource(onePack{uri, raw})
	h.create("public", map[string]any{"types": []any{map[string]any{"pack": uri, "digest": types.Digest(raw)}}})
	h.join("alice", "speaker")
	h.must("alice", "note.add", map[string]any{"text": "kept"})
	back, err := Decode(Config{Limits: DefaultLimits(), History: h.st.hist}, h.st.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Imports) != 1 || !bytes.Equal(back.Imports[0].Raw, raw) {
		t.Fatalf("external pack bytes changed through a snapshot:\n%q\n%q", raw, back.Imports[0].Raw)
	}
	if !bytes.Equal(back.Snapshot(), h.st.Snapshot()) {
		t.Fatal("decoded state differs")
	}
	// The restored registry still validates the external type's payloads.
	h.st = back
	h.must("alice", "note.add", map[string]any{"text": "after restore"})
}
