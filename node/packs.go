package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/types"
)

// packFetcher fetches external type packs (§13.5, DECISIONS 11): HTTPS only,
// with a timeout and size cap, refusing loopback, private and link-local
// addresses at connect time (so DNS rebinding cannot slip past), verified
// against the digest over the raw bytes by the kernel, and cached by digest
// in Badger.
type packFetcher struct {
	cfg    PackFetchConfig
	db     *badger.DB
	client *http.Client
	mu     sync.Mutex
	cache  map[string][]byte // digest -> bytes
}

func newPackFetcher(cfg PackFetchConfig, db *badger.DB) *packFetcher {
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip := net.ParseIP(host)
			if ip == nil || !publicIP(ip) {
				return fmt.Errorf("refusing to fetch a pack from non-public address %s", host)
			}
			return nil
		}
	}
	tr := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxResponseHeaderBytes: 64 << 10,
		TLSHandshakeTimeout: cfg.Timeout, ResponseHeaderTimeout: cfg.Timeout}
	return &packFetcher{cfg: cfg, db: db, cache: map[string][]byte{},
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "https" && !cfg.AllowPrivate {
				return errors.New("redirect away from https")
			}
			return nil
		}}}
}

func publicIP(ip net.IP) bool {
	return !(ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast())
}

// fetch returns the pack bytes for uri pinned by digest, from the cache or
// the network. It does not check the digest: the kernel does, over exactly
// these bytes, before it materialises anything.
func (f *packFetcher) fetch(ctx context.Context, uri, digest string) ([]byte, error) {
	f.mu.Lock()
	b, ok := f.cache[digest]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	if b, err := f.stored(digest); err == nil {
		return b, nil
	}
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(f.cfg.AllowPrivate && u.Scheme == "http")) {
		return nil, fmt.Errorf("pack URI %q must be an https URL", uri)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("pack %s: HTTP %d", uri, resp.StatusCode)
	}
	b, err = io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > f.cfg.MaxBytes {
		return nil, fmt.Errorf("pack %s exceeds %d bytes", uri, f.cfg.MaxBytes)
	}
	return b, nil
}

// remember caches a pack whose digest the kernel verified.
func (f *packFetcher) remember(digest string, b []byte) error {
	f.mu.Lock()
	f.cache[digest] = b
	f.mu.Unlock()
	return f.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(pfxPack+digest), b) })
}

func (f *packFetcher) stored(digest string) ([]byte, error) {
	var out []byte
	err := f.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(pfxPack + digest))
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}

// storedSource serves only packs already cached: used by recovery, which
// must never depend on the network.
func (f *packFetcher) storedSource() packSource {
	return packSource{get: func(uri, digest string) ([]byte, error) { return f.stored(digest) }}
}

// packSource adapts a lookup function to types.PackSource.
type packSource struct {
	get func(uri, digest string) ([]byte, error)
}

func (p packSource) ExternalPack(uri, digest string) ([]byte, error) {
	if p.get == nil {
		return nil, errors.New("external packs unavailable")
	}
	return p.get(uri, digest)
}

// prefetch fetches every external pack a room.create or type.define payload
// declares, before any lock is taken, and returns a source serving them.
// Fetch failures become pack_unavailable.
func (f *packFetcher) prefetch(ctx context.Context, typ string, payload []byte) (packSource, map[string][]byte, error) {
	fetched := map[string][]byte{}
	var decls []json.RawMessage
	switch typ {
	case "room.create":
		var p struct {
			Types []json.RawMessage `json:"types"`
		}
		if json.Unmarshal(payload, &p) == nil {
			decls = p.Types
		}
	case "type.define":
		decls = []json.RawMessage{payload}
	}
	for _, d := range decls {
		var ref struct {
			Pack   *string `json:"pack"`
			Digest *string `json:"digest"`
		}
		if json.Unmarshal(d, &ref) != nil || ref.Pack == nil || ref.Digest == nil {
			continue
		}
		b, err := f.fetch(ctx, *ref.Pack, *ref.Digest)
		if err != nil {
			return packSource{}, nil, &adp.Error{Code: adp.CodePackUnavailable, Message: err.Error(), Data: map[string]any{"pack": *ref.Pack}}
		}
		fetched[*ref.Pack+"\x00"+*ref.Digest] = b
	}
	src := packSource{get: func(uri, digest string) ([]byte, error) {
		if b, ok := fetched[uri+"\x00"+digest]; ok {
			return b, nil
		}
		return f.stored(digest)
	}}
	return src, fetched, nil
}

var _ types.PackSource = packSource{}

// ExternalPacks returns a source that fetches external packs with this
// node's fetcher (HTTPS, SSRF guard, size cap, digest cache), for
// components that replay other hosts' rooms (mirrors). The kernel checks
// every digest.
func (n *Node) ExternalPacks() types.PackSource {
	return packSource{get: func(uri, digest string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Packs.Timeout)
		defer cancel()
		b, err := n.packs.fetch(ctx, uri, digest)
		if err == nil && types.VerifyDigest(digest, b) == nil {
			n.packs.remember(digest, b)
		}
		return b, err
	}}
}
