package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/internal/safehttp"
)

// packFetcher fetches external type packs (§13.5, DECISIONS 11): HTTPS only,
// with a timeout and size cap, refusing every non-public address at connect
// time through internal/safehttp (so DNS rebinding cannot slip past),
// verified against the digest over the raw bytes, and cached by digest in
// Badger. A failed fetch (unreachable, refused, digest mismatch) is
// remembered per URL and digest for FailureTTL so repeats do not dial
// again, and concurrent fetches of one URL and digest share one dial. A
// digest of one of the node's bundled packs (types.BundledPacks) is served
// from the bundled copy whatever the URI: the digest pins the bytes.
type packFetcher struct {
	cfg    PackFetchConfig
	db     *badger.DB
	client *http.Client
	log    *slog.Logger
	mu     sync.Mutex
	cache  map[string][]byte // digest -> bytes
	failed map[string]packFailure
	flight map[string]*packCall
}

type packFailure struct {
	err   error
	until time.Time
}

type packCall struct {
	done chan struct{}
	b    []byte
	err  error
}

// maxPackFailures bounds the failure cache; beyond it, expired entries are
// swept and, if that is not enough, the oldest half is forgotten.
const maxPackFailures = 4096

func newPackFetcher(cfg PackFetchConfig, db *badger.DB) *packFetcher {
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	if cfg.FailureTTL == 0 {
		cfg.FailureTTL = time.Minute
	}
	client := safehttp.Client(safehttp.Options{Timeout: cfg.Timeout, AllowPrivate: cfg.AllowPrivate,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "https" && !cfg.AllowPrivate {
				return errors.New("redirect away from https")
			}
			return nil
		}})
	return &packFetcher{cfg: cfg, db: db, client: client, log: cfg.log, cache: map[string][]byte{},
		failed: map[string]packFailure{}, flight: map[string]*packCall{}}
}

// have reports whether digest is already cached (memory or Badger): such a
// pack costs no network and no quota.
func (f *packFetcher) have(digest string) bool {
	if _, ok := types.BundledPackByDigest(digest); ok {
		return true
	}
	f.mu.Lock()
	_, ok := f.cache[digest]
	f.mu.Unlock()
	if ok {
		return true
	}
	_, err := f.stored(digest)
	return err == nil
}

// recentFailure returns the cached failure for uri and digest, if fresh.
func (f *packFetcher) recentFailure(key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.failed[key]; ok {
		if time.Now().Before(fl.until) {
			return fl.err
		}
		delete(f.failed, key)
	}
	return nil
}

func (f *packFetcher) rememberFailure(key string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if len(f.failed) >= maxPackFailures {
		for k, fl := range f.failed {
			if now.After(fl.until) {
				delete(f.failed, k)
			}
		}
		for k := range f.failed {
			if len(f.failed) < maxPackFailures/2 {
				break
			}
			delete(f.failed, k)
		}
	}
	f.failed[key] = packFailure{err: err, until: now.Add(f.cfg.FailureTTL)}
}

// fetch returns the pack bytes for uri pinned by digest, from the cache or
// the network, verified against digest. Errors are *adp.Error
// (pack_unavailable) with generic messages; raw network errors are logged.
func (f *packFetcher) fetch(ctx context.Context, uri, digest string) ([]byte, error) {
	if b, ok := types.BundledPackByDigest(digest); ok {
		return b.Raw, nil // content-addressed: the bundled copy is the document
	}
	f.mu.Lock()
	b, ok := f.cache[digest]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	if b, err := f.stored(digest); err == nil {
		return b, nil
	}
	key := uri + "\x00" + digest
	if err := f.recentFailure(key); err != nil {
		return nil, err
	}
	f.mu.Lock()
	if c, ok := f.flight[key]; ok {
		f.mu.Unlock()
		select {
		case <-c.done:
			return c.b, c.err
		case <-ctx.Done():
			return nil, unavailablePack(uri, "the request was cancelled")
		}
	}
	c := &packCall{done: make(chan struct{})}
	f.flight[key] = c
	f.mu.Unlock()
	c.b, c.err = f.download(ctx, uri, digest)
	if c.err != nil && ctx.Err() == nil {
		f.rememberFailure(key, c.err)
	}
	f.mu.Lock()
	delete(f.flight, key)
	f.mu.Unlock()
	close(c.done)
	return c.b, c.err
}

func unavailablePack(uri, msg string) *adp.Error {
	return &adp.Error{Code: adp.CodePackUnavailable, Message: "external pack " + msg, Data: map[string]any{"pack": uri}}
}

// download performs one GET and checks the digest.
func (f *packFetcher) download(ctx context.Context, uri, digest string) ([]byte, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(f.cfg.AllowPrivate && u.Scheme == "http")) {
		return nil, unavailablePack(uri, "URI must be an https URL")
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, unavailablePack(uri, "URI must be an https URL")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, unavailablePack(uri, safehttp.Describe(f.log, "external pack", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, unavailablePack(uri, fmt.Sprintf("answered HTTP %d", resp.StatusCode))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return nil, unavailablePack(uri, safehttp.Describe(f.log, "external pack", err))
	}
	if int64(len(b)) > f.cfg.MaxBytes {
		return nil, unavailablePack(uri, fmt.Sprintf("exceeds %d bytes", f.cfg.MaxBytes))
	}
	if err := types.VerifyDigest(digest, b); err != nil {
		if e, ok := err.(*adp.Error); ok {
			return nil, e.WithData("pack", uri)
		}
		return nil, unavailablePack(uri, "does not match its digest")
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
	if b, ok := types.BundledPackByDigest(digest); ok {
		return b.Raw, nil
	}
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
//
// charge is called once before the first fetch that needs the network (not
// for cached packs); when it fails nothing is fetched and its error is
// returned.
func (f *packFetcher) prefetch(ctx context.Context, typ string, payload []byte, charge func() error) (packSource, map[string][]byte, error) {
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
		if charge != nil && !f.have(*ref.Digest) && f.recentFailure(*ref.Pack+"\x00"+*ref.Digest) == nil {
			if err := charge(); err != nil {
				return packSource{}, nil, err
			}
			charge = nil
		}
		b, err := f.fetch(ctx, *ref.Pack, *ref.Digest)
		if err != nil {
			return packSource{}, nil, err
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
		if err == nil {
			_ = n.packs.remember(digest, b) // a cache: a pack not kept is fetched again
		}
		return b, err
	}}
}
