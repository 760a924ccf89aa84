// Package safehttp is the one outbound-HTTP guard against server-side
// request forgery: a dialer whose Control function refuses every address
// that is not globally reachable unicast (IANA IPv4 and IPv6
// special-purpose registries), checked at connect time, after DNS
// resolution, so a name that rebinds to 127.0.0.1 is refused too.
//
// Errors it returns to callers are generic; the raw dial or TLS error is
// logged, never meant for a client.
package safehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// blocked are the special-purpose prefixes refused as destinations.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		// IPv4 (RFC 6890 and the IANA IPv4 special-purpose registry).
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
		// IPv6 (the IANA IPv6 special-purpose registry).
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
		"2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

var (
	mapped = netip.MustParsePrefix("::ffff:0:0/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// Public reports whether a may be dialled: it is a valid unicast address
// outside every special-purpose range. An IPv4-mapped IPv6 address is
// judged by its IPv4 address, a 6to4 address (2002::/16) by the IPv4
// address it embeds.
func Public(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("")
	if a.Is4In6() || mapped.Contains(a) {
		a = a.Unmap()
	}
	if a.Is6() && sixTo4.Contains(a) {
		b := a.As16()
		if !Public(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})) {
			return false
		}
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// ErrRefused is returned (wrapped) when a destination is not public.
var ErrRefused = errors.New("destination address is not public")

// Control is a net.Dialer Control function refusing non-public addresses.
func Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address", ErrRefused)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrRefused, ap.Addr())
	}
	return nil
}

// Options configure a Client.
type Options struct {
	// Timeout bounds the whole request (dial, TLS, headers, body).
	Timeout time.Duration
	// AllowPrivate disables the address guard (tests and closed networks).
	AllowPrivate bool
	// CheckRedirect is the client's redirect policy (nil: no redirects
	// are followed; the 3xx answer is returned).
	CheckRedirect func(req *http.Request, via []*http.Request) error
	// MaxResponseHeaderBytes caps response headers (default 64 KiB).
	MaxResponseHeaderBytes int64
}

// Dialer returns a dialer with the guard (unless allowPrivate).
func Dialer(timeout time.Duration, allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		d.Control = Control
	}
	return d
}

// Client returns an http.Client that dials only public addresses, uses no
// proxy from the environment and bounds every phase by o.Timeout.
func Client(o Options) *http.Client {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxResponseHeaderBytes == 0 {
		o.MaxResponseHeaderBytes = 64 << 10
	}
	if o.CheckRedirect == nil {
		o.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	d := Dialer(o.Timeout, o.AllowPrivate)
	tr := &http.Transport{DialContext: d.DialContext, Proxy: nil, MaxResponseHeaderBytes: o.MaxResponseHeaderBytes,
		TLSHandshakeTimeout: o.Timeout, ResponseHeaderTimeout: o.Timeout, IdleConnTimeout: 30 * time.Second,
		MaxIdleConnsPerHost: 2, ForceAttemptHTTP2: true}
	return &http.Client{Transport: tr, Timeout: o.Timeout, CheckRedirect: o.CheckRedirect}
}

// Public error messages: what a client may be told about a failed fetch.
const (
	MsgRefused     = "the address is not allowed (not a public address)"
	MsgUnreachable = "could not be fetched (unreachable, timed out or refused)"
)

// Describe maps a fetch error to a generic message for clients, logging
// the raw error (which may name internal addresses or TLS details) at
// debug level under what.
func Describe(log *slog.Logger, what string, err error) string {
	if log != nil {
		log.Debug("outbound fetch failed", "what", what, "err", err)
	}
	if errors.Is(err, ErrRefused) {
		return MsgRefused
	}
	if errors.Is(err, context.Canceled) {
		return "the request was cancelled"
	}
	return MsgUnreachable
}
