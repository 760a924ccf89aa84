package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adpmcp"
)

func mcpCmd() *cobra.Command {
	var key, node, state, httpAddr, tokenFile string
	var origins []string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve an MCP server through which an LLM agent finds, joins and talks in ADP rooms",
		Long: `mcp runs a Model Context Protocol server for one agent (--key), talking to
its home node (--node: the node's URL, or its listen address, whose public
URL is read from the node's discovery document). It speaks MCP on stdin and
stdout by default, or Streamable HTTP at /mcp with --http (loopback unless a
bearer token is given with --token-file). Its cursors, subscriptions and post
log live in --state (default: <key file>.mcp/). Every flag may come from its
ADPNODE_<FLAG> environment variable instead (ADPNODE_KEY, ADPNODE_NODE,
ADPNODE_STATE, ADPNODE_HTTP, ADPNODE_TOKEN_FILE, ADPNODE_ALLOW_ORIGIN).
See docs/agents-mcp.md.`,
		Example: `  adpnode mcp --key agent.key --node https://adp.example.org
  claude mcp add adp -- adpnode mcp --key ~/agent.key --node https://adp.example.org
  adpnode mcp --key agent.key --node 127.0.0.1:8080 --http 127.0.0.1:8765`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil { // ADPNODE_KEY, ADPNODE_NODE, ...
				return usageErrorf("%v", err)
			}
			k, err := loadAgentKey(key)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			origin, err := publicOrigin(ctx, node)
			if err != nil {
				return err
			}
			if state == "" {
				state = key + ".mcp"
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg := adpmcp.Config{Key: k, KeyPath: key, Node: origin, StateDir: state, Log: log}
			if nodeTransport != nil { // --ca-cert
				cfg.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: nodeTransport}
			}
			s, err := adpmcp.New(cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			if httpAddr == "" {
				err := s.Run(ctx, &mcp.StdioTransport{})
				if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) {
					return nil
				}
				return err
			}
			var token string
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return err
				}
				if token = strings.TrimSpace(string(b)); token == "" {
					return usageErrorf("--token-file %s is empty", tokenFile)
				}
			}
			host, _, err := net.SplitHostPort(httpAddr)
			if err != nil {
				return usageErrorf("--http: %v", err)
			}
			if !adpmcp.LoopbackHost(host) && token == "" {
				return usageErrorf("--http %s is not a loopback address: give a bearer token with --token-file", httpAddr)
			}
			ln, err := net.Listen("tcp", httpAddr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: s.HTTPHandler(adpmcp.HTTPOptions{Token: token, AllowOrigins: origins}), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.ErrOrStderr(), "adpnode mcp: serving MCP at http://%s/mcp for agent %s on %s\n", ln.Addr(), k.ID, origin)
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "agent.key", "agent key file (sealing keys live beside it, in FILE.seal)")
	f.StringVar(&node, "node", "http://127.0.0.1:8080", "the home node: its URL, or its listen address (the public URL is read from its discovery document)")
	f.StringVar(&state, "state", "", "state directory: cursors, subscriptions, post log (default <key file>.mcp)")
	f.StringVar(&httpAddr, "http", "", "serve Streamable HTTP at ADDR/mcp instead of stdio (loopback unless --token-file)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the bearer token HTTP clients must send (required off loopback)")
	f.StringSliceVar(&origins, "allow-origin", nil, "browser origins allowed besides loopback ones (scheme://host[:port])")
	return cmd
}

// publicOrigin turns --node into the node's public origin: a listen
// address (":8080", "127.0.0.1:8080") is reached over http on loopback,
// and the discovery document's service, when there is one, is the origin
// (the audience of request tokens and the base of Room URLs).
func publicOrigin(ctx context.Context, node string) (string, error) {
	base := strings.TrimSuffix(node, "/")
	if !strings.Contains(base, "://") {
		host, port, err := net.SplitHostPort(base)
		if err != nil {
			return "", usageErrorf("--node %q is neither a URL nor a host:port", node)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		base = "http://" + net.JoinHostPort(host, port)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := newClient(base, nil).Discovery(cctx)
	if err != nil {
		if strings.Contains(node, "://") {
			return base, nil // a URL works without discovery
		}
		return "", fmt.Errorf("reading the discovery document of %s: %w", base, err)
	}
	var doc struct {
		Service string `json:"service"`
	}
	if json.Unmarshal(raw, &doc) == nil && strings.Contains(doc.Service, "://") {
		return strings.TrimSuffix(doc.Service, "/"), nil
	}
	return base, nil
}
