package optoken

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

// The token is created once (0600, 32 random bytes in base64url), read
// back unchanged after a "restart", and compared in constant time; a
// hostile token file (too short) is refused, and an empty real token
// matches nothing.
func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	tok, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
		t.Fatalf("token %q: %v", tok, err)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", err, st)
	}
	again, err := LoadOrCreate(dir)
	if err != nil || again != tok {
		t.Fatalf("second start: %q %v", again, err)
	}
	if !Equal(tok, tok) || Equal(tok+"x", tok) || Equal("", "") || Equal(tok, "") {
		t.Fatal("Equal")
	}
	bad := filepath.Join(dir, "bad.token")
	os.WriteFile(bad, []byte("short\n"), 0o600)
	if _, err := Read(bad); err == nil {
		t.Fatal("short token accepted")
	}
}
