// Package transcript renders the readable Markdown transcript of an ended
// room (archive.md) from its manifest, replayed state and records: the
// host's of its own rooms, and a mirror's of a mirrored room.
package transcript

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/profile"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// Write writes the Markdown transcript of an ended room from its
// manifest, replayed state, resource and records: the host's archive.md,
// and a mirror's of a mirrored room. The caller keeps st from changing.
func Write(w io.Writer, m archive.Manifest, st *room.State, res *room.Resource, recs []*record.Record) error {
	return WriteNamed(w, m, st, res, recs, nil)
}

// WriteNamed is Write with agents' self-asserted profile names (names
// returns "" for an agent without one; nil: none). A name is shown after
// the Agent ID, made inert (no control or bidi characters) and escaped,
// and marked self-asserted: the ID is the agent.
func WriteNamed(w io.Writer, m archive.Manifest, st *room.State, res *room.Resource, recs []*record.Record, names func(identity.AgentID) string) error {
	named := map[identity.AgentID]string{}
	nameOf := func(a identity.AgentID) string {
		if names == nil {
			return ""
		}
		n, ok := named[a]
		if !ok {
			if n = profile.Inert(names(a)); n != "" {
				n = " " + mdInline(n) + " _(self-asserted name)_"
			}
			named[a] = n
		}
		return n
	}
	members := st.AllMembers()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s\n\n", mdInline(res.Topic))
	fmt.Fprintf(bw, "- Room: %s\n- Status: %s\n- Visibility: %s\n- Start: %s\n- End: %s\n- Records: %d\n- Last hash: `%s`\n- events_sha3_256: `%s`\n\n",
		res.URL, res.Status, res.Visibility, msTime(res.StartTime), msTime(st.EndedAt()), m.EventCount, m.LastHash, m.EventsSHA3)
	if res.Agenda != "" {
		fmt.Fprintf(bw, "## Agenda\n\n%s\n\n", mdQuote(res.Agenda))
	}
	if res.Guidance != "" {
		fmt.Fprintf(bw, "## Guidance\n\n%s\n\n", mdQuote(res.Guidance))
	}
	fmt.Fprintf(bw, "## Members\n\n")
	for _, mb := range members {
		p := ""
		if mb.Perspective != "" {
			p = " — " + mdInline(mb.Perspective)
		}
		fmt.Fprintf(bw, "- `%s`%s (%s)%s\n", mb.Agent, nameOf(mb.Agent), mb.Role, p)
	}
	fmt.Fprintf(bw, "\n## Transcript\n\n")
	for _, r := range recs {
		env, err := identity.ParseEnvelope(r.Envelope)
		if err != nil {
			continue
		}
		fmt.Fprintf(bw, "### #%d %s — `%s`%s\n\n", r.Seq, env.Event.Type, env.Event.Actor, nameOf(env.Event.Actor))
		fmt.Fprintf(bw, "_%s_ · hash `%s`\n\n", msTime(r.ReceivedAt), r.Hash)
		if env.Event.Type == "message.create" {
			var p struct {
				ContentType string          `json:"content_type"`
				Content     json.RawMessage `json:"content"`
			}
			_ = json.Unmarshal(env.Event.Payload, &p)
			var text string
			if json.Unmarshal(p.Content, &text) != nil {
				text = string(p.Content)
			}
			fmt.Fprintf(bw, "%s\n\n", mdFence(text, ""))
		} else {
			fmt.Fprintf(bw, "%s\n\n", mdFence(string(env.Event.Payload), "json"))
		}
	}
	counts := st.Counts()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(bw, "## Counts\n\n")
	for _, k := range keys {
		fmt.Fprintf(bw, "- %s: %d\n", k, counts[k])
	}
	return bw.Flush()
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// mdFence wraps untrusted text in a code fence longer than any backtick run
// inside it, so it renders as literal text.
func mdFence(s, lang string) string {
	run, longest := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return fence + lang + "\n" + s + "\n" + fence
}

// mdQuote renders untrusted text as a fenced block.
func mdQuote(s string) string { return mdFence(s, "") }

// mdInline escapes untrusted single-line text.
func mdInline(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune("\\`*_{}[]()#+-.!<>|~&", c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
