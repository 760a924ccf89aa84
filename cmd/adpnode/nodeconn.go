package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/client"
)

// How the commands reach a node: --node is checked once for every command
// that has it (before anything is read or sent), and --ca-cert adds a CA
// (or a self-signed certificate) to the system roots for every request the
// command makes to a node. Go's TLS also reads SSL_CERT_FILE and
// SSL_CERT_DIR for the system roots.

// nodeTransport is the transport of every request to a node in this run:
// nil for http.DefaultTransport, or one that also trusts --ca-cert. run
// resets it; the root command's PersistentPreRunE sets it.
var nodeTransport http.RoundTripper

// addNodeConnFlags adds the global flags of node connections.
func addNodeConnFlags(root *cobra.Command) {
	root.PersistentFlags().String("ca-cert", "", "PEM file of a CA or self-signed certificate to trust for HTTPS nodes, besides the system roots (also: SSL_CERT_FILE)")
}

// prepareNodeConn checks --node of the command being run and builds the
// transport for --ca-cert.
func prepareNodeConn(cmd *cobra.Command) error {
	// mcp takes a listen address too (publicOrigin).
	if f := cmd.Flags().Lookup("node"); f != nil && f.Changed && cmd.Name() != "mcp" {
		if err := checkNodeOrigin(f.Value.String()); err != nil {
			return err
		}
	}
	ca, _ := cmd.Flags().GetString("ca-cert")
	if ca == "" {
		return nil
	}
	tr, err := transportWithCA(ca)
	if err != nil {
		return err
	}
	nodeTransport = tr
	return nil
}

// checkNodeOrigin refuses a --node that is not an origin, naming the fix:
// a bare host:port is told the http:// it lacks.
func checkNodeOrigin(node string) error {
	u, err := url.Parse(node)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
		return nil
	}
	hostPort := strings.TrimSuffix(node, "/")
	if _, _, err := net.SplitHostPort(hostPort); err == nil && !strings.ContainsAny(hostPort, " /") {
		return usageErrorf("--node %q has no scheme: write --node http://%s (or https:// for a node serving TLS)", node, hostPort)
	}
	return usageErrorf("--node must be the node's origin, like http://127.0.0.1:8080 (got %q)", node)
}

// transportWithCA is http.DefaultTransport trusting the certificates in
// file besides the system roots.
func transportWithCA(file string) (*http.Transport, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--ca-cert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usageErrorf("--ca-cert %s holds no PEM certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// newClient is client.New on this run's node transport.
func newClient(origin string, key *client.Key) *client.Client {
	c := client.New(origin, key)
	if nodeTransport != nil {
		c.HTTP.Transport = nodeTransport
	}
	return c
}

// nodeHTTP is the HTTP client of plain requests to a node.
func nodeHTTP() *http.Client {
	if nodeTransport != nil {
		return &http.Client{Transport: nodeTransport}
	}
	return http.DefaultClient
}

// untrustedCert reports whether err is a TLS verification failure of the
// node's certificate (a self-signed or private CA's certificate).
func untrustedCert(err error) bool {
	var ua x509.UnknownAuthorityError
	var cv *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &cv)
}
