package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// Wake makes the scheduler re-evaluate every due transition now (after a
// test moves the clock, for instance).
func (n *Node) Wake() {
	select {
	case n.sched.wake <- struct{}{}:
	default:
	}
}

// archiveInputs gathers what an archive of an ended room needs.
func (n *Node) archiveInputs(roomID string, viewer identity.AgentID) (*hostedRoom, []*record.Record, int64, error) {
	hr, err := n.readableEvents(roomID, viewer)
	if err != nil {
		return nil, nil, 0, err
	}
	now := n.NowMs()
	status := n.lifecycle(hr).StatusAt(now)
	last := n.lastSeq(hr)
	if status != room.StatusEnded {
		return nil, nil, 0, &adp.Error{Code: adp.CodeArchiveUnavailable, Message: "archives exist once the room has ended",
			Data: map[string]any{"status": status}}
	}
	if hr.archivedAt.Load() == 0 {
		n.finish(hr, status) // the scheduler has not run yet
	}
	raws, err := n.readRecords(hr.id, 0, int(last))
	if err != nil {
		return nil, nil, 0, internal(err)
	}
	recs := make([]*record.Record, len(raws))
	for i, raw := range raws {
		if recs[i], _, err = record.Parse(raw); err != nil {
			return nil, nil, 0, internal(fmt.Errorf("stored record %d: %w", i+1, err))
		}
	}
	return hr, recs, hr.archivedAt.Load(), nil
}

// Archive returns the JSON archive of an ended room (§19, DECISIONS 3).
func (n *Node) Archive(roomID string, viewer identity.AgentID) (*archive.Archive, error) {
	hr, recs, at, err := n.archiveInputs(roomID, viewer)
	if err != nil {
		return nil, err
	}
	m := n.manifest(hr, recs, at)
	var res *room.Resource
	var packs []archive.PackDoc
	if err := n.view(hr, func(st *room.State) {
		res = st.Resource(n.NowMs(), n.RoomURL(hr.id))
		packs = archive.PackDocs(st.Imports)
	}); err != nil {
		return nil, err
	}
	roomJSON, _ := json.Marshal(res)
	a := &archive.Archive{Manifest: m, Room: roomJSON, Packs: packs, Records: make([]json.RawMessage, len(recs))}
	for i, r := range recs {
		a.Records[i], _ = r.MarshalJSON()
	}
	return a, nil
}

func (n *Node) manifest(hr *hostedRoom, recs []*record.Record, at int64) archive.Manifest {
	m := archive.NewManifest(n.host, n.RoomURL(hr.id), recs, at)
	n.lisMu.RLock()
	extra, hostLog := n.archiveExtra, n.archiveLog
	n.lisMu.RUnlock()
	if extra != nil {
		for k, v := range extra(hr.id) {
			m.Extra[k] = v
		}
	}
	if hostLog != nil && m.LastHash != "" {
		if v := hostLog(m.LastHash); v != nil {
			m.Extra["host_log"] = v
		}
	}
	m.Formats = map[string]string{
		"json":     n.RoomURL(hr.id) + "/archive",
		"jsonl":    n.RoomURL(hr.id) + "/archive.jsonl",
		"markdown": n.RoomURL(hr.id) + "/archive.md",
	}
	return m
}

// WriteArchiveJSONL writes the JSONL archive: manifest line, then records.
func (n *Node) WriteArchiveJSONL(w io.Writer, roomID string, viewer identity.AgentID) error {
	hr, recs, at, err := n.archiveInputs(roomID, viewer)
	if err != nil {
		return err
	}
	var packs []archive.PackDoc
	if err := n.view(hr, func(st *room.State) { packs = archive.PackDocs(st.Imports) }); err != nil {
		return err
	}
	return archive.WriteJSONL(bufio.NewWriter(w), n.manifest(hr, recs, at), packs, recs)
}

// WriteArchiveMarkdown writes a readable transcript. Agent content is
// untrusted: it is quoted as text (fenced, never interpreted as Markdown
// structure or HTML by this writer).
func (n *Node) WriteArchiveMarkdown(w io.Writer, roomID string, viewer identity.AgentID) error {
	hr, recs, at, err := n.archiveInputs(roomID, viewer)
	if err != nil {
		return err
	}
	m := n.manifest(hr, recs, at)
	var werr error
	if err := n.view(hr, func(st *room.State) {
		werr = WriteTranscript(w, m, st, st.Resource(n.NowMs(), n.RoomURL(hr.id)), recs)
	}); err != nil {
		return err
	}
	return werr
}

// WriteTranscript writes the Markdown transcript of an ended room from its
// manifest, replayed state, resource and records: the host's archive.md,
// and a mirror's of a mirrored room. The caller keeps st from changing.
func WriteTranscript(w io.Writer, m archive.Manifest, st *room.State, res *room.Resource, recs []*record.Record) error {
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
		fmt.Fprintf(bw, "- `%s` (%s)%s\n", mb.Agent, mb.Role, p)
	}
	fmt.Fprintf(bw, "\n## Transcript\n\n")
	for _, r := range recs {
		env, err := identity.ParseEnvelope(r.Envelope)
		if err != nil {
			continue
		}
		fmt.Fprintf(bw, "### #%d %s — `%s`\n\n", r.Seq, env.Event.Type, env.Event.Actor)
		fmt.Fprintf(bw, "_%s_ · hash `%s`\n\n", msTime(r.ReceivedAt), r.Hash)
		if env.Event.Type == "message.create" {
			var p struct {
				ContentType string          `json:"content_type"`
				Content     json.RawMessage `json:"content"`
			}
			json.Unmarshal(env.Event.Payload, &p)
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
