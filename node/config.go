package node

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/hostport"
)

// Rates are per-agent, per-room write quotas per minute by kind (ADP §21,
// DECISIONS 9). Zero disables that limit. Ceilings bound what a type's
// rate_hint may raise them to.
type Rates struct {
	Message, Signal, Control                      int
	MessageCeiling, SignalCeiling, ControlCeiling int
	AgentStatus                                   int // agent-status writes per agent per room per minute
	// Create bounds room.create per agent per minute across the host (a
	// host policy: rooms cost storage and index space). External pack
	// fetches count against it too.
	Create int
	// JoinRequests bounds join requests per agent per room per hour.
	JoinRequests int
	// Profile bounds profile.update writes per agent per minute across
	// the host.
	Profile int

	// explicit marks a Rates whose zeros were all spelled out (NoRates):
	// Config.Defaults replaces only an unset, all-zero Rates.
	explicit bool
}

// DefaultRates are the ADP §21 defaults plus this host's policies.
func DefaultRates() Rates {
	return Rates{Message: 5, Signal: 60, Control: 10,
		MessageCeiling: 60, SignalCeiling: 600, ControlCeiling: 120, AgentStatus: 60, Create: 30, JoinRequests: 10, Profile: 10}
}

// NoRates disables every quota (every limit spelled out as 0).
func NoRates() Rates { return Rates{explicit: true} }

// Config configures a node.
type Config struct {
	// PublicURL is the service origin (scheme://host[:port]): the JWT
	// audience and the host part of Room URLs (DECISIONS 6).
	PublicURL string
	// DataDir holds the Badger database.
	DataDir string
	// InMemory keeps Badger in memory (tests only: nothing is durable).
	InMemory bool
	// DiskReserveBytes is the free space on the data dir's file system
	// below which writes are refused (503 unavailable, reason disk_full);
	// 0 disables the check; otherwise Open refuses one below
	// MinDiskReserve of the node's Badger options (DiskReserveError).
	// adpnode serve defaults it to DefaultDiskReserve.
	DiskReserveBytes int64
	// DiskCheckInterval is the age past which a write samples free space
	// again before it is accepted (default 1 s); an idle node does not
	// sample.
	DiskCheckInterval time.Duration

	Limits room.Limits
	Rates  Rates
	// Window is the live-write time window (Identity §7, DECISIONS 7).
	Window time.Duration
	// MaxProfiles caps the agent profiles the host stores
	// (DefaultMaxProfiles if 0); an update of a stored one always fits.
	MaxProfiles int
	// JoinRequestTTL is how long a join request stays valid.
	JoinRequestTTL time.Duration
	// StatusTTL is the maximum agent status lifetime (§17.4).
	StatusTTL time.Duration
	// MaxBodyBytes caps HTTP request bodies before parsing (DECISIONS 10).
	MaxBodyBytes int64

	// Packs configures external pack fetching (DECISIONS 11).
	Packs PackFetchConfig

	// SSEBuffer is the per-subscriber queue; a subscriber that falls this
	// far behind is dropped instead of blocking the room.
	SSEBuffer int

	// Now is the clock; nil means time.Now. Tests move it.
	Now func() time.Time
	Log *slog.Logger

	// WithoutFeed stores records with no change-feed entry. It exists
	// only as the baseline of the feed's cost on the write path (node's
	// BenchmarkSubmitFeed, adpload -nofeed): the feed's followers (host
	// log, attention, federation's record publisher) are told nothing,
	// so a serving node never sets it.
	WithoutFeed bool
}

// PackFetchConfig bounds external pack fetches.
type PackFetchConfig struct {
	Timeout  time.Duration
	MaxBytes int64
	// AllowPrivate permits fetching from loopback and private addresses and
	// over plain HTTP (for tests and closed deployments only).
	AllowPrivate bool
	// FailureTTL is how long a failed fetch of one URL and digest is
	// remembered and answered without dialling again (default 60 s).
	FailureTTL time.Duration

	log *slog.Logger
}

// Defaults fills unset fields with the documented defaults.
func (c *Config) Defaults() {
	if c.Limits == (room.Limits{}) {
		c.Limits = room.DefaultLimits()
	}
	if c.Rates == (Rates{}) {
		c.Rates = DefaultRates()
	}
	if c.Window == 0 {
		c.Window = 300 * time.Second
	}
	if c.MaxProfiles == 0 {
		c.MaxProfiles = DefaultMaxProfiles
	}
	if c.JoinRequestTTL == 0 {
		c.JoinRequestTTL = time.Hour
	}
	if c.StatusTTL == 0 {
		c.StatusTTL = 300 * time.Second
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Packs.Timeout == 0 {
		c.Packs.Timeout = 10 * time.Second
	}
	if c.Packs.FailureTTL == 0 {
		c.Packs.FailureTTL = time.Minute
	}
	if c.Packs.MaxBytes == 0 {
		c.Packs.MaxBytes = 1 << 20
	}
	if c.DiskCheckInterval <= 0 {
		c.DiskCheckInterval = time.Second
	}
	if c.SSEBuffer == 0 {
		c.SSEBuffer = 1024
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	c.Packs.log = c.Log
}

// Policy is the part of c the HTTP API enforces and publishes.
func (c *Config) Policy() hostport.Policy {
	r := c.Rates
	return hostport.Policy{
		MaxBodyBytes: c.MaxBodyBytes,
		Limits:       c.Limits,
		Rates: hostport.Rates{Message: r.Message, Signal: r.Signal, Control: r.Control,
			MessageCeiling: r.MessageCeiling, SignalCeiling: r.SignalCeiling, ControlCeiling: r.ControlCeiling,
			AgentStatus: r.AgentStatus, Create: r.Create, JoinRequests: r.JoinRequests, Profile: r.Profile},
		Window:             c.Window,
		JoinRequestTTL:     c.JoinRequestTTL,
		StatusTTL:          c.StatusTTL,
		StoredJoinRequests: MaxStoredJoinRequests,
		PackFailureTTL:     c.Packs.FailureTTL,
	}
}

// Origin validates and normalises a service origin: scheme and host with a
// non-default port, no path, query, fragment or trailing slash.
func Origin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("public URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("public URL %q: need http(s)://host[:port]", raw)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("public URL %q: an origin has no path, query, fragment or user", raw)
	}
	host := strings.ToLower(u.Host)
	if u.Scheme == "http" {
		host = strings.TrimSuffix(host, ":80")
	} else {
		host = strings.TrimSuffix(host, ":443")
	}
	return u.Scheme + "://" + host, nil
}
