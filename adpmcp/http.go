package adpmcp

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions guard the Streamable HTTP endpoint.
type HTTPOptions struct {
	// Token, when set, is the bearer token every request must carry.
	Token string
	// AllowOrigins are browser origins (scheme://host[:port]) allowed
	// besides loopback ones.
	AllowOrigins []string
}

// HTTPHandler serves the MCP Streamable HTTP transport at /mcp. A request
// with an Origin header must come from a loopback origin or one in
// AllowOrigins (403 otherwise: a web page must not drive the agent); with
// a Token, one without "Authorization: Bearer <token>" gets 401.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		SessionTimeout: 30 * time.Minute,
		Logger:         s.log,
	})
	allowed := map[string]bool{}
	for _, a := range o.AllowOrigins {
		allowed[strings.TrimSuffix(a, "/")] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowed[origin] && !LoopbackOrigin(origin) {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		if o.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="adpnode mcp"`)
				http.Error(w, "a bearer token is required", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
	return mux
}

// LoopbackOrigin reports whether an Origin header names a loopback host.
func LoopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return LoopbackHost(u.Hostname())
}

// LoopbackHost reports whether host is localhost or a loopback IP.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
