package adpmcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/buildinfo"
)

// Bounds of one server.
const (
	maxWatchedRooms  = 256      // rooms wait watches by default
	maxChains        = 512      // rooms whose verified chain is cached
	maxAnswerBytes   = 96 << 10 // content in one answer
	maxContentBytes  = 8 << 10  // content of one item
	defaultReadLimit = 50       // read_room's default page
	maxReadLimit     = 200      // and its largest
	maxWaitSeconds   = 60       // wait's longest
	defaultWait      = 25       // and its default
	maxWaitEvents    = 50       // events one wait returns
	mentionPoll      = 500 * time.Millisecond
	progressEvery    = 5 * time.Second
	answerTimeout    = 30 * time.Second
	defaultMaxWaits  = 4
	defaultMaxFollow = 32
)

// Config configures a Server.
type Config struct {
	// Key is the agent's key; KeyPath its file (sealing keys live beside
	// it, in KeyPath.seal).
	Key     *client.Key
	KeyPath string
	// Node is the home node's public origin: room IDs name rooms there.
	Node string
	// StateDir holds cursors, subscriptions and the post log.
	StateDir string
	// HTTP is the client's HTTP client (nil: the client's default).
	HTTP *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log receives operational messages (nil: discarded). Never secrets.
	Log *slog.Logger
	// MaxWaitsPerSession bounds concurrent waits of one session (0: 4).
	MaxWaitsPerSession int
	// MaxFollows bounds live room connections of the server (0: 32).
	MaxFollows int
	// FollowOptions tune the live room connections (tests shorten them).
	FollowOptions client.FollowOptions
	// ProgressInterval is how often a wait with a progress token reports
	// progress (0: 5 s).
	ProgressInterval time.Duration
}

// Server is one agent's MCP server.
type Server struct {
	cfg    Config
	mcp    *mcp.Server
	home   *client.Client
	seal   *client.SealKeys
	store  *store
	chains chains
	live   *liveRooms
	log    *slog.Logger

	mu      sync.Mutex
	clients map[string]*client.Client // by origin
	waits   map[string]int            // active waits by session ID
	subs    map[*mcp.ServerSession]map[string]func()

	names nameCache

	refused   atomic.Int64
	inboxRefs int
	inboxStop context.CancelFunc

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds a server (its state directory is created if needed).
func New(cfg Config) (*Server, error) {
	if cfg.Key == nil {
		return nil, errors.New("adpmcp: no agent key")
	}
	if cfg.Node == "" {
		return nil, errors.New("adpmcp: no node")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("adpmcp: no state directory")
	}
	if cfg.MaxWaitsPerSession <= 0 {
		cfg.MaxWaitsPerSession = defaultMaxWaits
	}
	if cfg.MaxFollows <= 0 {
		cfg.MaxFollows = defaultMaxFollow
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = progressEvery
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Node = strings.TrimSuffix(cfg.Node, "/")
	st, err := openStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: st, log: cfg.Log, clients: map[string]*client.Client{},
		waits: map[string]int{}, subs: map[*mcp.ServerSession]map[string]func(){}}
	if cfg.KeyPath != "" {
		ks, err := client.LoadOrCreateSealKeys(client.SealKeyPath(cfg.KeyPath), cfg.Key.ID)
		if err != nil {
			return nil, err
		}
		s.seal = ks
	} else if s.seal, err = client.NewSealKeys(); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.home = s.clientFor(cfg.Node)
	s.live = newLiveRooms(s, cfg.MaxFollows)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "adpnode", Title: "ADP rooms", Version: buildinfo.Get().Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       cfg.Log,
		Capabilities: &mcp.ServerCapabilities{},
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			s.watchSession(req.Session)
		},
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
	})
	s.mcp.AddReceivingMiddleware(s.recoverMiddleware)
	s.addTools()
	s.addRoundTools()
	s.addResources()
	s.addPrompts()
	return s, nil
}

const instructions = `Tools to find, join and talk in ADP rooms (Agent Discourse Protocol) as one agent.
Read the room_etiquette prompt first. Records come back verified (signatures and hash chain);
never trust one marked verified:false. Use wait to block until someone answers.`

// MCP returns the SDK server (to Run it on a transport, or serve HTTP).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session on t until it ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error { return s.mcp.Run(ctx, t) }

// LiveRooms is the number of rooms followed live now (shared by every
// wait and resource subscription on them).
func (s *Server) LiveRooms() int { return s.live.count() }

// Subscriptions is the number of resource subscriptions held by sessions.
func (s *Server) Subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.subs {
		n += len(m)
	}
	return n
}

// Refused counts resource subscriptions refused (unknown resource, a
// room the agent may not read, the live-room bound).
func (s *Server) Refused() int64 { return s.refused.Load() }

// Close stops the live room connections and pollers.
func (s *Server) Close() {
	s.cancel()
	s.live.close()
	s.wg.Wait()
}

// clientFor returns the client of the host at origin (one per origin,
// all signing as the agent with its sealing keys).
func (s *Server) clientFor(origin string) *client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[origin]; c != nil {
		return c
	}
	c := client.New(origin, s.cfg.Key)
	if s.cfg.HTTP != nil {
		c.HTTP = s.cfg.HTTP
	}
	c.Now, c.Seal = s.cfg.Now, s.seal
	c.OnBadWrap = func(r client.BadWrapReport) {
		s.log.Warn("bad sealing key wrap", "room", r.Room, "recovered_epoch", r.Recovered)
	}
	if len(s.clients) < 64 {
		s.clients[origin] = c
	}
	return c
}

// roomRef is a resolved room argument.
type roomRef struct {
	c   *client.Client
	id  string
	url string // the Room URL: the key of cursors and caches
}

// resolve accepts a room ID (on the home node) or a Room URL (any host).
func (s *Server) resolve(ref string) (roomRef, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return roomRef{}, invalid("room is required: a room ID or a Room URL")
	}
	if !strings.Contains(ref, "://") {
		if !validRoomID(ref) {
			return roomRef{}, invalid("room must be a room ID (20 characters) or a Room URL")
		}
		return roomRef{c: s.home, id: ref, url: s.cfg.Node + "/v1/rooms/" + ref}, nil
	}
	u, err := url.Parse(ref)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return roomRef{}, invalid("room URL must be http(s)://host/v1/rooms/ID")
	}
	i := strings.LastIndex(u.Path, "/v1/rooms/")
	if i < 0 {
		return roomRef{}, invalid("room URL must be http(s)://host/v1/rooms/ID")
	}
	id := strings.Trim(u.Path[i+len("/v1/rooms/"):], "/")
	if !validRoomID(id) {
		return roomRef{}, invalid("room URL must end in a room ID")
	}
	origin := u.Scheme + "://" + u.Host + u.Path[:i]
	return roomRef{c: s.clientFor(origin), id: id, url: origin + "/v1/rooms/" + id}, nil
}

func validRoomID(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'v') {
			return false
		}
	}
	return true
}

// toolError is what a tool call that failed answers (isError: true): the
// ADP code, the host's message and a one-line hint.
type toolError struct {
	Code    string
	Message string
	Hint    string
}

func (e *toolError) Error() string {
	s := e.Code + ": " + e.Message
	if e.Hint != "" {
		s += "\nhint: " + e.Hint
	}
	return s
}

func invalid(msg string) error {
	return &toolError{Code: string(adp.CodeInvalidRequest), Message: msg}
}

// hints are the next step for an agent per ADP code.
var hints = map[adp.Code]string{
	adp.CodeMembershipRequired: "join the room first: call join_room with this room (restricted and private rooms need a creator or moderator to approve; call join_room again later)",
	adp.CodeRoomHeadMismatch:   "the room moved on; read_room and post again",
	adp.CodeRoomNotFound:       "check the room ID, or pass the full Room URL for a room on another host",
	adp.CodeRateLimited:        "slow down and try again later",
	adp.CodeRoleNotAllowed:     "your role may not do this; a moderator or the creator can",
	adp.CodePermissionDenied:   "you are not allowed to do this in this room",
	adp.CodeApprovalRequired:   "this room needs an approved join request: call join_room, then wait for the creator to approve",
	adp.CodeRoomNotActive:      "the room is not active (scheduled, ended or cancelled); get_room shows its status",
	adp.CodeRoomEnded:          "the room has ended; its transcript can still be read",
	adp.CodeInvalidToken:       "the server's clock or the node URL may be wrong (the token audience is the node's public URL)",
}

// asToolError turns any error into a toolError (never a secret: the
// client's errors carry no keys).
func asToolError(err error) error {
	var te *toolError
	if errors.As(err, &te) {
		return te
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		msg := ce.Message
		hint := hints[ce.Code]
		if r, ok := ce.Data["reason"].(string); ok && r != "" {
			msg += " (reason: " + r + ")"
			if r == "not_member" {
				hint = hints[adp.CodeMembershipRequired]
			}
		}
		return &toolError{Code: string(ce.Code), Message: msg, Hint: hint}
	}
	var ae *adp.Error
	if errors.As(err, &ae) {
		return &toolError{Code: string(ae.Code), Message: ae.Message, Hint: hints[ae.Code]}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &toolError{Code: "cancelled", Message: err.Error()}
	}
	return &toolError{Code: "unavailable", Message: err.Error(), Hint: "the host could not be reached or answered badly; try again"}
}

// recoverMiddleware keeps a panicking handler from ending the session.
func (s *Server) recoverMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("handler panic", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if method == "tools/call" {
					r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "internal: the server failed on this call"}}}
					res, err = r, nil
					return
				}
				res, err = nil, errors.New("internal error")
			}
		}()
		return next(ctx, method, req)
	}
}

// watchSession releases what a session held when it ends.
func (s *Server) watchSession(ss *mcp.ServerSession) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		done := make(chan struct{})
		go func() { _ = ss.Wait(); close(done) }()
		select {
		case <-done:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		rel := s.subs[ss]
		delete(s.subs, ss)
		delete(s.waits, ss.ID())
		s.mu.Unlock()
		for _, f := range rel {
			f()
		}
	}()
}
