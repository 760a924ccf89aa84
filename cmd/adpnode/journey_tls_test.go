//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Property: a node serving TLS with a self-signed certificate is usable
// from the CLI: --ca-cert FILE (global) makes every command that talks to
// a node trust it (agent commands, export, backup), SSL_CERT_FILE does the
// same for a fresh process, and without either the error says which to
// use. A --ca-cert that is not a certificate is a usage error.
func TestSelfSignedTLSNodeWithCACert(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	data := filepath.Join(dir, "data")
	s := startServe(t, nil, "--listen", freeAddr(t), "--data", data, "--no-federation", "--tls-cert", certFile, "--tls-key", keyFile)
	t.Cleanup(func() { s.close() })
	node := s.n.Origin()
	if !strings.HasPrefix(node, "https://127.0.0.1:") {
		t.Fatalf("public URL %s", node)
	}
	keys := t.TempDir()
	alice := filepath.Join(keys, "alice.key")
	mustCLI(t, "keygen", "--out", alice)

	errOut := wantExit(t, exitUnavailable, "pass --ca-cert FILE", "room", "create", "--node", node, "--key", alice, "--topic", "tls")
	if !strings.Contains(errOut, "SSL_CERT_FILE") || !strings.Contains(errOut, "certificate") {
		t.Fatalf("the TLS refusal does not say what to do: %s", errOut)
	}

	ca := []string{"--ca-cert", certFile}
	out := mustCLI(t, append([]string{"room", "create", "--node", node, "--key", alice, "--topic", "tls"}, ca...)...)
	id := strings.Fields(out)[0]
	mustCLI(t, append([]string{"post", id, "over TLS", "--node", node, "--key", alice}, ca...)...)
	if out := mustCLI(t, append([]string{"room", "show", id, "--node", node}, ca...)...); !strings.Contains(out, `"topic": "tls"`) {
		t.Fatalf("room show: %s", out)
	}
	mustCLI(t, append([]string{"room", "close", id, "--node", node, "--key", alice}, ca...)...)
	archive := filepath.Join(dir, "room.json")
	mustCLI(t, append([]string{"export", id, "--node", node, "--key", alice, "-o", archive}, ca...)...)
	mustCLI(t, "verify", archive)
	// backup finds the node through DATA/serve.url (its https public URL).
	_, _, errOut = cli(t, append([]string{"backup", "--data", data, "-o", filepath.Join(dir, "b.backup")}, ca...)...)
	if !strings.Contains(errOut, "from the running node "+node) {
		t.Fatalf("backup over TLS: %s", errOut)
	}
	wantExit(t, exitUnavailable, "pass --ca-cert FILE", "backup", "--data", data, "-o", filepath.Join(dir, "c.backup"))

	// Hostile or mistaken --ca-cert values.
	wantExit(t, exitUsage, "holds no PEM certificate", "room", "show", id, "--node", node, "--ca-cert", alice)
	wantExit(t, exitNotFound, "--ca-cert", "room", "show", id, "--node", node, "--ca-cert", filepath.Join(dir, "none.pem"))
	// The node's private key is no certificate either.
	wantExit(t, exitUsage, "holds no PEM certificate", "room", "show", id, "--node", node, "--ca-cert", keyFile)

	// SSL_CERT_FILE, read by a fresh process.
	bin := adpnodeBinary(t)
	cmd := exec.Command(bin, "room", "show", id, "--node", node)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+certFile, "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `"topic": "tls"`) {
		t.Fatalf("room show with SSL_CERT_FILE: %v\n%s", err, out)
	}
}
