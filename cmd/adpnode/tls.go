package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/adpnode/adpnode/hostapi"
)

// defaultACMEDirectory is Let's Encrypt's production directory.
const defaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"

// tlsSettings choose how serve terminates TLS: not at all (plain HTTP,
// e.g. behind a proxy), with a static certificate, or with certificates
// obtained over ACME.
type tlsSettings struct {
	certFile, keyFile string
	cert              *tls.Certificate // loaded by resolveServe

	acmeDomains   []string
	acmeEmail     string
	acmeDirectory string
	acmeCARoot    string
	acmeRoots     *x509.CertPool // nil: the system roots
	acmeHTTP      string         // http-01 listen address; "" for tls-alpn-01 only
}

// enabled reports whether serve terminates TLS.
func (t tlsSettings) enabled() bool { return t.cert != nil || len(t.acmeDomains) > 0 }

// mode names the TLS mode for config check.
func (t tlsSettings) mode() string {
	switch {
	case t.cert != nil:
		return "static"
	case len(t.acmeDomains) > 0:
		return "acme"
	}
	return "off"
}

// resolveTLS validates the TLS settings and loads a static certificate,
// so that a missing, unreadable or mismatched file is a configuration
// error naming the file.
func resolveTLS(t tlsSettings) (tlsSettings, error) {
	var domains []string
	for _, d := range t.acmeDomains {
		for _, p := range strings.Split(d, ",") {
			if p = strings.TrimSpace(p); p != "" {
				domains = append(domains, strings.ToLower(p))
			}
		}
	}
	t.acmeDomains = domains
	static := t.certFile != "" || t.keyFile != ""
	if static && len(domains) > 0 {
		return t, fmt.Errorf("acme_domains and tls_cert/tls_key are exclusive: choose a static certificate or ACME")
	}
	if !static && len(domains) == 0 {
		if t.acmeEmail != "" || t.acmeCARoot != "" || t.acmeHTTP != "" {
			return t, fmt.Errorf("acme_email, acme_ca_root and acme_http need acme_domains")
		}
		return t, nil
	}
	if static {
		if t.certFile == "" || t.keyFile == "" {
			return t, fmt.Errorf("tls_cert and tls_key must be given together")
		}
		certPEM, err := os.ReadFile(t.certFile)
		if err != nil {
			return t, fmt.Errorf("tls_cert: %w", err)
		}
		keyPEM, err := os.ReadFile(t.keyFile)
		if err != nil {
			return t, fmt.Errorf("tls_key: %w", err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return t, fmt.Errorf("tls_cert %s with tls_key %s: %w", t.certFile, t.keyFile, err)
		}
		t.cert = &c
		return t, nil
	}
	for _, d := range domains {
		if strings.ContainsAny(d, ":/ ") || !strings.Contains(d, ".") || net.ParseIP(d) != nil {
			return t, fmt.Errorf("acme_domains: %q is not a DNS name", d)
		}
	}
	if t.acmeDirectory == "" {
		t.acmeDirectory = defaultACMEDirectory
	}
	if u, err := url.Parse(t.acmeDirectory); err != nil || u.Scheme != "https" || u.Host == "" {
		return t, fmt.Errorf("acme_directory %q: want an https:// URL", t.acmeDirectory)
	}
	if t.acmeHTTP != "" {
		if _, _, err := net.SplitHostPort(t.acmeHTTP); err != nil {
			return t, fmt.Errorf("acme_http %q: %w", t.acmeHTTP, err)
		}
	}
	if t.acmeCARoot != "" {
		b, err := os.ReadFile(t.acmeCARoot)
		if err != nil {
			return t, fmt.Errorf("acme_ca_root: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(b) {
			return t, fmt.Errorf("acme_ca_root %s: no PEM certificate in it", t.acmeCARoot)
		}
		t.acmeRoots = pool
	}
	return t, nil
}

// defaultPublicURL is the origin clients reach when the operator did not
// name one: https://<first ACME domain> (with the port unless 443), or
// the listen address over https or http.
func (t tlsSettings) defaultPublicURL(listen string) string {
	if len(t.acmeDomains) > 0 {
		if _, port, err := net.SplitHostPort(listen); err == nil && port != "443" {
			return "https://" + net.JoinHostPort(t.acmeDomains[0], port)
		}
		return "https://" + t.acmeDomains[0]
	}
	if t.enabled() {
		return "https://" + listen
	}
	return "http://" + listen
}

// tlsServing is what startStack needs to serve HTTPS: the server's TLS
// configuration and, for ACME's http-01 challenge, a second server.
type tlsServing struct {
	config  *tls.Config
	httpSrv *http.Server
	httpLn  net.Listener
}

// setupTLS builds the TLS configuration of the node's server (TLS 1.2+,
// HTTP/1.1 only, so that the connection cap and the per-connection
// timeouts mean what they mean for plain HTTP) and, for ACME, the
// certificate manager with its cache in DATA/acme.
func setupTLS(t tlsSettings, dataDir string, httpOpts hostapi.HTTPOptions, log *slog.Logger) (*tlsServing, error) {
	if !t.enabled() {
		return nil, nil
	}
	ts := &tlsServing{}
	if t.cert != nil {
		ts.config = &tls.Config{Certificates: []tls.Certificate{*t.cert}}
	} else {
		dir := filepath.Join(dataDir, "acme")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("acme cache: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("acme cache: %w", err)
		}
		hc := &http.Client{Timeout: 60 * time.Second}
		if t.acmeRoots != nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: t.acmeRoots, MinVersion: tls.VersionTLS12}
			hc.Transport = tr
		}
		m := &autocert.Manager{
			Prompt:     autocert.AcceptTOS,
			Cache:      autocert.DirCache(dir),
			HostPolicy: autocert.HostWhitelist(t.acmeDomains...),
			Email:      t.acmeEmail,
			Client:     &acme.Client{DirectoryURL: t.acmeDirectory, HTTPClient: hc, UserAgent: "adpnode"},
		}
		ts.config = m.TLSConfig()
		ts.config.NextProtos = []string{"http/1.1", acme.ALPNProto}
		if t.acmeHTTP != "" {
			ln, err := net.Listen("tcp", t.acmeHTTP)
			if err != nil {
				return nil, fmt.Errorf("acme_http: %w", err)
			}
			ts.httpLn = hostapi.LimitListener(ln, httpOpts)
			ts.httpSrv = hostapi.NewHTTPServer(m.HTTPHandler(nil), httpOpts)
		}
		log.Info("acme", "domains", t.acmeDomains, "directory", t.acmeDirectory, "cache", dir, "http_01", t.acmeHTTP)
	}
	ts.config.MinVersion = tls.VersionTLS12
	return ts, nil
}

// disableHTTP2 keeps a TLS server on HTTP/1.1 (see setupTLS).
func disableHTTP2(srv *http.Server) {
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
}
