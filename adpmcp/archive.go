package adpmcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/archive"
)

type ArchiveIn struct {
	Room   string `json:"room"`
	Format string `json:"format,omitempty" jsonschema:"json (default), jsonl or md"`
}

type ArchiveOut struct {
	RoomID   string `json:"room_id"`
	Path     string `json:"path" jsonschema:"where the archive was saved, in the server's state directory"`
	Format   string `json:"format"`
	Bytes    int    `json:"bytes"`
	Records  int64  `json:"records"`
	LastSeq  int64  `json:"last_seq"`
	LastHash string `json:"last_hash"`
	Verified bool   `json:"verified"`
	Note     string `json:"note,omitempty"`
}

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
	a, err := archive.ParseJSON(doc)
	if err == nil {
		var rep *archive.Report
		if rep, err = archive.Verify(a, archive.Options{}); err == nil {
			out.Verified, out.Records, out.LastSeq, out.LastHash = rep.RoomID == rr.id, rep.Records, rep.LastSeq, rep.LastHash
		}
	}
	if err != nil {
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
	sum := fmt.Sprintf("archive of %s saved to %s (%d records, verified)", rr.id, out.Path, out.Records)
	if !out.Verified {
		sum = fmt.Sprintf("archive of %s saved to %s; it does NOT verify", rr.id, out.Path)
	}
	return out, sum, nil
}
