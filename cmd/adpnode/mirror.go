package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/internal/optoken"
	"github.com/adpnode/adpnode/mirror"
)

func mirrorCmd() *cobra.Command {
	var nodeURL string
	var op operatorFlags
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Manage what a node mirrors (add, list, remove)",
		Long: `mirror manages a node's verified replicas of other hosts' public rooms.
Management requests carry the node's operator token, read from
--data DIR/operator.token (or --operator-token-file).`,
	}
	cmd.PersistentFlags().StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the node's HTTP origin")
	op.register(cmd)

	var kind string
	var wait, all bool
	var timeout time.Duration
	add := &cobra.Command{
		Use:   "add <room-url | host key | origin | tag>",
		Short: "Mirror one room (by Room URL), a host's public rooms, rooms with a tag, or everything (--all)",
		Long: `add stores a mirroring rule on the node. The target is a Room URL (the
default kind), a host (--kind host, its key or origin), a tag (--kind tag),
or every public room the federation announces (--all): a target is never
implied, so add with no target is refused.`,
		Example: `  adpnode mirror add https://adp.example.org/v1/rooms/d8ftedhpqhsusbg001tg
  adpnode mirror add --kind host did:agent:…
  adpnode mirror add --kind tag research
  adpnode mirror add --all`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nodeURL = nodeOfData(cmd, nodeURL, op.data)
			value := ""
			if len(args) == 1 {
				value = strings.TrimSpace(args[0])
			}
			if err := checkMirrorTarget(&kind, value, all); err != nil {
				return err
			}
			body, _ := json.Marshal(map[string]string{"kind": kind, "value": value})
			tok, err := op.token()
			if err != nil {
				return err
			}
			b, err := callAs(http.MethodPost, nodeURL+"/v1/mirrors", tok, body)
			if err != nil {
				return err
			}
			var t mirror.Target
			_ = json.Unmarshal(b, &t)
			fmt.Printf("mirroring %s\n", t.ID)
			if kind == mirror.TargetHost && !knownHost(nodeURL, tok, t.Value) {
				fmt.Fprintf(os.Stderr, "note: no host %s is known to the node yet (adpnode peers lists those it knows); the rule applies once it announces rooms\n", termSafe(t.Value))
			}
			if !wait || kind != mirror.TargetRoom {
				return nil
			}
			return waitRoom(nodeURL, value, timeout, 500*time.Millisecond)
		},
	}
	add.Flags().StringVar(&kind, "kind", "", "room (default), host, tag or all")
	add.Flags().BoolVar(&all, "all", false, "mirror every public room the federation announces (same as --kind all)")
	add.Flags().BoolVar(&wait, "wait", false, "for a room: show progress (verified N of M) until the mirror has caught up")
	add.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "with --wait: give up (exit 6) after this long")

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List mirror targets and mirrored rooms with their verified seq",
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodeURL = nodeOfData(cmd, nodeURL, op.data)
			b, err := call(http.MethodGet, nodeURL+"/v1/mirrors", nil)
			if err != nil {
				return err
			}
			if asJSON {
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					return fmt.Errorf("the node's mirror list is not JSON: %w", err)
				}
				out, _ := json.MarshalIndent(v, "", "  ")
				_, err = fmt.Fprintf(os.Stdout, "%s\n", out)
				return err
			}
			var out struct {
				Targets []mirror.Target `json:"targets"`
				Rooms   []struct {
					ID     string      `json:"id"`
					Mirror mirror.Info `json:"mirror"`
				} `json:"rooms"`
			}
			if err := json.Unmarshal(b, &out); err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "TARGET")
			for _, t := range out.Targets {
				fmt.Fprintln(w, t.ID)
			}
			fmt.Fprintln(w, "\nROOM\tVERIFIED\tFAULTY\tSTALLED\tBYTES\tURL\tERROR")
			for _, r := range out.Rooms {
				fmt.Fprintf(w, "%s\t%d of %d\t%v\t%v\t%d\t%s\t%s\n", r.ID, r.Mirror.VerifiedSeq, r.Mirror.KnownSeq, r.Mirror.Faulty, r.Mirror.Stalled, r.Mirror.Bytes,
					r.Mirror.RoomURL, r.Mirror.Error)
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the node's answer as JSON (targets, rooms with their mirror status, stats)")

	var purge bool
	remove := &cobra.Command{
		Use:   "remove <target id>",
		Short: "Stop following a target (with --purge, also delete rooms no other target wants)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nodeURL = nodeOfData(cmd, nodeURL, op.data)
			q := ""
			if purge {
				q = "?purge=true"
			}
			tok, err := op.token()
			if err != nil {
				return err
			}
			_, err = callAs(http.MethodDelete, nodeURL+"/v1/mirrors/targets/"+args[0]+q, tok, nil)
			if err == nil {
				fmt.Println("removed", args[0])
			}
			return err
		},
	}
	remove.Flags().BoolVar(&purge, "purge", false, "delete the stored records of rooms no target matches any more")
	cmd.AddCommand(add, list, remove)
	return cmd
}

// waitRoom prints the mirror's progress for a room ("verified N of M",
// M the highest seq known to exist) until it has caught up and stopped
// moving, the room turns out faulty, or timeout passes (exit 6).
func waitRoom(nodeURL, roomURL string, timeout, every time.Duration) error {
	u, err := url.Parse(roomURL)
	if err != nil {
		return err
	}
	id := u.Path[strings.LastIndex(u.Path, "/")+1:]
	deadline := time.Now().Add(timeout)
	var info mirror.Info
	seen, still := false, 0
	shown := ""
	for {
		b, err := call(http.MethodGet, nodeURL+"/v1/mirrors/rooms/"+id, nil)
		if err == nil {
			var r struct {
				Mirror mirror.Info `json:"mirror"`
			}
			if json.Unmarshal(b, &r) == nil {
				if seen && r.Mirror.VerifiedSeq == info.VerifiedSeq && r.Mirror.KnownSeq == info.KnownSeq {
					still++
				} else {
					still = 0
				}
				info, seen = r.Mirror, true
			}
		} else if exitCode(err) != exitNotFound {
			fmt.Fprintln(os.Stderr)
			return err
		}
		line := "waiting for the node to pick the room up"
		if seen {
			line = fmt.Sprintf("verified %d of %d", info.VerifiedSeq, info.KnownSeq)
			if info.Stalled && info.Error != "" {
				line += " (stalled: " + info.Error + ")"
			}
		}
		if line != shown {
			fmt.Fprintf(os.Stderr, "%s\n", line)
			shown = line
		}
		switch {
		case seen && info.Faulty:
			return fmt.Errorf("the mirror refused the room's host as faulty (see adpnode mirror list and /v1/mirrors/evidence)")
		case seen && info.KnownSeq > 0 && info.VerifiedSeq >= info.KnownSeq && still >= 2:
			fmt.Fprintf(os.Stderr, "caught up: verified %d of %d\n", info.VerifiedSeq, info.KnownSeq)
			return nil
		case time.Now().After(deadline):
			return withCode(exitUnavailable, fmt.Errorf("timed out after %v: %s (the mirror keeps following the room)", timeout, line))
		}
		time.Sleep(every)
	}
}

// operatorFlags locate the operator token a management command sends.
type operatorFlags struct{ data, file string }

func (o *operatorFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&o.data, "data", "./data", "the node's data directory (its operator.token authorises management requests)")
	cmd.PersistentFlags().StringVar(&o.file, "operator-token-file", "", "read the operator token from this file instead of --data DIR/operator.token")
}

func (o *operatorFlags) token() (string, error) {
	path := o.file
	if path == "" {
		path = filepath.Join(o.data, optoken.FileName)
	}
	tok, err := optoken.Read(path)
	if err != nil {
		return "", fmt.Errorf("operator token: %w (management commands send the token of the node they talk to: pass that node's --data DIR, or --operator-token-file FILE)", err)
	}
	return tok, nil
}

// call sends a request to a node and returns the body of a 2xx answer.
func call(method, u string, body []byte) ([]byte, error) { return callAs(method, u, "", body) }

// callAs is call with an operator token (none when empty).
func callAs(method, u, token string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := nodeHTTP().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if resp.StatusCode/100 != 2 {
		return nil, nodeError(resp.StatusCode, b)
	}
	return b, nil
}

// nodeError turns a node's error answer into a *client.Error carrying the
// spec's code and message (and data.reason in the message when given);
// an answer not in the error shape is shown by status, with a short
// excerpt of the body.
func nodeError(status int, body []byte) error {
	var e struct {
		Error *struct {
			Code    adp.Code       `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Code != "" {
		msg := e.Error.Message
		if r, ok := e.Error.Data["reason"].(string); ok && r != "" && !strings.Contains(msg, r) {
			msg += " (" + r + ")"
		}
		return &client.Error{Status: status, Code: e.Error.Code, Message: msg, Data: e.Error.Data}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return &client.Error{Status: status, Message: text}
}

func exportCmd() *cobra.Command {
	var nodeURL, format, out, keyPath string
	var fromMirror bool
	var proofWait time.Duration
	cmd := &cobra.Command{
		Use:   "export <room id or Room URL>",
		Short: "Download an ended room's archive (json, jsonl or md) from its host or from a mirror",
		Long: `export downloads an ended room's archive. A public room needs no key; a
restricted or private room is exported by a member: give that agent's key
with --key (without --key, ./agent.key is used when it exists).`,
		Example: `  adpnode export http://127.0.0.1:8080/v1/rooms/ID --format jsonl -o room.jsonl
  adpnode export ID --key alice.key -o room.json
  adpnode export ID --mirror --node http://127.0.0.1:8081 -o room.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			origin := nodeURL
			base := nodeURL + "/v1/rooms/" + args[0]
			if strings.Contains(args[0], "://") {
				base = strings.TrimSuffix(args[0], "/")
				u, err := url.Parse(base)
				if err != nil || u.Host == "" {
					return usageErrorf("room URL %q: want http(s)://host/v1/rooms/ID", args[0])
				}
				origin = u.Scheme + "://" + u.Host
			} else if fromMirror {
				base = nodeURL + "/v1/mirrors/rooms/" + args[0]
			}
			suffix := map[string]string{"json": "/archive", "jsonl": "/archive.jsonl", "md": "/archive.md"}[format]
			if suffix == "" {
				return usageErrorf("--format must be json, jsonl or md")
			}
			// The reader's key: given, or ./agent.key when there is one.
			var key *client.Key
			if _, err := os.Stat(keyPath); cmd.Flags().Changed("key") || err == nil {
				k, err := loadAgentKey(keyPath)
				if err != nil {
					return err
				}
				key = k
			}
			get := func() ([]byte, error) {
				tok := ""
				if key != nil {
					var err error
					if tok, err = newClient(origin, key).Token(); err != nil {
						return nil, err
					}
				}
				return callAs(http.MethodGet, base+suffix, tok, nil)
			}
			fmt.Fprintf(os.Stderr, "downloading %s%s …\n", base, suffix)
			b, err := get()
			if client.CodeOf(err) == adp.CodeArchiveUnavailable {
				return fmt.Errorf("%w (the room has not ended: wait for its end_time, or close it with adpnode room close)", err)
			}
			if st := statusOf(err); st == http.StatusNotFound || st == http.StatusForbidden || st == http.StatusUnauthorized {
				if key == nil {
					return fmt.Errorf("%w (a restricted or private room is exported by a member: pass --key FILE with a member's key)", err)
				}
				if st != http.StatusUnauthorized {
					return fmt.Errorf("%w (agent %s may not read this room: only its members can export it)", err, key.ID)
				}
			}
			if err != nil {
				return err
			}
			if format != "md" && proofWait > 0 && !hasHostLogProof(b) {
				// The host log covers a room's last record a few seconds
				// after it ends (a mirror fetches the proof after that);
				// without the proof the archive is not proven complete.
				fmt.Fprintf(os.Stderr, "waiting up to %s for the host log's proof of the room's last record …\n", proofWait)
				deadline := time.Now().Add(proofWait)
				for pause := 250 * time.Millisecond; !hasHostLogProof(b) && time.Now().Before(deadline); pause = min(2*pause, 4*time.Second) {
					time.Sleep(min(pause, time.Until(deadline)))
					if nb, err := get(); err == nil {
						b = nb
					}
				}
			}
			if format != "md" && !hasHostLogProof(b) {
				fmt.Fprintln(os.Stderr, "warning: the archive carries no host log proof of the room's last record (extra.host_log) yet, "+
					"so adpnode verify will not call it complete; export it again later")
			}
			if out == "" || out == "-" {
				_, err = os.Stdout.Write(b)
				return err
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", out, len(b))
			return nil
		},
	}
	cmd.Flags().StringVar(&nodeURL, "node", "http://127.0.0.1:8080", "the node's HTTP origin (when a room ID is given)")
	cmd.Flags().StringVar(&format, "format", "json", "json, jsonl or md")
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default: stdout)")
	cmd.Flags().BoolVar(&fromMirror, "mirror", false, "read the room from the node's mirror instead of its host API")
	cmd.Flags().StringVar(&keyPath, "key", "agent.key", "agent key file of a member, for a restricted or private room (used when given or when the file exists)")
	cmd.Flags().DurationVar(&proofWait, "proof-wait", 30*time.Second, "how long to wait for the host log's proof of the last record (json, jsonl; 0: do not wait)")
	return cmd
}

// statusOf is the HTTP status of a node's error answer (0 if none).
func statusOf(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Status
	}
	return 0
}

// hasHostLogProof reports whether a JSON or JSONL archive's manifest
// carries extra.host_log, the host log's proof of its last record.
func hasHostLogProof(b []byte) bool {
	type manifest struct {
		Extra map[string]json.RawMessage `json:"extra"`
	}
	var doc struct {
		Manifest *manifest `json:"manifest"`
	}
	var m manifest
	if json.Unmarshal(b, &doc) == nil && doc.Manifest != nil {
		m = *doc.Manifest // the JSON form
	} else if line, _, _ := bytes.Cut(b, []byte("\n")); json.Unmarshal(line, &m) != nil {
		return false // neither form: the JSONL manifest is the first line
	}
	p := m.Extra["host_log"]
	return len(p) > 0 && string(p) != "null"
}

// checkMirrorTarget settles the kind of a mirror add and refuses, with what
// is wrong and the command that would work, a call without a target (no
// rule is implied: mirroring everything takes --all) and the targets the
// node would refuse or misread: a room ID where a Room URL is wanted, a
// host key given as a room, a URL that names no room.
func checkMirrorTarget(kind *string, value string, all bool) error {
	if all {
		if value != "" || (*kind != "" && *kind != mirror.TargetAll) {
			return usageErrorf("--all mirrors every public room: give it without a target or --kind")
		}
		*kind = mirror.TargetAll
		return nil
	}
	switch *kind {
	case "", mirror.TargetRoom, mirror.TargetHost, mirror.TargetTag, mirror.TargetAll:
	default:
		return usageErrorf("--kind %q: the target kind must be room, host, tag or all", *kind)
	}
	if *kind == mirror.TargetAll {
		if value != "" {
			return usageErrorf("--kind all takes no target (got %q)", value)
		}
		return nil
	}
	if value == "" {
		return usageErrorf("mirror add needs a target: a Room URL (adpnode rooms prints them), --kind host KEY|ORIGIN, --kind tag TAG, or --all for every public room the federation announces")
	}
	if *kind == "" {
		*kind = mirror.TargetRoom
	}
	if *kind != mirror.TargetRoom {
		return nil
	}
	switch {
	case record.ValidRoomID(value):
		return usageErrorf("%q is a room ID, not a Room URL: give the room's URL, http(s)://HOST/v1/rooms/%s (adpnode rooms --node NODE prints it)", value, value)
	case strings.HasPrefix(value, "did:agent:"):
		return usageErrorf("%q is a host key, not a Room URL: to mirror that host's public rooms, use --kind host", value)
	}
	u, err := url.Parse(value)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return usageErrorf("%q is not a Room URL: want http(s)://HOST/v1/rooms/ROOM_ID", value)
	case !strings.Contains(u.Path, "/v1/rooms/") || !record.ValidRoomID(u.Path[strings.LastIndex(u.Path, "/")+1:]):
		if strings.Trim(u.Path, "/") == "" {
			return usageErrorf("%q names a host, not a room: want %s/v1/rooms/ROOM_ID, or --kind host %s for all its public rooms", value, strings.TrimSuffix(value, "/"), strings.TrimSuffix(value, "/"))
		}
		return usageErrorf("%q names no room: want http(s)://HOST/v1/rooms/ROOM_ID", value)
	}
	return nil
}

// knownHost reports whether the node knows a host by key or origin from
// its announcements (true when the node cannot say).
func knownHost(nodeURL, tok, value string) bool {
	b, err := callAs(http.MethodGet, strings.TrimSuffix(nodeURL, "/")+"/v1/federation/hosts", tok, nil)
	if err != nil {
		return true
	}
	var hosts struct {
		Result []struct {
			Key    string `json:"key"`
			Origin string `json:"origin"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &hosts) != nil {
		return true
	}
	for _, h := range hosts.Result {
		if h.Key == value || h.Origin == value {
			return true
		}
	}
	return false
}
