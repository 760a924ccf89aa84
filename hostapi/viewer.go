package hostapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// The web viewer (docs/viewer.md): static assets embedded in the
// binary and served at / and /ui/, plus the viewer-token extension that lets
// a browser follow a public room live without a request JWT.

//go:embed web
var webRoot embed.FS

// ViewerTokenTTL is the lifetime of a viewer token. A token authorizes
// opening a viewer stream; a stream already open is not cut when it expires.
const ViewerTokenTTL = 2 * time.Minute

// MaxViewerStreams caps the viewer streams open at once in this process.
const MaxViewerStreams = 1024

// ViewerCSP is the Content-Security-Policy of every viewer asset: scripts
// and styles from this origin only, no inline script, no plugins, no
// framing, no remote connections, and Trusted Types enforced so that no
// HTML string can reach an HTML sink.
const ViewerCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

// viewerKey signs viewer tokens: random per process, so tokens die with it.
var viewerKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}()

// DefaultViewerStreamsPerClient caps the viewer streams one client (by
// remote IP) may hold open, so that one client cannot spend the
// process-wide MaxViewerStreams.
const DefaultViewerStreamsPerClient = 16

var viewerStreams atomic.Int64

// clientCounter counts open streams per client key.
type clientCounter struct {
	mu sync.Mutex
	m  map[string]int
}

func newClientCounter() *clientCounter { return &clientCounter{m: map[string]int{}} }

// acquire takes one slot for key unless it already holds max.
func (c *clientCounter) acquire(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[key] >= max {
		return false
	}
	c.m[key]++
	return true
}

func (c *clientCounter) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[key]--; c.m[key] <= 0 {
		delete(c.m, key)
	}
}

// clientKey is the client's IP address (no port): the unit the per-client
// caps count. Behind a reverse proxy every client shares the proxy's IP.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type webAsset struct {
	body  []byte
	ctype string
	etag  string
}

var webAssets = func() map[string]webAsset {
	sub, err := fs.Sub(webRoot, "web")
	if err != nil {
		panic(err)
	}
	out := map[string]webAsset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[p] = webAsset{body: b, ctype: assetType(p), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}()

func assetType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

func (s *Server) viewerRoutes() {
	s.engine.GET("/", func(c *gin.Context) { serveAsset(c, "index.html") })
	s.engine.GET("/ui/*file", func(c *gin.Context) {
		name := strings.TrimPrefix(c.Param("file"), "/")
		if name == "index.html" || strings.Contains(name, "..") {
			name = ""
		}
		if _, ok := webAssets[name]; !ok {
			s.fail(c, adp.Errorf(adp.CodeNotFound, "no such viewer asset"))
			return
		}
		serveAsset(c, name)
	})
	s.engine.POST("/v1/viewer-tokens", s.viewerToken)
	s.engine.GET("/v1/rooms/:room_id/events/view", s.viewerStream)
}

func serveAsset(c *gin.Context, name string) {
	a := webAssets[name]
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", ViewerCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	if c.GetHeader("If-None-Match") == a.etag {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, a.ctype, a.body)
}

// viewerMAC binds a token to this node's origin, the room and the expiry.
func (s *Server) viewerMAC(roomID string, exp int64) []byte {
	m := hmac.New(sha256.New, viewerKey)
	m.Write([]byte("adp-viewer-token/1\n" + s.n.Origin() + "\n" + roomID + "\n" + strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

// ViewerToken mints a viewer token for roomID expiring at exp (Unix ms):
// "<room_id>.<exp>.<base64url HMAC-SHA256>".
func (s *Server) ViewerToken(roomID string, exp int64) string {
	return roomID + "." + strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(s.viewerMAC(roomID, exp))
}

// checkViewerToken verifies a token for roomID at the node's current time.
func (s *Server) checkViewerToken(tok, roomID string) error {
	bad := func(msg string) error { return adp.Errorf(adp.CodeInvalidToken, "viewer token: %s", msg) }
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return bad("malformed")
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	mac, merr := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || merr != nil {
		return bad("malformed")
	}
	if !hmac.Equal(mac, s.viewerMAC(parts[0], exp)) {
		return bad("bad signature")
	}
	if parts[0] != roomID {
		return bad("issued for another room")
	}
	now := s.n.NowMs()
	if now >= exp {
		return bad("expired")
	}
	if exp > now+ViewerTokenTTL.Milliseconds()+1000 {
		return bad("lifetime too long")
	}
	return nil
}

// viewerToken handles POST /v1/viewer-tokens {"room_id"}: a short-lived
// token to follow a public room of this host live from a browser.
func (s *Server) viewerToken(c *gin.Context) {
	b, err := s.body(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var in struct {
		RoomID string `json:"room_id"`
	}
	if json.Unmarshal(b, &in) != nil || !record.ValidRoomID(in.RoomID) {
		s.fail(c, adp.Reason(adp.CodeInvalidRequest, "room_id", `body must be {"room_id": "<room id>"}`))
		return
	}
	sum, ok := s.n.Summary(in.RoomID)
	switch {
	case !ok || sum.Visibility == room.Private:
		err = adp.Errorf(adp.CodeRoomNotFound, "room does not exist on this host")
	case sum.Visibility != room.Public:
		err = adp.Errorf(adp.CodeMembershipRequired, "viewer tokens are for public rooms; members use the live stream")
	case sum.Status == room.StatusEnded || sum.Status == room.StatusCancelled:
		err = adp.Errorf(adp.CodeRoomEnded, "room is no longer live")
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	exp := s.n.NowMs() + ViewerTokenTTL.Milliseconds()
	tok := s.ViewerToken(in.RoomID, exp)
	c.Header("Cache-Control", "no-store")
	writeJSON(c, http.StatusCreated, gin.H{"token": tok, "room_id": in.RoomID, "expires_at": exp,
		"stream_url": s.n.RoomURL(in.RoomID) + "/events/view?token=" + tok})
}

// viewerStream handles GET /v1/rooms/{room_id}/events/view?token=…: the
// room's room.event items as SSE, read-only, for public rooms.
func (s *Server) viewerStream(c *gin.Context) {
	roomID := c.Param("room_id")
	if err := s.checkViewerToken(c.Query("token"), roomID); err != nil {
		s.fail(c, err)
		return
	}
	client := clientKey(c.Request)
	if !s.viewers.acquire(client, s.opts.ViewerStreamsPerClient) {
		s.fail(c, &adp.Error{Code: adp.CodeRateLimited, Message: "too many viewer streams from this client",
			Data: map[string]any{"limit": s.opts.ViewerStreamsPerClient, "retry_after_ms": int64(10_000)}})
		return
	}
	defer s.viewers.release(client)
	if viewerStreams.Add(1) > MaxViewerStreams {
		viewerStreams.Add(-1)
		s.fail(c, &adp.Error{Code: adp.CodeRateLimited, Message: "too many viewer streams on this host",
			Data: map[string]any{"retry_after_ms": int64(10_000)}})
		return
	}
	defer viewerStreams.Add(-1)
	sub, err := s.n.SubscribeViewer(roomID)
	if err != nil {
		s.fail(c, err)
		return
	}
	defer s.n.UnsubscribeViewer(sub)
	c.Header("X-Content-Type-Options", "nosniff")
	s.pump(c, "subscribed", sub.C, sub.Reason)
}
