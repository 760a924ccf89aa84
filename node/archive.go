package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/transcript"
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
	n.archiveMu.RLock()
	hostLog, hostKey := n.archiveLog, n.archiveKey
	n.archiveMu.RUnlock()
	if hostKey != "" {
		m.Extra["host_key"] = hostKey
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
		werr = transcript.WriteNamed(w, m, st, st.Resource(n.NowMs(), n.RoomURL(hr.id)), recs, n.profileName)
	}); err != nil {
		return err
	}
	return werr
}
