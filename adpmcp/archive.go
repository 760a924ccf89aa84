package adpmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/client"
)

type ArchiveIn struct {
	Room   string `json:"room"`
	Format string `json:"format,omitempty" jsonschema:"json (default), jsonl or md"`
}

type ArchiveOut struct {
	RoomID   string   `json:"room_id"`
	Path     string   `json:"path" jsonschema:"where the archive was saved, in the server's state directory"`
	Format   string   `json:"format"`
	Bytes    int      `json:"bytes"`
	Records  int64    `json:"records"`
	LastSeq  int64    `json:"last_seq"`
	LastHash string   `json:"last_hash"`
	Verified bool     `json:"verified" jsonschema:"the chain verifies offline: hashes, signatures, links, replay"`
	Complete bool     `json:"complete" jsonschema:"the host log proves the archive holds the whole room (adpnode verify requires it)"`
	Unproven []string `json:"unproven,omitempty" jsonschema:"why the archive is not proven complete"`
	Note     string   `json:"note,omitempty"`
}

// archiveProofWait bounds how long export_archive waits for the host
// log's proof of an ended room's last record: the log covers it about a
// second after the room ends, and without it the archive is not proven
// complete.
const archiveProofWait = 20 * time.Second

// exportArchive saves a room's archive in the state directory after
// verifying its JSON form offline (the five §19 steps of adp/archive).
func (s *Server) exportArchive(ctx context.Context, _ *mcp.CallToolRequest, in ArchiveIn) (ArchiveOut, string, error) {
	rr, err := s.resolve(in.Room)
	if err != nil {
		return ArchiveOut{}, "", err
	}
	form := map[string]string{"": "", "json": "", "jsonl": ".jsonl", "md": ".md"}
	ext, ok := form[in.Format]
	if !ok {
		return ArchiveOut{}, "", invalid("format is json, jsonl or md")
	}
	doc, err := rr.c.Archive(ctx, rr.id, "")
	if err != nil {
		if te := asToolError(err).(*toolError); te.Code == string(adp.CodeArchiveUnavailable) {
			te.Hint = "a room's archive exists once it has ended: its creator can close_room"
			return ArchiveOut{}, "", te
		}
		return ArchiveOut{}, "", err
	}
	out := ArchiveOut{RoomID: rr.id, Format: map[string]string{"": "json", ".jsonl": "jsonl", ".md": "md"}[ext]}
	rep, err := verifyArchive(doc)
	// An archive without the host log's proof yet gets it within seconds
	// of the room's end: fetch again, within a bound and the call's context.
	// A host that runs no log (its discovery names none) never adds one.
	deadline := time.Now().Add(archiveProofWait)
	if err == nil && rep.Complete.Origin == "" && !hostRunsLog(ctx, rr.c) {
		deadline = time.Now()
	}
	for pause := 250 * time.Millisecond; err == nil && rep.Complete.Origin == "" && time.Now().Before(deadline); pause = min(2*pause, 2*time.Second) {
		select {
		case <-ctx.Done():
			return ArchiveOut{}, "", ctx.Err()
		case <-time.After(pause):
		}
		if nd, ferr := rr.c.Archive(ctx, rr.id, ""); ferr == nil {
			if nrep, verr := verifyArchive(nd); verr == nil {
				doc, rep = nd, nrep
			}
		}
	}
	if err == nil {
		out.Verified, out.Records, out.LastSeq, out.LastHash = rep.RoomID == rr.id, rep.Records, rep.LastSeq, rep.LastHash
		out.Complete, out.Unproven = rep.Complete.Proven(), rep.Complete.Unproven
		if !out.Complete {
			out.Note = "the chain verifies but the archive is not proven complete: " + strings.Join(out.Unproven, "; ")
		}
	} else {
		out.Note = "the archive does not verify: " + err.Error()
	}
	body := doc
	if ext != "" {
		if body, err = rr.c.Archive(ctx, rr.id, ext); err != nil {
			return ArchiveOut{}, "", err
		}
	}
	dir := filepath.Join(s.cfg.StateDir, "archives")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ArchiveOut{}, "", err
	}
	out.Path = filepath.Join(dir, rr.id+".archive"+map[string]string{"": ".json"}[ext]+ext)
	if err := os.WriteFile(out.Path, body, 0o600); err != nil {
		return ArchiveOut{}, "", err
	}
	out.Bytes = len(body)
	sum := fmt.Sprintf("archive of %s saved to %s (%d records, verified, proven complete by the host log)", rr.id, out.Path, out.Records)
	if out.Verified && !out.Complete {
		sum = fmt.Sprintf("archive of %s saved to %s (%d records); the chain verifies but it is NOT proven complete: %s", rr.id, out.Path, out.Records, strings.Join(out.Unproven, "; "))
	}
	if !out.Verified {
		sum = fmt.Sprintf("archive of %s saved to %s; it does NOT verify", rr.id, out.Path)
	}
	return out, sum, nil
}

// verifyArchive checks an archive's JSON form offline (the five §19 steps
// of adp/archive, and what the host log proves about its completeness).
func verifyArchive(doc []byte) (*archive.Report, error) {
	a, err := archive.ParseJSON(doc)
	if err != nil {
		return nil, err
	}
	return archive.Verify(a, archive.Options{})
}

// hostRunsLog reports whether the host's discovery document names a host
// log (an unreadable document counts as yes: waiting is bounded).
func hostRunsLog(ctx context.Context, c *client.Client) bool {
	raw, err := c.Discovery(ctx)
	if err != nil {
		return true
	}
	var d struct {
		Log json.RawMessage `json:"log"`
	}
	return json.Unmarshal(raw, &d) != nil || (len(d.Log) > 0 && string(d.Log) != "null")
}
