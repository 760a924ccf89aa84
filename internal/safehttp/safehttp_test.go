package safehttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/internal/testwait"
)

func TestPublicTable(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.255.0.1",
		"169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.88.99.1",
		"192.168.1.1", "198.18.0.1", "198.19.255.255", "198.51.100.7", "203.0.113.9", "224.0.0.1",
		"239.255.255.250", "240.0.0.1", "255.255.255.254", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254",
		"64:ff9b::a00:1", "64:ff9b::808:808", "64:ff9b:1::1", "100::1", "2001::1", "2001:1ff::1",
		"2001:db8::1", "2002:7f00:1::1", "2002:a00:1::", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0",
		"ff02::1", "ff05::2",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
		"192.0.1.1", "198.17.255.255", "198.20.0.0", "223.255.255.255", "::ffff:8.8.8.8",
		"2001:4860:4860::8888", "2606:4700::1111", "2002:808:808::1", "2001:200::1",
	}
	for _, s := range refused {
		if Public(netip.MustParseAddr(s)) {
			t.Errorf("%s: allowed, want refused", s)
		}
	}
	for _, s := range allowed {
		if !Public(netip.MustParseAddr(s)) {
			t.Errorf("%s: refused, want allowed", s)
		}
	}
	if Public(netip.Addr{}) {
		t.Error("the zero address is allowed")
	}
	if err := Control("tcp", "not an address", nil); !errors.Is(err, ErrRefused) {
		t.Errorf("unparsable address: %v", err)
	}
}

// A server on 127.0.0.1 is never dialled: the guard refuses after
// resolution (here "localhost" resolves to loopback), with a generic
// message, promptly and without leaking goroutines.
func TestClientRefusesLoopbackAfterResolution(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c := Client(Options{Timeout: 2 * time.Second})
	before := runtime.NumGoroutine()
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
		_, err := c.Do(req)
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("%s: err = %v, want ErrRefused", u, err)
		}
		msg := Describe(nil, "test", err)
		if msg != MsgRefused || strings.Contains(msg, "127.0.0.1") {
			t.Fatalf("message %q leaks or is not generic", msg)
		}
	}
	if hits != 0 {
		t.Fatalf("the loopback server was reached %d times", hits)
	}
	c.CloseIdleConnections()
	testwait.Goroutines(t, 20*time.Second, "the client's goroutines gone", before+2)
	// The operator's switch lets a closed deployment reach it.
	open := Client(Options{Timeout: 2 * time.Second, AllowPrivate: true})
	resp, err := open.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits != 1 {
		t.Fatalf("hits = %d with AllowPrivate", hits)
	}
}

func TestDescribeUnreachable(t *testing.T) {
	if got := Describe(nil, "x", errors.New("dial tcp 10.0.0.1:443: tls: bad certificate")); got != MsgUnreachable {
		t.Fatalf("got %q", got)
	}
}
