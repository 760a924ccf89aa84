package witness

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// DiscoveredPath is the only submission path a discovered witness may
// have below its origin: where adpnode mirrors serve their witness.
const DiscoveredPath = "/v1/witness"

// Offer tells the submitter of a witness that announced it witnesses this
// host's log: pub is the announcer's key (it signed the announcement),
// vkey its cosignature/v1 key, which must hold pub, and submitURL must be
// its origin + DiscoveredPath. The submitter adds the witness only after
// the origin's discovery document (/.well-known/agent-discourse) names the
// same witness, vkey and URL, fetched with SubmitterConfig.Discover: an
// announcement alone never makes the host post anywhere. Checks are
// queued (8 at most, the rest dropped) and made one at a time, at most
// one every CheckEvery, each key and each origin at most once every 10
// minutes; at most MaxDiscovered such witnesses are kept, each until no
// announcement refreshed it for DiscoveredTTL. Offer never blocks.
func (s *Submitter) Offer(pub ed25519.PublicKey, vkey, submitURL string) error {
	if s.cfg.Discover == nil {
		return errors.New("witness discovery is off")
	}
	v, err := tlogwitness.NewCosignatureVerifier(vkey)
	if err != nil {
		return err
	}
	if !v.PublicKey().Equal(pub) {
		return errors.New("the witness key is not the announcer's key")
	}
	origin, err := discoveredOrigin(submitURL)
	if err != nil {
		return err
	}
	vkey = v.Key()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("submitter closed")
	}
	for _, t := range s.targets {
		if t.Verifier.Key() == vkey {
			if t.discovered && t.URL == submitURL {
				t.seen = now
			}
			return nil
		}
	}
	// One check per key and per origin every recheckEvery: many keys
	// cannot make the host fetch one origin's document again and again.
	for _, k := range []string{"k " + vkey, "o " + origin} {
		if at, ok := s.checked[k]; ok && now.Sub(at) < recheckEvery {
			return nil
		}
	}
	if len(s.checked) >= 1024 {
		clear(s.checked) // bounded: at worst some origins are checked again early
	}
	select {
	case s.checkQ <- offer{vkey: vkey, url: submitURL, verifier: v}:
		s.checked["k "+vkey], s.checked["o "+origin] = now, now
		return nil
	default:
		return errors.New("too many witness checks queued")
	}
}

// discoveredOrigin returns the origin of a discovered witness's
// submission URL, which must be http(s)://host[:port]/v1/witness exactly.
func discoveredOrigin(submitURL string) (string, error) {
	u, err := url.Parse(submitURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Path != DiscoveredPath || u.RawPath != "" || u.Opaque != "" {
		return "", fmt.Errorf("a discovered witness URL must be an http(s) origin + %s", DiscoveredPath)
	}
	return u.Scheme + "://" + u.Host, nil
}

// checker checks queued offers one at a time, at most one every
// CheckEvery: announcements, which anyone may make under fresh keys,
// cannot make the host fetch documents faster than that.
func (s *Submitter) checker(ctx context.Context) {
	defer s.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-s.checkQ:
			if err := s.checkOrigin(ctx, o); err != nil {
				if ctx.Err() == nil {
					s.cfg.Logger.Info("announced witness not added", "witness", o.url, "err", err)
				}
			} else {
				s.addDiscovered(o)
			}
			t := time.NewTimer(s.cfg.CheckEvery)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// checkOrigin fetches the discovery document of the offer's origin and
// checks that it names the same witness key and URL.
func (s *Submitter) checkOrigin(ctx context.Context, o offer) error {
	origin, _ := discoveredOrigin(o.url)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/.well-known/agent-discourse", nil)
	if err != nil {
		return err
	}
	resp, err := s.cfg.Discover.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discovery document: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryBody+1))
	if err != nil {
		return err
	}
	if len(body) > maxDiscoveryBody {
		return fmt.Errorf("discovery document larger than %d bytes", maxDiscoveryBody)
	}
	var doc struct {
		Witness struct {
			VKey string `json:"vkey"`
			URL  string `json:"url"`
		} `json:"witness"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&doc); err != nil {
		return errors.New("discovery document is not JSON")
	}
	if doc.Witness.VKey != o.vkey || doc.Witness.URL != o.url {
		return errors.New("the origin's discovery document names another witness")
	}
	return nil
}

// addDiscovered adds a checked witness, evicting the stalest discovered
// one when MaxDiscovered are kept and it was not announced for ttl/2.
func (s *Submitter) addDiscovered(o offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.targets) >= MaxTargets+s.cfg.MaxDiscovered {
		return
	}
	n := 0
	var stalest *target
	for _, t := range s.targets {
		if t.Verifier.Key() == o.vkey {
			return
		}
		if t.discovered {
			n++
			if stalest == nil || t.seen.Before(stalest.seen) {
				stalest = t
			}
		}
	}
	now := time.Now()
	if n >= s.cfg.MaxDiscovered {
		if stalest == nil || now.Sub(stalest.seen) < s.cfg.DiscoveredTTL/2 {
			s.cfg.Logger.Info("announced witness not added: enough discovered witnesses", "witness", o.url, "max", s.cfg.MaxDiscovered)
			return
		}
		stalest.seen = time.Time{}
		s.expireLocked(now)
	}
	s.cfg.Logger.Info("witness discovered", "witness", o.url, "vkey", o.vkey)
	s.startLocked(&target{Target: Target{URL: o.url, Verifier: o.verifier}, client: s.cfg.Discover, discovered: true, seen: now})
}
