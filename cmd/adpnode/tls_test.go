//go:build e2e

package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/adpnode/adpnode/hostapi"
	"github.com/adpnode/adpnode/internal/testwait"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to dir and returns their paths and a pool holding the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "adpnode test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// startServe resolves a serve command line as serve does and starts the
// node in-process (stopped in t.Cleanup unless the caller closes it).
func startServe(t *testing.T, log *slog.Logger, args ...string) *stack {
	t.Helper()
	cmd := serveCmd()
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	ss, err := resolveServe(cmd)
	if err != nil {
		t.Fatalf("resolveServe %q: %v", args, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ss.cfg.Log = log
	s, err := startStack(ss.cfg, ss.listen, ss.fed, log)
	if err != nil {
		t.Fatalf("start %q: %v", args, err)
	}
	return s
}

// Static TLS: HTTPS on --listen with the given certificate (TLS 1.2+),
// plain HTTP answered 400, old TLS versions refused, the connection cap
// in force (an idle TLS connection makes room, a busy one does not), and
// the same after a restart on the same data dir.
func TestServeStaticTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	data := filepath.Join(dir, "data")
	args := []string{"--listen", "127.0.0.1:0", "--data", data, "--no-federation", "--tls-cert", certFile, "--tls-key", keyFile,
		"--max-connections", "3"}
	for round := 0; round < 2; round++ {
		s := startServe(t, nil, args...)
		if !strings.HasPrefix(s.n.Origin(), "https://127.0.0.1:") {
			t.Errorf("public URL %q: want https derived from --listen", s.n.Origin())
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := hc.Get("https://" + s.addr + "/healthz")
		if err != nil {
			t.Fatalf("round %d: GET /healthz over TLS: %v", round, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "ok") {
			t.Fatalf("healthz over TLS: %d %s", resp.StatusCode, body)
		}
		if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 || resp.Proto != "HTTP/1.1" {
			t.Errorf("TLS state %+v proto %s", resp.TLS, resp.Proto)
		}
		hc.CloseIdleConnections()

		// Plain HTTP on the TLS port: Go's server answers 400.
		plain := &http.Client{Timeout: 10 * time.Second}
		resp, err = plain.Get("http://" + s.addr + "/healthz")
		if err != nil {
			t.Fatalf("plain HTTP: %v", err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
			t.Fatalf("plain HTTP to the TLS port: %d %q, want 400 naming HTTPS", resp.StatusCode, body)
		}

		// Hostile: TLS 1.1 is refused.
		c, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		if err == nil {
			c.Close()
			t.Fatal("TLS 1.1 handshake succeeded")
		}

		// Bound: the connection cap counts TLS connections like plain ones
		// and follows their state through TLS. The plain and TLS 1.1
		// connections above close on the server's side after their
		// answer: wait until the cap counts none of them.
		testwait.Until(t, 10*time.Second, "the condition", func() bool { return openConns(s) == 0 })
		dial := func() (*tls.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.addr, &tls.Config{RootCAs: pool})
		}
		get := func(c *tls.Conn) error {
			c.SetDeadline(time.Now().Add(10 * time.Second))
			defer c.SetDeadline(time.Time{})
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: adp\r\n\r\n"); err != nil {
				return err
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			return nil
		}
		var held []*tls.Conn
		for i := 0; i < 3; i++ {
			c, err := dial()
			if err == nil {
				err = get(c)
			}
			if err != nil {
				t.Fatalf("connection %d under the cap: %v", i, err)
			}
			held = append(held, c)
			// Idle in the order they were served: connection 0 has then
			// waited longest (a loaded server may mark a connection idle
			// well after its client read the response).
			testwait.Until(t, 10*time.Second, fmt.Sprintf("connection %d waits for its next request", i), func() bool {
				st, _ := hostapi.ListenerStats(s.ln)
				return st.Waiting == i+1
			})
		}
		testwait.Until(t, 10*time.Second, "the condition", func() bool { return openConns(s) == 3 })
		// All three idle: a fourth is served, and the longest-idle one is
		// closed to make room.
		extra, err := dial()
		if err == nil {
			err = get(extra)
		}
		if err != nil {
			t.Fatalf("a TLS connection at the cap with idle ones open: %v", err)
		}
		held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := held[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the longest-idle TLS connection was not closed to make room: %v", err)
		}
		held[0].Close()
		held = append(held[1:], extra)
		// All three busy (a request body arriving): one more is closed
		// before its handshake completes.
		for _, c := range held {
			io.WriteString(c, "POST /v1/rooms HTTP/1.1\r\nHost: adp\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		}
		testwait.Until(t, 10*time.Second, "the condition", func() bool {
			st, _ := hostapi.ListenerStats(s.ln)
			return st.Open == 3 && st.Waiting == 0
		})
		over, err := dial()
		if err == nil {
			over.Close()
			t.Fatal("a TLS connection over the cap completed its handshake")
		}
		for _, c := range held {
			c.Close()
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// openConns is the number of connections the stack's HTTP listener holds.
func openConns(s *stack) int { return hostapi.OpenConnections(s.ln) }

// Broken TLS settings are configuration errors (exit 2) that name the
// file or the conflicting settings.
func TestTLSSettingsRejected(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	other := t.TempDir()
	_, otherKey, _ := selfSigned(t, other)
	garbage := writeFile(t, "garbage.pem", "not a certificate\n")
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing cert", []string{"--tls-cert", missing, "--tls-key", keyFile}, missing},
		{"missing key", []string{"--tls-cert", certFile, "--tls-key", missing}, missing},
		{"mismatched key", []string{"--tls-cert", certFile, "--tls-key", otherKey}, otherKey},
		{"garbage cert", []string{"--tls-cert", garbage, "--tls-key", keyFile}, garbage},
		{"cert without key", []string{"--tls-cert", certFile}, "together"},
		{"acme and static", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--acme-domain", "node.example.org"}, "exclusive"},
		{"acme ip", []string{"--acme-domain", "127.0.0.1"}, "not a DNS name"},
		{"acme http directory", []string{"--acme-domain", "a.example.org", "--acme-directory", "http://ca.example/dir"}, "https"},
		{"acme email alone", []string{"--acme-email", "ops@example.org"}, "need acme_domains"},
		{"acme bad root", []string{"--acme-domain", "a.example.org", "--acme-ca-root", garbage}, garbage},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantExit(t, exitUsage, c.want, append([]string{"config", "check", "--no-federation"}, c.args...)...)
		})
	}
	// The same from the config file.
	file := writeFile(t, "tls.yaml", "listen: 127.0.0.1:8443\ndata: ./d\ntls_cert: "+missing+"\ntls_key: "+keyFile+"\n")
	wantExit(t, exitUsage, missing, "config", "check", "--config", file)
}

// config check shows the TLS mode and derives an https public URL.
func TestConfigCheckTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	var eff struct {
		PublicURL string         `yaml:"public_url"`
		TLS       map[string]any `yaml:"tls"`
	}
	file := writeFile(t, "tls.yaml", "listen: 127.0.0.1:8443\ndata: ./d\ntls_cert: "+certFile+"\ntls_key: "+keyFile+"\n")
	if err := yaml.Unmarshal([]byte(mustCLI(t, "config", "check", "--config", file)), &eff); err != nil {
		t.Fatal(err)
	}
	if eff.PublicURL != "https://127.0.0.1:8443" || eff.TLS["mode"] != "static" || eff.TLS["cert"] != certFile {
		t.Errorf("static: %+v", eff)
	}
	out := mustCLI(t, "config", "check", "--listen", "0.0.0.0:443", "--acme-domain", "a.example.org,b.example.org",
		"--acme-domain", "c.example.org", "--acme-email", "ops@example.org")
	if err := yaml.Unmarshal([]byte(out), &eff); err != nil {
		t.Fatal(err)
	}
	if eff.PublicURL != "https://a.example.org" || eff.TLS["mode"] != "acme" || eff.TLS["directory"] != defaultACMEDirectory {
		t.Errorf("acme: %s", out)
	}
	if d, _ := eff.TLS["domains"].([]any); len(d) != 3 {
		t.Errorf("acme domains %v: want the comma list and the repeated flag", eff.TLS["domains"])
	}
	out = mustCLI(t, "config", "check", "--listen", "0.0.0.0:8443", "--acme-domain", "a.example.org")
	yaml.Unmarshal([]byte(out), &eff)
	if eff.PublicURL != "https://a.example.org:8443" {
		t.Errorf("acme on 8443: public_url %q", eff.PublicURL)
	}
	out = mustCLI(t, "config", "check")
	yaml.Unmarshal([]byte(out), &eff)
	if eff.TLS["mode"] != "off" || !strings.HasPrefix(eff.PublicURL, "http://") {
		t.Errorf("no TLS: %s", out)
	}
}
