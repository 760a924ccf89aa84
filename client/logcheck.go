package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/tlogproof"
)

// LogCheck makes a client verify that every record it reads is in a host
// log: an RFC 6962 inclusion proof against a checkpoint signed
// by the log's key. Records read from a mirror are checked against their
// host's log (Origin).
type LogCheck struct {
	// Verifier is the log's note verifier; pin it (the "verifier_key" of
	// the host's discovery, whose Ed25519 key is the host key).
	Verifier note.Verifier
	// Origin is the host whose log covers the records (default: the
	// client's Origin).
	Origin string
	// Wait is how long a record too fresh for the latest checkpoint is
	// waited for (default 5 s).
	Wait time.Duration
}

// NewLogCheck returns a LogCheck for a note verifier key.
func NewLogCheck(vkey string) (*LogCheck, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	return &LogCheck{Verifier: v}, nil
}

// VerifyInclusion fetches and checks the inclusion proof of rec in the
// host log and returns the checkpoint it was checked against.
func (c *Client) VerifyInclusion(ctx context.Context, lc *LogCheck, rec *record.Record) (tlogproof.Checkpoint, error) {
	if _, err := tlogproof.RecordLeaf(rec.Hash); err != nil {
		return tlogproof.Checkpoint{}, err
	}
	origin := lc.Origin
	if origin == "" {
		origin = c.Origin
	}
	wait := lc.Wait
	if wait == 0 {
		wait = 5 * time.Second
	}
	deadline := time.Now().Add(wait)
	lookup := &Client{Origin: origin, HTTP: c.HTTP}
	for {
		var f tlogproof.File
		_, err := lookup.do(ctx, http.MethodGet, "/v1/log/inclusion?"+url.Values{"record_hash": {rec.Hash}}.Encode(), nil, false, &f)
		if err == nil {
			cp, err := tlogproof.VerifyRecord(f.RecordProof, lc.Verifier)
			if err != nil {
				return cp, fmt.Errorf("record %s seq %d: %w", rec.RoomID, rec.Seq, err)
			}
			if f.RecordHash != rec.Hash {
				return cp, fmt.Errorf("record %s seq %d: the log proved another record", rec.RoomID, rec.Seq)
			}
			return cp, nil
		}
		var e *Error
		if !asError(err, &e) || e.Code != adp.CodeNotFound || time.Now().After(deadline) {
			return tlogproof.Checkpoint{}, fmt.Errorf("record %s seq %d is not proven in the host log: %w", rec.RoomID, rec.Seq, err)
		}
		select {
		case <-ctx.Done():
			return tlogproof.Checkpoint{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	if ok {
		*e = x
	}
	return ok
}
