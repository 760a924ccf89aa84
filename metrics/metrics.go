// Package metrics exposes a node's Prometheus metrics: writes accepted and
// rejected by ADP code, write latency, live SSE subscribers, libp2p peers,
// gossip in and out, and mirror replication lag.
package metrics

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/fedport"
	"github.com/adpnode/adpnode/internal/buildinfo"
)

// Federation is what the metrics read of the federation peer: its peers,
// its gossip counters and its bandwidth.
type Federation interface {
	Peers() []fedport.PeerInfo
	Stats() *fedport.GossipStats
	Bandwidth() (in, out int64)
}

// Mirror is what the metrics read of the mirror: its counters, how many
// rooms it holds and how many of them are stalled.
type Mirror interface {
	Stats() *fedport.MirrorStats
	RoomCount() int
	StalledRooms() int
}

// Metrics owns one registry per node (so tests may run several nodes).
type Metrics struct {
	reg          *prometheus.Registry
	writes       *prometheus.CounterVec
	writeLatency *prometheus.HistogramVec
	requests     *prometheus.CounterVec
	mirrorLag    prometheus.Histogram
	// accepted caches the series of an accepted write (the common case),
	// created on the first one so /metrics shows it only once it exists.
	accepted atomic.Pointer[writeSeries]
}

type writeSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// Source is what the metrics read of the host: its live SSE streams and
// its rooms' directory entries (public and restricted).
type Source interface {
	Subscribers() int
	Summaries() []directory.Entry
}

// New registers the node's metrics. fed and mir may be nil, and can be
// attached later with Attach.
func New(n Source) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg,
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "adp_writes_total",
			Help: "Signed writes answered, by result (accepted, resubmitted, rejected) and ADP code (\"\" when accepted)."},
			[]string{"result", "code"}),
		writeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "adp_write_duration_seconds",
			Help:    "Time to answer a signed write (parse, verify, admit, durable commit), by result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "adp_http_requests_total",
			Help: "HTTP requests by route and status class."}, []string{"route", "class"}),
		mirrorLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "adp_mirror_lag_seconds",
			Help:    "Replication lag: host acceptance (received_at) to durable verified storage on this mirror.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
	}
	reg.MustRegister(m.writes, m.writeLatency, m.requests, m.mirrorLag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_sse_subscribers", Help: "Live SSE streams."},
			func() float64 { return float64(n.Subscribers()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_rooms", Help: "Rooms this node hosts."},
			func() float64 { return float64(len(n.Summaries())) }),
		buildInfo(),
	)
	return m
}

// AttachFederation adds peer and gossip series.
func (m *Metrics) AttachFederation(f Federation) {
	st := f.Stats()
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_p2p_peers", Help: "Connected libp2p peers."}, func() float64 {
			n := 0
			for _, p := range f.Peers() {
				if p.Connected {
					n++
				}
			}
			return float64(n)
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_gossip_accepted_total", Help: "Gossip messages from peers that passed validation."},
			func() float64 { return float64(st.Accepted.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_gossip_rejected_total", Help: "Gossip messages rejected by validators (sender penalised)."},
			func() float64 { return float64(st.Rejected.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_gossip_ignored_total", Help: "Gossip messages ignored (duplicate, stale, expired)."},
			func() float64 { return float64(st.Ignored.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_gossip_published_total", Help: "Record stream messages this host published."},
			func() float64 { return float64(st.Published.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_index_refused_future_total", Help: "Announcements refused for a created_at in the future."},
			func() float64 { return float64(st.Future.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_index_conflicts_total", Help: "Announcements refused for claiming a room ID another host holds (kept as evidence)."},
			func() float64 { return float64(st.Conflicts.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_index_rate_limited_total", Help: "Announcements dropped over their host's announcement rate."},
			func() float64 { return float64(st.RateLimited.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_index_over_cap_total", Help: "Announcements dropped over their host's share of the index."},
			func() float64 { return float64(st.OverCap.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_index_sync_refused_total", Help: "Index-sync streams refused over the per-peer limit."},
			func() float64 { return float64(st.SyncRefused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_pull_read_bytes_total", Help: "Bytes peers sent to this node's reconciliation and index-sync servers."},
			func() float64 { return float64(st.PullRead.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_pull_served_bytes_total", Help: "Bytes this node's reconciliation and index-sync servers answered peers."},
			func() float64 { return float64(st.PullServed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_pull_served_ids_total", Help: "Announcements this node's reconciliation and index-sync servers answered."},
			func() float64 { return float64(st.PullIDs.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_pull_refused_total", Help: "Reconciliation and index-sync requests refused beyond a peer's pull budget."},
			func() float64 { return float64(st.PullRefused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_pull_penalised_total", Help: "Announcements relayed by reconciliation or index sync that gossip would reject (the relaying peer is penalised)."},
			func() float64 { return float64(st.Penalised.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_p2p_bytes_in_total", Help: "libp2p bytes received."},
			func() float64 { in, _ := f.Bandwidth(); return float64(in) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_p2p_bytes_out_total", Help: "libp2p bytes sent."},
			func() float64 { _, out := f.Bandwidth(); return float64(out) }),
	)
	if d, ok := f.(DiscoveryReporter); ok {
		m.reg.MustRegister(discoveryCollector{d: d, st: &st.Discovery})
	}
	if p, ok := f.(ProtocolBandwidthReporter); ok {
		m.reg.MustRegister(protocolBytesCollector{p})
	}
}

// ProtocolBandwidthReporter is what the metrics read of the libp2p bytes
// by protocol (the federation peer has it; a fake may not).
type ProtocolBandwidthReporter interface {
	// BandwidthByProtocol returns bytes in and out by libp2p protocol ID
	// (only protocols the node speaks: a stream is counted once
	// negotiated).
	BandwidthByProtocol() map[string][2]int64
}

var descProtocolBytes = prometheus.NewDesc("adp_p2p_protocol_bytes_total",
	"libp2p bytes by protocol (DHT, gossipsub, identify, ping, the node's own streams) and direction (in, out).",
	[]string{"protocol", "direction"}, nil)

type protocolBytesCollector struct{ p ProtocolBandwidthReporter }

func (c protocolBytesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descProtocolBytes }

func (c protocolBytesCollector) Collect(ch chan<- prometheus.Metric) {
	for proto, b := range c.p.BandwidthByProtocol() {
		ch <- prometheus.MustNewConstMetric(descProtocolBytes, prometheus.CounterValue, float64(b[0]), proto, "in")
		ch <- prometheus.MustNewConstMetric(descProtocolBytes, prometheus.CounterValue, float64(b[1]), proto, "out")
	}
}

// DiscoveryReporter is what the metrics read of peer discovery's
// effective state (the federation peer has it; a fake may not).
type DiscoveryReporter interface {
	Discovery() fedport.DiscoveryStatus
}

// Connection sources and DHT modes always exported (0 when none).
var (
	peerSources = []string{"static", "bootstrap", "dht", "announcement", "mdns", "cache", "inbound", "other"}
	dhtModes    = []string{"server", "client", "off"}
)

var (
	descDHTMode = prometheus.NewDesc("adp_dht_mode", "The DHT mode in effect now (1 for the mode the node runs in).", []string{"mode"}, nil)
	descRT      = prometheus.NewDesc("adp_dht_routing_table_peers", "Peers in the DHT routing table.", nil, nil)
	descSource  = prometheus.NewDesc("adp_p2p_peers_by_source", "Connected libp2p peers by how they came: static, bootstrap, dht, announcement, mdns, cache (the peer cache), inbound, other (dialled outside discovery).", []string{"source"}, nil)
	descDegr    = prometheus.NewDesc("adp_federation_degraded", "1 while bootstrap or static peers are configured and no peer is connected.", nil, nil)
	descRounds  = prometheus.NewDesc("adp_discovery_rounds_total", "Peer discovery rounds run.", nil, nil)
	descOutcome = prometheus.NewDesc("adp_discovery_total", "What discovery rounds did, by outcome: found (provider records read), dialled, connected, "+
		"advertised, advertise_failed, announced (peers dialled at their announced addresses), bootstrap_failed (rounds no bootstrap peer answered).", []string{"outcome"}, nil)
)

// discoveryCollector reads the discovery status once per scrape.
type discoveryCollector struct {
	d  DiscoveryReporter
	st *fedport.DiscoveryStats
}

func (c discoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDHTMode, descRT, descSource, descDegr, descRounds, descOutcome} {
		ch <- d
	}
}

func (c discoveryCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Discovery()
	for _, m := range dhtModes {
		v := 0.0
		if s.DHT == m {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descDHTMode, prometheus.GaugeValue, v, m)
	}
	ch <- prometheus.MustNewConstMetric(descRT, prometheus.GaugeValue, float64(s.RoutingTable))
	for _, src := range peerSources {
		ch <- prometheus.MustNewConstMetric(descSource, prometheus.GaugeValue, float64(s.BySource[src]), src)
	}
	degraded := 0.0
	if s.Degraded {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(descDegr, prometheus.GaugeValue, degraded)
	ch <- prometheus.MustNewConstMetric(descRounds, prometheus.CounterValue, float64(c.st.Rounds.Load()))
	for _, o := range []struct {
		name string
		v    int64
	}{{"found", c.st.Found.Load()}, {"dialled", c.st.Dialled.Load()}, {"connected", c.st.Connected.Load()},
		{"advertised", c.st.Advertised.Load()}, {"advertise_failed", c.st.AdvertiseFailed.Load()},
		{"announced", c.st.Announced.Load()}, {"bootstrap_failed", c.st.BootstrapFailed.Load()}} {
		ch <- prometheus.MustNewConstMetric(descOutcome, prometheus.CounterValue, float64(o.v), o.name)
	}
}

// AttachMirror adds mirror series.
func (m *Metrics) AttachMirror(mir Mirror) {
	st := mir.Stats()
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_mirror_rooms", Help: "Mirrored rooms."},
			func() float64 { return float64(mir.RoomCount()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_verified_total", Help: "Records verified and stored by the mirror."},
			func() float64 { return float64(st.Verified.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_refused_total", Help: "Records or backfill batches refused."},
			func() float64 { return float64(st.Refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_evidence_total", Help: "Pieces of host misbehaviour evidence stored."},
			func() float64 { return float64(st.Evidence.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_stalls_total", Help: "Catch-ups that found records past the verified tip that no peer could serve."},
			func() float64 { return float64(st.Stalls.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_mirror_stalled_rooms", Help: "Mirrored rooms whose catch-up is stuck."},
			func() float64 { return float64(mir.StalledRooms()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_hostlog_proofs_fetched_total", Help: "Requests for the host log proof of an ended mirrored room's last record."},
			func() float64 { return float64(st.ProofsFetched.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_hostlog_proofs_refused_total", Help: "Host log proof answers refused (bad status, too large, not a proof, or failing the kernel's check)."},
			func() float64 { return float64(st.ProofsRefused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_mirror_hostlog_proofs_stored_total", Help: "Host log proofs checked and stored for the mirror's archives."},
			func() float64 { return float64(st.ProofsStored.Load()) }),
	)
}

// ProfileCacheStats is what the metrics read of the profile cache (other
// hosts' agents' profiles this node fetched and verified).
type ProfileCacheStats struct {
	Entries          int
	Bytes            int64
	Fetches, Refused int64
}

// AttachProfiles adds the profile cache's series; stats is read at each
// scrape.
func (m *Metrics) AttachProfiles(stats func() ProfileCacheStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_profile_cache_entries", Help: "Agent profiles of other hosts held in the cache."},
			func() float64 { return float64(stats().Entries) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "adp_profile_cache_bytes", Help: "Bytes of the cached profiles."},
			func() float64 { return float64(stats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_profile_fetches_total", Help: "Profile fetches from other hosts."},
			func() float64 { return float64(stats().Fetches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "adp_profile_refused_total", Help: "Fetched profiles refused (not verifying, not the agent's, oversized, older than the one held)."},
			func() float64 { return float64(stats().Refused) }),
	)
}

// ObserveWrite counts one answered write.
func (m *Metrics) ObserveWrite(result, code string, d time.Duration) {
	if result == "accepted" && code == "" {
		ws := m.accepted.Load()
		if ws == nil {
			ws = &writeSeries{m.writes.WithLabelValues(result, code), m.writeLatency.WithLabelValues(result)}
			m.accepted.Store(ws)
		}
		ws.count.Inc()
		ws.latency.Observe(d.Seconds())
		return
	}
	m.writes.WithLabelValues(result, code).Inc()
	m.writeLatency.WithLabelValues(result).Observe(d.Seconds())
}

// ObserveRequest counts one HTTP request.
func (m *Metrics) ObserveRequest(route string, status int) {
	class := "5xx"
	switch {
	case status < 300:
		class = "2xx"
	case status < 400:
		class = "3xx"
	case status < 500:
		class = "4xx"
	}
	m.requests.WithLabelValues(route, class).Inc()
}

// ObserveMirrorLag records one replicated record's lag.
func (m *Metrics) ObserveMirrorLag(d time.Duration) { m.mirrorLag.Observe(d.Seconds()) }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// buildInfo is the constant adp_build_info gauge (value 1) whose labels say
// which build runs.
func buildInfo() prometheus.Collector {
	bi := buildinfo.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "adp_build_info",
		Help: "The running adpnode build: version, VCS revision and Go version (always 1)."}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	return g
}
