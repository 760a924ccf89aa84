package federation

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/httpwire"
	"github.com/adpnode/adpnode/index"
)

// Stream protocols.
const (
	RelayProtocol    = "/adp/relay/1.0.0"
	BackfillProtocol = "/adp/backfill/1.0.0"
)

const maxFrame = 8 << 20

// BackfillBytes is the byte budget of one backfill batch, well below the
// reader's frame limit (maxFrame): a batch stops at whichever of its
// record count and this budget comes first (always at least one record).
const BackfillBytes = 4 << 20

// writeFrame writes a 4-byte big-endian length and the bytes.
func writeFrame(w io.Writer, b []byte) error {
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(b)))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func readFrame(r io.Reader, max int) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if int(n) > max {
		return nil, fmt.Errorf("frame of %d bytes exceeds %d", n, max)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// relayRequest asks the authoritative host to accept an envelope.
type relayRequest struct {
	RoomID string `json:"room_id"`
	Body   []byte `json:"body"` // the agent's request body, unchanged
}

// serveRelay runs on the authoritative host: it submits the relayed body
// exactly as if it had arrived over HTTP and returns the HTTP answer.
func (f *Federation) serveRelay(s network.Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	b, err := readFrame(bufio.NewReader(s), int(f.n.MaxBodyBytes())+4096)
	if err != nil {
		s.Reset()
		return
	}
	var req relayRequest
	var ans httpwire.Answer
	if err := json.Unmarshal(b, &req); err != nil || req.RoomID == "" {
		ans = httpwire.Error(adp.Reason(adp.CodeInvalidRequest, "relay", "malformed relay request"))
	} else if int64(len(req.Body)) > f.n.MaxBodyBytes() {
		ans = httpwire.Error(&adp.Error{Code: adp.CodePayloadTooLarge, Message: "request body exceeds the limit"})
	} else {
		res, err := f.n.Submit(f.ctx, req.Body, req.RoomID)
		ans = httpwire.Submit(res, err)
	}
	out, _ := json.Marshal(ans)
	_ = writeFrame(s, out) // the peer reads the frame or sees the stream end
}

// Relay forwards an agent's write for a room this node does not host to
// the room's authoritative host, found in the index, and returns that
// host's answer unchanged. Only a host whose binding (origin, host key,
// peer ID) is verified is ever relayed to: when the index knows the room
// only from unverified claims, the answer is relay_failed with
// data.reason "unverified_host". ok is false when the index does not know
// the room (the caller answers room_not_found itself).
// Locate returns the directory entry of a remote room announced by a
// host whose binding is verified (the first such claim).
func (f *Federation) Locate(roomID string) (directory.Entry, bool) {
	for _, c := range f.idx.Claims(roomID, f.n.NowMs()) {
		if f.Verified(c.Host) {
			return c.Room, true
		}
	}
	return directory.Entry{}, false
}

func (f *Federation) Relay(ctx context.Context, roomID string, body []byte) (httpwire.Answer, bool) {
	claims := f.idx.Claims(roomID, f.n.NowMs())
	if len(claims) == 0 {
		return httpwire.Answer{}, false
	}
	var e *index.Entry
	for _, c := range claims {
		if f.Verified(c.Host) {
			e = c
			break
		}
	}
	if e == nil {
		// A host just learned of may not be checked yet: check up to two
		// claimants now, unless they were checked moments ago.
		for _, c := range claims[:min(2, len(claims))] {
			if f.recentlyChecked(c.Host) {
				continue
			}
			if f.CheckBinding(ctx, c.Host) == nil {
				e = c
				break
			}
		}
	}
	if e == nil {
		return httpwire.Error(&adp.Error{Code: adp.CodeRelayFailed,
			Message: "no host with a verified binding holds this room; the write was not relayed",
			Data:    map[string]any{"reason": "unverified_host", "room_id": roomID}}), true
	}
	id, err := peer.Decode(e.Host.PeerID)
	if err != nil {
		return httpwire.Error(&adp.Error{Code: adp.CodeRelayFailed, Message: "the room's host has a malformed peer ID",
			Data: map[string]any{"reason": "bad_peer_id"}}), true
	}
	ans, err := f.relayTo(ctx, id, roomID, body)
	if err != nil {
		f.log.Warn("relay failed", "room", roomID, "host", id, "err", err)
		return httpwire.Error(&adp.Error{Code: adp.CodeRelayFailed, Message: "could not reach the room's host",
			Data: map[string]any{"reason": "unreachable", "host": e.Host.Origin, "room_url": e.Room.URL}}), true
	}
	return ans, true
}

// recentlyChecked reports whether b's binding was checked in the last
// few seconds (so a relay does not re-fetch a failing origin per write).
func (f *Federation) recentlyChecked(b index.Binding) bool {
	f.checkMu.Lock()
	defer f.checkMu.Unlock()
	c, ok := f.checks[b.Key]
	return ok && c.peerID == b.PeerID && c.origin == b.Origin && time.Since(c.wall) < 5*time.Second
}

func (f *Federation) relayTo(ctx context.Context, id peer.ID, roomID string, body []byte) (httpwire.Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := f.h.NewStream(ctx, id, RelayProtocol)
	if err != nil {
		return httpwire.Answer{}, err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	req, _ := json.Marshal(relayRequest{RoomID: roomID, Body: body})
	if err := writeFrame(s, req); err != nil {
		s.Reset()
		return httpwire.Answer{}, err
	}
	s.CloseWrite()
	b, err := readFrame(bufio.NewReader(s), maxFrame)
	if err != nil {
		return httpwire.Answer{}, err
	}
	var ans httpwire.Answer
	if err := json.Unmarshal(b, &ans); err != nil || ans.Status < 100 || ans.Status > 599 {
		return httpwire.Answer{}, errors.New("malformed relay answer")
	}
	return ans, nil
}

// backfillRequest asks a peer for a room's records after a seq.
type backfillRequest struct {
	RoomID   string `json:"room_id"`
	AfterSeq int64  `json:"after_seq"`
	Limit    int    `json:"limit"`
}

// BackfillBatch is a backfill answer: records in seq order and host-signed
// checkpoints (record.checkpoint assertions) for some of them — at least
// the last record when the server has one — that authenticate the batch:
// records are hash-linked, so a checkpoint at seq k vouches for every
// record up to k.
type BackfillBatch struct {
	Records     []json.RawMessage `json:"records"`
	Checkpoints []json.RawMessage `json:"checkpoints,omitempty"`
	Error       string            `json:"error,omitempty"`
}

// encode writes the batch as JSON, each record and checkpoint as stored:
// json.Marshal would rescan and compact every one of them, and escape its
// <, > and & so that the receiver's strict parse finds the envelope no
// longer canonical and canonicalizes it again.
func (b BackfillBatch) encode() []byte {
	n := 32 + len(b.Error)
	for _, r := range b.Records {
		n += len(r) + 1
	}
	for _, c := range b.Checkpoints {
		n += len(c) + 1
	}
	out := make([]byte, 0, n)
	list := func(name string, items []json.RawMessage) {
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, `":[`...)
		for i, it := range items {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, it...)
		}
		out = append(out, ']')
	}
	out = append(out, '{')
	list("records", b.Records)
	if len(b.Checkpoints) > 0 {
		out = append(out, ',')
		list("checkpoints", b.Checkpoints)
	}
	if b.Error != "" {
		e, _ := json.Marshal(b.Error)
		out = append(out, `,"error":`...)
		out = append(out, e...)
	}
	return append(out, '}')
}

// decodeBackfill reads a peer's batch: one strict scan of the whole
// frame (UTF-8, syntax, no duplicate names), then a split of the record
// and checkpoint arrays into sub-slices, where encoding/json would copy
// and rescan each record. Members it does not know are ignored.
func decodeBackfill(b []byte) (BackfillBatch, error) {
	var out BackfillBatch
	if err := identity.CheckJSON(b); err != nil {
		return out, fmt.Errorf("backfill batch: %w", err)
	}
	obj, err := jsonobj.ClosedStrict(b, "records", "checkpoints", "error")
	if err != nil && !isUnknown(err) {
		return out, fmt.Errorf("backfill batch %w", err)
	}
	if err != nil { // a member a newer peer added: read the known ones
		if obj, err = jsonobj.Decode(b); err != nil {
			return out, fmt.Errorf("backfill batch %w", err)
		}
	}
	for _, m := range []struct {
		name string
		to   *[]json.RawMessage
	}{{"records", &out.Records}, {"checkpoints", &out.Checkpoints}} {
		v, ok := obj.Get(m.name)
		if !ok || string(v) == "null" {
			continue
		}
		if *m.to, err = jsonobj.Elements(v); err != nil {
			return out, fmt.Errorf("backfill batch %s %w", m.name, err)
		}
	}
	if v, ok := obj.Get("error"); ok && string(v) != "null" {
		if out.Error, ok = jsonobj.String(v); !ok {
			return out, errors.New("backfill batch error is not a string")
		}
	}
	return out, nil
}

func isUnknown(err error) bool {
	var e *jsonobj.Error
	return errors.As(err, &e) && e.Kind == jsonobj.Unknown
}

// BackfillSource lets mirrors serve backfill for rooms this node mirrors.
type BackfillSource func(roomID string, after int64, limit int) (BackfillBatch, bool)

// SetBackfillSource adds a source consulted for rooms this node does not
// host.
func (f *Federation) SetBackfillSource(src BackfillSource) {
	f.subMu.Lock()
	f.backfill = src
	f.subMu.Unlock()
}

// serveBackfill answers records of public rooms: hosted ones from the node
// (anonymous read rules, so restricted and private rooms are refused), and
// mirrored ones from the backfill source.
func (f *Federation) serveBackfill(s network.Stream) {
	defer s.Close()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	b, err := readFrame(bufio.NewReader(s), 4096)
	if err != nil {
		s.Reset()
		return
	}
	var req backfillRequest
	var resp BackfillBatch
	if json.Unmarshal(b, &req) != nil || req.RoomID == "" || req.AfterSeq < 0 {
		resp.Error = "malformed request"
	} else {
		limit := min(max(req.Limit, 1), 1000)
		recs, _, err := f.n.Events(req.RoomID, "", req.AfterSeq, limit)
		switch {
		case err == nil:
			size := 0
			for i, rec := range recs {
				if size += len(rec); size > BackfillBytes && i > 0 {
					recs = recs[:i]
					break
				}
			}
			resp.Records = recs
			if len(recs) > 0 {
				if cp, err := f.checkpointFor(recs[len(recs)-1]); err == nil {
					resp.Checkpoints = []json.RawMessage{cp}
				}
			}
		case adp.CodeOf(err) == adp.CodeRoomNotFound:
			f.subMu.Lock()
			src := f.backfill
			f.subMu.Unlock()
			if src != nil {
				if batch, ok := src(req.RoomID, req.AfterSeq, limit); ok {
					resp = batch
					break
				}
			}
			resp.Error = "room_not_found"
		default:
			resp.Error = string(adp.CodeOf(err))
		}
	}
	_ = writeFrame(s, resp.encode()) // the peer reads the frame or sees the stream end
}

// Backfill fetches up to limit records of roomID after afterSeq from peer
// id. Nothing in the batch is verified: callers verify records against the
// chain and the checkpoints against the host key.
func (f *Federation) Backfill(ctx context.Context, id peer.ID, roomID string, afterSeq int64, limit int) (*BackfillBatch, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := f.h.NewStream(ctx, id, BackfillProtocol)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	req, _ := json.Marshal(backfillRequest{RoomID: roomID, AfterSeq: afterSeq, Limit: limit})
	if err := writeFrame(s, req); err != nil {
		s.Reset()
		return nil, err
	}
	s.CloseWrite()
	b, err := readFrame(bufio.NewReader(s), maxFrame)
	if err != nil {
		return nil, err
	}
	resp, err := decodeBackfill(b)
	if err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, errors.New(resp.Error)
	}
	return &resp, nil
}

// checkpointFor signs a checkpoint for one of this host's stored records.
func (f *Federation) checkpointFor(raw []byte) (json.RawMessage, error) {
	var r struct {
		RoomID     string `json:"room_id"`
		Seq        int64  `json:"seq"`
		Hash       string `json:"hash"`
		ReceivedAt int64  `json:"received_at"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return f.signer.Sign(assertion.TypeCheckpoint, Checkpoint{Host: f.signer.HostKey(), RoomID: r.RoomID, Seq: r.Seq,
		Hash: r.Hash, ReceivedAt: r.ReceivedAt}, f.n.NowMs())
}
