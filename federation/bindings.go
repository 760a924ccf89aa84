package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/safehttp"
)

// HostInfo is a remote host as this node knows it: the binding learned from
// its signed announcements and the outcome of cross-checking that binding
// against the host's own discovery document.
type HostInfo struct {
	index.Binding
	Rooms     int    `json:"rooms"`
	Verified  bool   `json:"verified"`
	CheckedAt int64  `json:"checked_at,omitempty"`
	CheckErr  string `json:"check_error,omitempty"`
}

type bindingCheck struct {
	verified bool
	at       int64
	err      string
}

// Hosts lists remote hosts known from the index.
func (f *Federation) Hosts() []HostInfo {
	now := f.n.NowMs()
	rooms := map[identity.AgentID]int{}
	for _, s := range f.idx.Summaries(now) {
		if e, ok := f.idx.Room(s.ID, now); ok {
			rooms[e.Host.Key]++
		}
	}
	out := []HostInfo{}
	f.checkMu.Lock()
	defer f.checkMu.Unlock()
	for _, b := range f.idx.Hosts(now) {
		hi := HostInfo{Binding: b, Rooms: rooms[b.Key]}
		if c, ok := f.checks[b.Key]; ok {
			hi.Verified, hi.CheckedAt, hi.CheckErr = c.verified, c.at, c.err
		}
		out = append(out, hi)
	}
	return out
}

// CheckBinding fetches the remote host's discovery document from the origin
// its announcements claim and verifies that it publishes the same host key
// and peer ID: an origin cannot be claimed by a key it does not serve.
func (f *Federation) CheckBinding(ctx context.Context, b index.Binding) error {
	err := f.checkBinding(ctx, b)
	c := bindingCheck{verified: err == nil, at: f.n.NowMs()}
	if err != nil {
		c.err = err.Error()
	}
	f.checkMu.Lock()
	f.checks[b.Key] = c
	f.checkMu.Unlock()
	return err
}

func (f *Federation) checkBinding(ctx context.Context, b index.Binding) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.Origin+"/.well-known/agent-discourse", nil)
	if err != nil {
		return err
	}
	resp, err := f.httpClient().Do(req)
	if err != nil {
		return errors.New("discovery document " + safehttp.Describe(f.log, "binding check", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discovery document: HTTP %d", resp.StatusCode)
	}
	var doc struct {
		HostKey identity.AgentID `json:"host_key"`
		PeerID  string           `json:"peer_id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<10)).Decode(&doc); err != nil {
		return err
	}
	if doc.HostKey != b.Key || doc.PeerID != b.PeerID {
		return errors.New("discovery document names a different host key or peer ID")
	}
	return nil
}

// httpClient refuses non-public addresses (internal/safehttp) unless the
// operator allows them: announced origins come from peers, and must not
// make this node probe its own network.
func (f *Federation) httpClient() *http.Client {
	return safehttp.Client(safehttp.Options{Timeout: 5 * time.Second, AllowPrivate: f.cfg.AllowPrivateOrigins})
}

// bindingLoop cross-checks host bindings once per announce interval.
func (f *Federation) bindingLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.AnnounceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.checkNewBindings(ctx)
		}
	}
}

// checkNewBindings cross-checks every host binding not checked in the last
// interval (runs on the announce ticker).
func (f *Federation) checkNewBindings(ctx context.Context) {
	now := f.n.NowMs()
	for _, b := range f.idx.Hosts(now) {
		f.checkMu.Lock()
		c, ok := f.checks[b.Key]
		f.checkMu.Unlock()
		if ok && now-c.at < f.cfg.AnnounceInterval.Milliseconds()*10 {
			continue
		}
		if err := f.CheckBinding(ctx, b); err != nil {
			f.log.Warn("host binding not confirmed", "host_key", b.Key, "origin", b.Origin, "err", err)
		}
	}
}
