package hostapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/types"
	"github.com/adpnode/adpnode/attention"
	"github.com/adpnode/adpnode/hostport"
	"github.com/adpnode/adpnode/httpwire"
	"github.com/adpnode/adpnode/internal/buildinfo"
	"github.com/adpnode/adpnode/internal/storelayout"
	"github.com/adpnode/adpnode/metrics"
)

// DefaultSSEFlushInterval bounds the flushes of a busy SSE stream: at
// most one per 20 ms. The trade-off: a busy stream's records may wait up
// to 20 ms before they are written (15 ms more than the 5 ms this was
// before), and in return one busy room with 1,000 subscribers costs at
// most 50 write syscalls per subscriber per second, not 200, which is
// what lets the fan-out keep up on a small machine (BenchmarkSSEFanout).
// An idle stream's first record is still written at once.
const DefaultSSEFlushInterval = 20 * time.Millisecond

// Options tune the HTTP layer.
type Options struct {
	// Heartbeat is the SSE comment interval (default 15 s).
	Heartbeat time.Duration
	// SSEFlushInterval is the least time between two flushes of one SSE
	// stream (default DefaultSSEFlushInterval; negative: flush every
	// burst at once). An idle stream's first item is flushed at once;
	// items arriving sooner than this after a flush are coalesced into
	// the next one, so a busy room costs one write syscall per
	// subscriber per interval instead of one per record.
	SSEFlushInterval time.Duration
	Log              *slog.Logger
	// Federation, when set, makes the directory federated, relays writes
	// for remote rooms, and publishes the host binding in discovery.
	Federation Federation
	// Witnessed, when set, adds the witnesses' cosignatures to the host
	// log's checkpoint (--witness).
	Witnessed Cosigned
	// Mirror, when set, serves mirrored rooms and mirror management.
	Mirror Mirror
	// Metrics, when set, is served at /metrics and fed by every request.
	Metrics *metrics.Metrics
	// HTTP are the edge's timeouts and caps (NewHTTPServer takes the
	// same); the handler uses the write deadlines and the viewer cap.
	HTTP HTTPOptions
	// ViewerStreamsPerClient caps viewer streams per client IP
	// (default 16).
	ViewerStreamsPerClient int
	// OperatorToken is the operator credential (see internal/optoken);
	// operator endpoints refuse every request when it is empty.
	OperatorToken string
	// Attention, when set, serves subscriptions, the mentions inbox and
	// the agent stream under /v1/me (host-local extension).
	Attention *attention.Attention
	// HostLog, when set, serves the host log's tiles, checkpoint and
	// proofs and names them in discovery.
	HostLog HostLog
	// Profiles, when set, resolves agent profiles this host does not
	// hold (the hosts of mirrored and listed rooms).
	Profiles Profiles
}

// Server serves one node over HTTP.
type Server struct {
	n      Host
	policy hostport.Policy // n.Policy(), read once
	opts   Options
	engine *gin.Engine
	log    *slog.Logger
	// viewers counts open viewer streams per client IP.
	viewers *clientCounter
}

// New builds the HTTP API for n.
func New(n Host, opts Options) *Server {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.SSEFlushInterval == 0 {
		opts.SSEFlushInterval = DefaultSSEFlushInterval
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	opts.HTTP = opts.HTTP.WithDefaults()
	if opts.ViewerStreamsPerClient == 0 {
		opts.ViewerStreamsPerClient = DefaultViewerStreamsPerClient
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(gin.Recovery())
	if opts.Metrics != nil {
		e.Use(func(c *gin.Context) {
			c.Next()
			route := c.FullPath()
			if route == "" {
				route = "unmatched"
			}
			opts.Metrics.ObserveRequest(c.Request.Method+" "+route, c.Writer.Status())
		})
	}
	// The access log, at debug level: method, path (no query: it may
	// carry viewer tokens), status and duration; never a header.
	if opts.Log.Enabled(context.Background(), slog.LevelDebug) {
		e.Use(func(c *gin.Context) {
			start := time.Now()
			c.Next()
			opts.Log.Debug("http", "method", c.Request.Method, "path", c.Request.URL.Path,
				"status", c.Writer.Status(), "duration_ms", float64(time.Since(start).Microseconds())/1000)
		})
	}
	e.HandleMethodNotAllowed = true
	s := &Server{n: n, policy: n.Policy(), opts: opts, engine: e, log: opts.Log, viewers: newClientCounter()}
	e.Use(s.edge)
	s.routes()
	return s
}

// edge runs first on every request: an ordinary response gets a write
// deadline (SSE handlers replace it per flush), and a declared body over
// the cap is refused with 413 before a byte of it is read.
func (s *Server) edge(c *gin.Context) {
	_ = http.NewResponseController(unwrap(c.Writer)).SetWriteDeadline(time.Now().Add(s.opts.HTTP.WriteTimeout))
	if limit := s.policy.MaxBodyBytes; c.Request.ContentLength > limit {
		c.Header("Connection", "close")
		s.fail(c, &adp.Error{Code: adp.CodePayloadTooLarge, Message: "request body exceeds the limit", Data: map[string]any{"limit": limit}})
		return
	}
	c.Next()
}

// Handler returns the http.Handler.
func (s *Server) Handler() http.Handler { return s.engine }

// Routes lists every registered "METHOD path" (for the OpenAPI check).
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.engine.Routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

func (s *Server) routes() {
	e := s.engine
	e.NoRoute(func(c *gin.Context) { s.fail(c, adp.Errorf(adp.CodeNotFound, "no such endpoint")) })
	e.NoMethod(func(c *gin.Context) {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "method", "method not allowed on this endpoint"))
	})
	e.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/readyz", s.ready)
	e.GET("/.well-known/agent-discourse", s.discovery)
	e.GET("/openapi.json", s.openAPI)
	if s.opts.Metrics != nil {
		e.GET("/metrics", gin.WrapH(s.opts.Metrics.Handler()))
	}

	v1 := e.Group("/v1")
	v1.POST("/rooms", s.submit)
	v1.GET("/rooms/public", s.publicRooms)
	v1.GET("/me/rooms", s.myRooms)
	v1.POST("/rooms/:room_id", s.submit)
	v1.GET("/rooms/:room_id", s.getRoom)
	v1.GET("/rooms/:room_id/events", s.events)
	v1.GET("/rooms/:room_id/events/live", s.live)
	v1.GET("/rooms/:room_id/members", s.members)
	v1.POST("/rooms/:room_id/join-requests", s.createJoinRequest)
	v1.GET("/rooms/:room_id/join-requests", s.listJoinRequests)
	v1.GET("/rooms/:room_id/join-requests/:request_id", s.getJoinRequest)
	v1.GET("/rooms/:room_id/agent-status", s.listStatus)
	v1.PUT("/rooms/:room_id/agent-status", s.putStatus)
	v1.GET("/rooms/:room_id/agent-status/:agent_id", s.getStatus)
	v1.GET("/rooms/:room_id/archive", s.archiveJSON)
	v1.GET("/rooms/:room_id/archive.jsonl", s.archiveJSONL)
	v1.GET("/rooms/:room_id/archive.md", s.archiveMD)
	s.profileRoutes(v1)
	v1.GET("/packs/:name", s.bundledPack)
	v1.GET("/federation/peers", s.fedPeers)
	v1.GET("/federation/hosts", s.fedHosts)
	v1.GET("/federation/conflicts", s.fedConflicts)
	s.attentionRoutes(v1)
	s.logRoutes(e, v1)
	s.mirrorRoutes()
	s.adminRoutes()
	s.viewerRoutes()
}

// writeJSON writes v without HTML escaping (agent content stays as signed).
func writeJSON(c *gin.Context, status int, v any) {
	c.Data(status, "application/json; charset=utf-8", httpwire.Marshal(v))
}

// fail writes the spec's error shape with the status from the one table.
func (s *Server) fail(c *gin.Context, err error) {
	if adp.CodeOf(err) == adp.CodeInternal {
		s.log.Error("internal error", "path", c.FullPath(), "err", err)
	}
	if adp.CodeOf(err) == adp.CodeRoomNotFound {
		err = s.hostedElsewhere(c, err)
	}
	httpwire.Error(err).Write(c.Writer)
	c.Abort()
}

// hostedElsewhere turns the room_not_found of a room this node does not host,
// but which its federated directory lists, into one that says where the
// room is: reason hosted_elsewhere, the room's URL and its host's origin
// (clients such as the CLI then talk to that host). Other errors are
// returned as they are.
func (s *Server) hostedElsewhere(c *gin.Context, err error) error {
	id := c.Param("room_id")
	if id == "" || s.opts.Federation == nil || !strings.HasPrefix(c.FullPath(), "/v1/rooms/:room_id") || s.n.HostsRoom(id) {
		return err
	}
	e, ok := s.opts.Federation.Locate(id)
	if !ok || e.URL == "" {
		return err
	}
	origin := strings.TrimSuffix(e.URL, "/v1/rooms/"+id)
	return &adp.Error{Code: adp.CodeRoomNotFound,
		Message: "this node does not host room " + id + "; its host is " + origin + " (Room URL " + e.URL + ")",
		Data:    map[string]any{"reason": "hosted_elsewhere", "room_url": e.URL, "host": origin}}
}

// body reads the request body under the size cap (DECISIONS 10).
func (s *Server) body(c *gin.Context) ([]byte, error) {
	limit := s.policy.MaxBodyBytes
	b, err := readBody(http.MaxBytesReader(c.Writer, c.Request.Body, limit), c.Request.ContentLength, limit)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &adp.Error{Code: adp.CodePayloadTooLarge, Message: "request body exceeds the limit", Data: map[string]any{"limit": limit}}
	}
	if err != nil {
		return nil, adp.Reason(adp.CodeInvalidRequest, "body", "could not read the request body")
	}
	return b, nil
}

// readBody reads r to the end. A declared length within the limit sizes
// the buffer once (io.ReadAll would grow it from 512 bytes, copying at
// each step); the declared length is only a hint, so a body that is
// shorter or longer than it is still read exactly, up to limit.
func readBody(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared <= 0 || declared > limit {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, declared+1) // +1: EOF is seen without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow (the body is longer than declared)
		}
	}
}

// viewer authenticates an optional request JWT: "" when absent,
// invalid_token when present but bad.
func (s *Server) viewer(c *gin.Context) (identity.AgentID, error) {
	h := c.GetHeader("Authorization")
	if h == "" {
		return "", nil
	}
	// The auth-scheme is case-insensitive (RFC 7235 §2.1).
	scheme, tok, ok := strings.Cut(strings.TrimLeft(h, " "), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", adp.Errorf(adp.CodeInvalidToken, "Authorization must be a Bearer request JWT")
	}
	return identity.VerifyJWT(strings.TrimSpace(tok), s.n.Origin(), s.n.NowMs()/1000)
}

// agent requires a valid request JWT.
func (s *Server) agent(c *gin.Context) (identity.AgentID, error) {
	a, err := s.viewer(c)
	if err == nil && a == "" {
		err = adp.Errorf(adp.CodeInvalidToken, "this endpoint requires Authorization: Bearer <request JWT>")
	}
	return a, err
}

func (s *Server) ready(c *gin.Context) {
	if !s.n.Ready() {
		s.fail(c, adp.Errorf(adp.CodeUnavailable, "not ready"))
		return
	}
	// Storage must answer a read (a missing key is an answer).
	err := s.n.DB().View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(storelayout.ReadyProbe))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		s.log.Warn("readiness: storage read failed", "err", err)
		s.fail(c, adp.Reason(adp.CodeUnavailable, "storage", "storage does not answer reads"))
		return
	}
	out := gin.H{"status": "ready", "storage": "ok"}
	if s.opts.Federation != nil {
		n := 0
		for _, p := range s.opts.Federation.Peers() {
			if p.Connected {
				n++
			}
		}
		fed := gin.H{"peers": n, "status": "ok"}
		if d, ok := s.opts.Federation.(metrics.DiscoveryReporter); ok {
			st := d.Discovery()
			fed["dht"], fed["routing_table"] = st.DHT, st.RoutingTable
			if st.Degraded {
				// Still ready: the node serves its own rooms without peers.
				out["status"], fed["status"], fed["reason"] = "degraded", "degraded", st.Reason
			}
		}
		out["federation"] = fed
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) discovery(c *gin.Context) {
	cfg := s.policy
	o := s.n.Origin()
	lim := cfg.Limits
	doc := gin.H{
		"protocol": adp.Protocol,
		"software": gin.H{"name": "adpnode", "version": buildinfo.Get().Version},
		"host":     s.n.Host(),
		"service":  o,
		"features": []string{"rooms", "restricted-rooms", "private-rooms", "join-requests", "join-review",
			"sse-event-stream", "agent-status", "archives", "profiles", "registered-packs", "external-packs", "bundled-packs", "public-room-discovery"},
		"registered_packs": types.RegisteredPackIDs(),
		"bundled_packs":    s.bundledPacksDiscovery(),
		"profile":          s.profileDiscovery(),
		"endpoints":        gin.H{"api": o + "/v1", "sse": o + "/v1"},
		"limits": gin.H{
			"rates_per_minute": gin.H{"message": cfg.Rates.Message, "signal": cfg.Rates.Signal, "control": cfg.Rates.Control,
				"room_create": cfg.Rates.Create, "agent_status": cfg.Rates.AgentStatus},
			"join_requests_per_hour":         cfg.Rates.JoinRequests,
			"stored_join_requests_per_room":  cfg.StoredJoinRequests,
			"viewer_streams_per_client":      s.opts.ViewerStreamsPerClient,
			"viewer_streams":                 MaxViewerStreams,
			"connections":                    s.opts.HTTP.MaxConnections,
			"connections_per_address":        s.opts.HTTP.MaxConnectionsPerAddress,
			"request_header_bytes":           s.opts.HTTP.MaxHeaderBytes,
			"request_read_timeout_ms":        s.opts.HTTP.ReadTimeout.Milliseconds(),
			"idle_timeout_ms":                s.opts.HTTP.IdleTimeout.Milliseconds(),
			"sse_write_timeout_ms":           s.opts.HTTP.SSEWriteTimeout.Milliseconds(),
			"external_pack_failure_cache_ms": cfg.PackFailureTTL.Milliseconds(),
			"rate_ceilings_per_minute":       gin.H{"message": cfg.Rates.MessageCeiling, "signal": cfg.Rates.SignalCeiling, "control": cfg.Rates.ControlCeiling},
			"payload_bytes":                  lim.MaxPayloadBytes,
			"payload_ceiling_bytes":          lim.MaxPayloadCeiling,
			"mentions":                       lim.MaxMentions,
			"schema_bytes":                   lim.Types.MaxSchemaBytes,
			"types_per_room":                 lim.Types.MaxTypes,
			"min_room_duration_ms":           lim.MinDuration,
			"max_room_duration_ms":           lim.MaxDuration,
			"speakers_per_room":              lim.MaxSpeakers,
			"observers_per_room":             lim.MaxObservers,
			"request_body_bytes":             cfg.MaxBodyBytes,
			"time_window_ms":                 cfg.Window.Milliseconds(),
			"join_request_ttl_ms":            cfg.JoinRequestTTL.Milliseconds(),
			"agent_status_ttl_ms":            cfg.StatusTTL.Milliseconds(),
			"events_page":                    gin.H{"default": 100, "max": 1000},
		},
	}
	// Member-only rooms: policy.extra.confidentiality (docs/sealed-rooms.md).
	doc["features"] = append(doc["features"].([]string), "x-sealed-rooms")
	if f := s.opts.Federation; f != nil {
		b := f.Binding()
		doc["host_key"] = b.Key
		doc["peer_id"] = b.PeerID
		doc["p2p_addrs"] = f.Addrs()
		doc["features"] = append(doc["features"].([]string), "federation", "relay-submit")
		doc["endpoints"].(gin.H)["federation"] = o + "/v1/federation"
	}
	if m := s.opts.Mirror; m != nil && m.Witness() != nil {
		w := m.Witness()
		doc["features"] = append(doc["features"].([]string), "tlog-witness")
		doc["witness"] = gin.H{"name": w.Name(), "vkey": w.VerifierKey(), "url": o + "/v1/witness"}
	}
	if s.opts.HostLog != nil {
		doc["features"] = append(doc["features"].([]string), "x-host-log")
		doc["log"] = s.logDiscovery()
	}
	if s.opts.Attention != nil {
		doc["features"] = append(doc["features"].([]string), "x-attention")
		doc["attention"] = s.opts.Attention.Discovery()
	}
	writeJSON(c, http.StatusOK, doc)
}

// submit handles POST /v1/rooms and POST /v1/rooms/{room_id}. A write for
// a room this node does not host but the federated index knows is relayed
// to the room's host, and the host's answer is returned unchanged.
func (s *Server) submit(c *gin.Context) {
	b, err := s.body(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	start := time.Now()
	roomID := c.Param("room_id")
	if roomID != "" && s.opts.Federation != nil && !s.n.HostsRoom(roomID) {
		if ans, ok := s.opts.Federation.Relay(c.Request.Context(), roomID, b); ok {
			c.Header("X-ADP-Relayed", "true")
			ans.Write(c.Writer)
			s.observeWrite("relayed", ans, start)
			return
		}
	}
	res, err := s.n.Submit(c.Request.Context(), b, roomID)
	if err != nil && adp.CodeOf(err) == adp.CodeInternal {
		s.log.Error("internal error", "path", c.FullPath(), "err", err)
	}
	ans := httpwire.Submit(res, err)
	ans.Write(c.Writer)
	switch {
	case err != nil:
		s.observeWrite("rejected", ans, start)
	case res.Resubmitted:
		s.observeWrite("resubmitted", ans, start)
	default:
		s.observeWrite("accepted", ans, start)
	}
}

func (s *Server) observeWrite(result string, ans httpwire.Answer, start time.Time) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.ObserveWrite(result, string(ans.Code), time.Since(start))
	}
}

func (s *Server) getRoom(c *gin.Context) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	r, err := s.n.Room(c.Param("room_id"), v)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, r)
}

// limitParam parses limit with a default and maximum.
func limitParam(c *gin.Context, def, max int) (int, error) {
	v := c.Query("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if !digits(v) || err != nil || n < 1 || n > max {
		return 0, adp.Reason(adp.CodeInvalidRequest, "limit", "limit must be an integer from 1 to "+strconv.Itoa(max))
	}
	return n, nil
}

// digits reports whether v is plain decimal digits (no sign, no spaces):
// query integers are written one way only.
func digits(v string) bool {
	if v == "" || len(v) > 19 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

func intParam(c *gin.Context, name string) (int64, error) {
	v := c.Query(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if !digits(v) || err != nil || n < 0 {
		return 0, adp.Reason(adp.CodeInvalidRequest, name, name+" must be a non-negative integer")
	}
	return n, nil
}

// pageParams reads the paging parameters of events reads: after_seq,
// limit (default 100, max 1000) and an opaque cursor that overrides
// after_seq.
func pageParams(c *gin.Context) (after int64, limit int, err error) {
	if limit, err = limitParam(c, 100, 1000); err != nil {
		return 0, 0, err
	}
	if after, err = intParam(c, "after_seq"); err != nil {
		return 0, 0, err
	}
	if cur := c.Query("cursor"); cur != "" {
		if after, err = decodeSeqCursor(cur); err != nil {
			return 0, 0, err
		}
	}
	return after, limit, nil
}

// writePage answers a list of records in the DECISIONS 2 shape.
func writePage(c *gin.Context, recs []json.RawMessage, after int64, more bool) {
	if recs == nil {
		recs = []json.RawMessage{}
	}
	out := gin.H{"result": recs}
	if more {
		out["next_cursor"] = encodeSeqCursor(after + int64(len(recs)))
	}
	writeJSON(c, http.StatusOK, out)
}

func (s *Server) events(c *gin.Context) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	after, limit, err := pageParams(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	recs, more, err := s.n.Events(c.Param("room_id"), v, after, limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	writePage(c, recs, after, more)
}

func (s *Server) members(c *gin.Context) {
	v, err := s.viewer(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ms, err := s.n.Members(c.Param("room_id"), v)
	if err != nil {
		s.fail(c, err)
		return
	}
	writeJSON(c, http.StatusOK, gin.H{"result": ms})
}

// Event cursors are opaque to clients: base64url("seq:<n>").
func encodeSeqCursor(after int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("seq:" + strconv.FormatInt(after, 10)))
}

func decodeSeqCursor(cur string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(cur)
	n, perr := strconv.ParseInt(strings.TrimPrefix(string(b), "seq:"), 10, 64)
	if err != nil || perr != nil || !strings.HasPrefix(string(b), "seq:") || n < 0 {
		return 0, adp.Reason(adp.CodeInvalidRequest, "cursor", "cursor is not one this host issued")
	}
	return n, nil
}
