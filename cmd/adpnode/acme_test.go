//go:build e2e

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/testwait"
)

// pebbleServer is a running letsencrypt/pebble ACME server.
type pebbleServer struct {
	directory string       // https://127.0.0.1:PORT/dir
	mgmt      string       // https://127.0.0.1:PORT (management API)
	minica    string       // PEM file of the root of pebble's own HTTPS certificate
	client    *http.Client // trusts minica
	cmd       *exec.Cmd
	done      chan struct{}
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startPebble builds pebble from internal/testtools/pebble (its own
// module, so pebble stays out of the daemon's go.mod) and runs it on
// 127.0.0.1 with validation always succeeding.
func startPebble(t *testing.T) *pebbleServer {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build pebble")
	}
	modDir, err := filepath.Abs("../../internal/testtools/pebble")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	dir := t.TempDir()
	bin := filepath.Join(dir, "pebble")
	build := exec.Command(goBin, "build", "-o", bin, "github.com/letsencrypt/pebble/v2/cmd/pebble")
	build.Dir, build.Env = modDir, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build pebble: %v\n%s", err, out)
	}
	list := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", "github.com/letsencrypt/pebble/v2")
	list.Dir, list.Env = modDir, env
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list pebble: %v", err)
	}
	src := strings.TrimSpace(string(out))
	certs := filepath.Join(src, "test", "certs")
	port, mport := freePort(t), freePort(t)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", port),
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", mport),
		"certificate":                    filepath.Join(certs, "localhost", "cert.pem"),
		"privateKey":                     filepath.Join(certs, "localhost", "key.pem"),
		"httpPort":                       freePort(t),
		"tlsPort":                        freePort(t),
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
		"keyAlgorithm":                   "ecdsa",
		"profiles":                       map[string]any{"default": map[string]any{"description": "test", "validityPeriod": 7776000}},
	}}
	b, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pebbleServer{directory: fmt.Sprintf("https://127.0.0.1:%d/dir", port), mgmt: fmt.Sprintf("https://127.0.0.1:%d", mport),
		minica: filepath.Join(certs, "pebble.minica.pem"), done: make(chan struct{})}
	pem, err := os.ReadFile(p.minica)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var logBuf bytes.Buffer
	p.cmd = exec.Command(bin, "-config", cfgFile)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	p.cmd.Stdout, p.cmd.Stderr = &logBuf, &logBuf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("pebble log:\n%s", logBuf.String())
		}
	})
	testwait.Until(t, 60*time.Second, "pebble serving its directory", func() bool {
		resp, err := p.client.Get(p.directory)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		select {
		case <-p.done:
			t.Fatalf("pebble exited: %s", logBuf.String())
		default:
		}
		return false
	})
	return p
}

// stop kills pebble and waits for it to exit.
func (p *pebbleServer) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
}

// root fetches pebble's issuing root from its management API.
func (p *pebbleServer) root(t *testing.T) *x509.CertPool {
	t.Helper()
	resp, err := p.client.Get(p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if resp.StatusCode != 200 || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble root: %d %s", resp.StatusCode, b)
	}
	return pool
}

// servedCert connects to addr with SNI name, verifies the chain against
// roots and returns the leaf.
func servedCert(addr, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 90 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// ACME against a real local ACME server (pebble): the node obtains a
// certificate for its domain over tls-alpn-01 on --listen, serves it, keeps
// it in DATA/acme (0700), and after a restart serves the cached
// certificate with the ACME server gone. A name outside --acme-domain gets
// no certificate.
func TestServeACMEWithPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pebble")
	}
	peb := startPebble(t)
	roots := peb.root(t)
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"--listen", "127.0.0.1:0", "--data", data, "--no-federation", "--acme-domain", "node.test",
		"--acme-directory", peb.directory, "--acme-ca-root", peb.minica, "--acme-http", "127.0.0.1:0"}
	s := startServe(t, nil, args...)
	_, port, _ := net.SplitHostPort(s.addr)
	if s.n.Origin() != "https://node.test:"+port { // listen's port, chosen at start
		t.Errorf("public URL %q, listening on %s", s.n.Origin(), s.addr)
	}
	start := time.Now()
	leaf, err := servedCert(s.addr, "node.test", roots)
	if err != nil {
		s.close()
		t.Fatalf("TLS with SNI node.test: %v", err)
	}
	t.Logf("certificate issued and served in %v", time.Since(start).Round(time.Millisecond))
	if leaf.VerifyHostname("node.test") != nil {
		t.Errorf("leaf names %v", leaf.DNSNames)
	}
	// HTTP over the ACME certificate works.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "node.test", RootCAs: roots},
	}}
	resp, err := hc.Get("https://" + s.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hc.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Errorf("healthz %d", resp.StatusCode)
	}
	// The http-01 server answers only challenges; anything else is
	// redirected to https.
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.challengeAddr+"/healthz", nil)
	req.Host = "node.test"
	if resp, err := noRedirect.Do(req); err != nil {
		t.Errorf("http-01 server: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode/100 != 3 || !strings.HasPrefix(resp.Header.Get("Location"), "https://node.test") {
			t.Errorf("http-01 server on a plain request: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// Hostile: a name the node was not configured for gets nothing, and
	// does not make the node ask the CA.
	if _, err := servedCert(s.addr, "evil.test", roots); err == nil {
		t.Error("served a certificate for a name outside --acme-domain")
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(data, "acme"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("acme cache dir: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(data, "acme", "node.test")); err != nil {
		t.Fatalf("cached certificate: %v", err)
	}

	// Restart without the ACME server: the cached certificate is served.
	peb.stop()
	s = startServe(t, nil, args...)
	defer s.close()
	again, err := servedCert(s.addr, "node.test", roots)
	if err != nil {
		t.Fatalf("after restart without pebble: %v", err)
	}
	if !bytes.Equal(again.Raw, leaf.Raw) {
		t.Fatal("after restart the node served another certificate than the cached one")
	}
}
