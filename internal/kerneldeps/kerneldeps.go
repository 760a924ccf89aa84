// Package kerneldeps holds the allowlist of what the protocol kernel (adp/...)
// may depend on, and lists packages with `go list` so tests can check it. It
// is used only by tests: the kernel's purity test and the check that the
// offline verifier links the kernel alone.
package kerneldeps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Module is this repository's module path.
const Module = "github.com/adpnode/adpnode"

// Kernel is the import path prefix of the kernel.
const Kernel = Module + "/adp"

// Std lists the standard library packages a kernel package may import
// directly. Nothing here does I/O except crypto/rand (key and nonce
// generation) and embed (the built-in pack, read at build time).
// crypto/ecdh, crypto/hpke and crypto/subtle are adp/seal's (member-only
// rooms: X25519 keys, HPKE epoch-key wraps, constant-time compares).
// unicode is adp/profile's (the character classes of a shown name).
var Std = []string{
	"bufio", "bytes", "crypto/ecdh", "crypto/ed25519", "crypto/hpke", "crypto/rand", "crypto/sha256", "crypto/sha3", "crypto/sha512", "crypto/subtle",
	"embed", "encoding/base64", "encoding/binary", "encoding/json", "errors", "fmt", "io", "math",
	"net/url", "regexp", "regexp/syntax", "slices", "sort", "strconv", "strings",
	"sync", "unicode", "unicode/utf8",
}

// Modules lists the third-party modules the kernel may use, each with all
// its packages.
var Modules = []string{
	"github.com/gowebpki/jcs",               // RFC 8785 canonical JSON
	"github.com/santhosh-tekuri/jsonschema", // payload schemas (Types §5)
	"golang.org/x/text",                     // jsonschema's messages
	"golang.org/x/crypto",                   // chacha20poly1305 (adp/seal)
	"golang.org/x/sys",                      // cpu feature detection for x/crypto's assembly; pure
	"golang.org/x/mod",                      // sumdb/note: C2SP signed notes (adp/tlogproof); pure
	"github.com/transparency-dev/merkle",    // RFC 6962 proof verification (adp/tlogproof); pure
	"filippo.io/edwards25519",               // Ed25519 verification with cached key decodes (adp/identity); pure
}

// Package is the part of `go list -json` output the checks read.
type Package struct {
	ImportPath string
	Standard   bool
	Module     *struct{ Path string }
	Imports    []string
	GoFiles    []string
	Dir        string
}

// IsKernel reports whether path is a kernel package.
func IsKernel(path string) bool { return path == Kernel || strings.HasPrefix(path, Kernel+"/") }

// InModules reports whether module path mod is on the Modules list.
func InModules(mod string) bool {
	for _, m := range Modules {
		if mod == m || strings.HasPrefix(mod, m+"/") {
			return true
		}
	}
	return false
}

// StdAllowed reports whether the standard library package path may be
// imported by a kernel package.
func StdAllowed(path string) bool {
	for _, s := range Std {
		if path == s {
			return true
		}
	}
	return false
}

// List runs `go list -json [flags] patterns` in dir and decodes the packages.
func List(dir string, args ...string) ([]Package, error) {
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}
