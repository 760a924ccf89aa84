// Package evidence defines proof that a host misbehaved (ADP federation:
// equivocation, a checkpointed record the rules reject) and verifies it
// offline with nothing but the kernel. Mirrors build, store and gossip it;
// `adpnode verify` checks it.
package evidence

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/jsonobj"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
)

// Evidence kinds.
const (
	// KindEquivocation: the host signed two checkpoints that cannot both
	// be true of one chain.
	KindEquivocation = "equivocation"
	// KindInvalidRecord: the host signed a checkpoint for a record that the
	// protocol rules reject.
	KindInvalidRecord = "invalid_record"
	// KindSplitView: the host's transparency log signed two checkpoints
	// of one origin that cannot both be true (C2SP checkpoints: one size
	// with two roots, or a consistency proof of the larger tree whose
	// prefix is not the smaller one). Seen by a witness.
	KindSplitView = "split_view"
)

// Type is Evidence.Type.
const Type = "adp.evidence"

// Checkpoint is a host's signed commitment to a record.
type Checkpoint = assertion.Checkpoint

// Evidence proves a host misbehaved, with nothing but host-signed
// checkpoints, agent-signed records and the kernel.
type Evidence struct {
	Type       string           `json:"type"` // always Type
	Kind       string           `json:"kind"`
	Host       identity.AgentID `json:"host"`
	RoomID     string           `json:"room_id"`
	Seq        int64            `json:"seq"`
	Reason     string           `json:"reason"`
	DetectedAt int64            `json:"detected_at"`
	Detector   identity.AgentID `json:"detector,omitempty"`
	// Checkpoints: for equivocation, [a, b] where a vouches (directly or
	// via Records) for one hash at Seq and b names another; for an invalid
	// record, the checkpoint vouching for it.
	Checkpoints []json.RawMessage `json:"checkpoints"`
	// Records: for equivocation, the chain from Seq to a's seq (a's record
	// last); for an invalid record, the room's chain from seq 1 up to and
	// including the invalid record.
	Records []json.RawMessage `json:"records,omitempty"`
	// Conflict (equivocation only, optional): when b is not at Seq, the
	// chain from Seq+1 to b's seq (b's record last), whose first record's
	// pre_hash names another record at Seq than Records[0]. This is how a
	// host forking right after a mirror's tip is proven.
	Conflict []json.RawMessage `json:"conflict,omitempty"`
	// LogKey (split view only): the host log's signed-note verifier key
	// (name+key ID+base64 key), whose key must be Host's.
	LogKey string `json:"log_key,omitempty"`
	// Notes (split view only): the two signed checkpoint notes, smaller
	// size first.
	Notes []string `json:"notes,omitempty"`
	// Proof (split view only): base64 hashes of a consistency proof from
	// Notes[0]'s size to Notes[1]'s that is true of Notes[1]'s tree and
	// implies another prefix root (tlogwitness.SplitView).
	Proof []string `json:"proof,omitempty"`
}

// SplitView builds split-view evidence against host from a witness's
// proof material; logKey is the log's verifier key.
func SplitView(host identity.AgentID, logKey string, sv *tlogwitness.SplitView, reason string, detectedAt int64, detector identity.AgentID) *Evidence {
	e := &Evidence{Type: Type, Kind: KindSplitView, Host: host, Reason: reason, DetectedAt: detectedAt, Detector: detector,
		Checkpoints: []json.RawMessage{}, LogKey: logKey, Notes: []string{string(sv.Notes[0]), string(sv.Notes[1])}}
	for _, h := range sv.Proof {
		e.Proof = append(e.Proof, base64.StdEncoding.EncodeToString(h[:]))
	}
	return e
}

// verifySplitView checks split-view evidence: the log key is the host's,
// both notes are signed by it for one origin, and they cannot both be
// true.
func (e *Evidence) verifySplitView() error {
	if len(e.Checkpoints) != 0 || len(e.Records) != 0 || len(e.Conflict) != 0 || e.RoomID != "" {
		return errors.New("split-view evidence carries notes, not room checkpoints or records")
	}
	if len(e.Notes) != 2 {
		return errors.New("split-view evidence needs two checkpoint notes")
	}
	name, _, _ := strings.Cut(e.LogKey, "+")
	v, err := note.NewVerifier(e.LogKey)
	if err != nil {
		return fmt.Errorf("log key: %w", err)
	}
	hostKey := e.Host.PublicKey()
	if hostKey == nil {
		return errors.New("host is not an Agent ID")
	}
	own, err := tlogproof.Verifier(name, hostKey)
	if err != nil || own.KeyHash() != v.KeyHash() {
		return errors.New("the log key is not the host's key")
	}
	origin, ok := tlogwitness.Origin([]byte(e.Notes[0]))
	if !ok {
		return errors.New("checkpoint note has no origin")
	}
	sv := &tlogwitness.SplitView{Notes: [2][]byte{[]byte(e.Notes[0]), []byte(e.Notes[1])}}
	for _, s := range e.Proof {
		h, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(h) != tlog.HashSize {
			return errors.New("a proof hash is not base64 SHA-256")
		}
		sv.Proof = append(sv.Proof, tlog.Hash(h))
	}
	return sv.Verify(tlogwitness.Log{Origin: origin, Verifier: own})
}

// Verify checks evidence offline. For equivocation: both checkpoints are
// signed by Host for RoomID; Records (if any) chain from Seq to checkpoint
// a's seq with a's hash at the end; the record at Seq differs from b's
// hash (or, without records, a and b name one seq with two hashes), or,
// with Conflict, b vouches for a chain from Seq+1 whose pre_hash names
// another record at Seq. For an
// invalid record: the checkpoint is Host's and names the last record,
// Records form one hash chain from seq 1 to it (the last one at least
// naming its predecessor's hash), and replaying them rejects exactly that
// record for a protocol rule (not for an external pack that offline replay
// cannot fetch).
func (e *Evidence) Verify() error {
	if e.Type != Type {
		return fmt.Errorf("not evidence: type %q", e.Type)
	}
	if e.Kind == KindSplitView {
		return e.verifySplitView()
	}
	if len(e.Notes) != 0 || len(e.Proof) != 0 || e.LogKey != "" {
		return errors.New("log notes belong to split-view evidence")
	}
	if len(e.Checkpoints) == 0 {
		return errors.New("evidence carries no checkpoint")
	}
	cps := make([]Checkpoint, len(e.Checkpoints))
	for i, raw := range e.Checkpoints {
		cp, err := assertion.OpenCheckpoint(raw)
		if err != nil {
			return fmt.Errorf("checkpoint %d: %w", i, err)
		}
		if cp.Host != e.Host || cp.RoomID != e.RoomID {
			return fmt.Errorf("checkpoint %d is not the accused host's for this room", i)
		}
		cps[i] = cp
	}
	recs := make([]*record.Record, len(e.Records))
	envs := make([]*identity.Envelope, len(e.Records))
	for i, raw := range e.Records {
		r, env, err := record.Parse(raw)
		if err != nil && e.Kind != KindInvalidRecord {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err != nil {
			return fmt.Errorf("record %d does not parse, so it proves nothing against the host: %w", i, err)
		}
		recs[i], envs[i] = r, env
	}
	switch e.Kind {
	case KindEquivocation:
		if len(cps) != 2 {
			return errors.New("equivocation needs two checkpoints")
		}
		a, b := cps[0], cps[1]
		if len(recs) == 0 {
			if len(e.Conflict) > 0 {
				return errors.New("conflicting records need the records checkpoint a vouches for")
			}
			if b.Seq != e.Seq || a.Seq != b.Seq || a.Hash == b.Hash {
				return errors.New("checkpoints do not conflict")
			}
			return nil
		}
		if recs[0].Seq != e.Seq || recs[len(recs)-1].Seq != a.Seq {
			return errors.New("records do not span from the disputed seq to checkpoint a")
		}
		for i := 1; i < len(recs); i++ {
			if err := record.Link(recs[i-1], recs[i]); err != nil {
				return fmt.Errorf("records do not chain: %w", err)
			}
		}
		if recs[len(recs)-1].Hash != a.Hash {
			return errors.New("checkpoint a does not vouch for the records")
		}
		if len(e.Conflict) == 0 {
			if b.Seq != e.Seq {
				return errors.New("checkpoint b is not at the disputed seq")
			}
			if recs[0].Hash == b.Hash {
				return errors.New("checkpoints agree at the disputed seq")
			}
			return nil
		}
		// b vouches for a chain whose first record, at Seq+1, names another
		// record at Seq through its pre_hash.
		conf := make([]*record.Record, len(e.Conflict))
		for i, raw := range e.Conflict {
			r, _, err := record.Parse(raw)
			if err != nil {
				return fmt.Errorf("conflicting record %d: %w", i, err)
			}
			conf[i] = r
			if i > 0 {
				if err := record.Link(conf[i-1], r); err != nil {
					return fmt.Errorf("conflicting records do not chain: %w", err)
				}
			}
		}
		last := conf[len(conf)-1]
		switch {
		case conf[0].Seq != e.Seq+1:
			return errors.New("conflicting records do not start right after the disputed seq")
		case conf[0].RoomID != e.RoomID:
			return errors.New("conflicting records are of another room")
		case last.Seq != b.Seq || last.Hash != b.Hash:
			return errors.New("checkpoint b does not vouch for the conflicting records")
		case conf[0].PreHash == recs[0].Hash:
			return errors.New("the conflicting records continue the disputed record")
		}
		return nil
	case KindInvalidRecord:
		if len(e.Conflict) > 0 {
			return errors.New("conflicting records belong to equivocation evidence")
		}
		if len(recs) == 0 || recs[len(recs)-1].Seq != e.Seq || cps[0].Seq != e.Seq || cps[0].Hash != recs[len(recs)-1].Hash {
			return errors.New("the checkpoint does not vouch for the accused record")
		}
		// The records must form one hash chain from seq 1 to the vouched
		// record: only then does the checkpoint vouch for the whole prefix,
		// and a replay failure is the host's. A prefix that does not link
		// (say, made up by the accuser under the same room ID) proves
		// nothing. The accused record itself need only name its
		// predecessor: any other link rule it breaks (seq, room, time) is
		// the host's fault.
		for i, r := range recs {
			switch {
			case i == 0 || i < len(recs)-1:
				var prev *record.Record
				if i > 0 {
					prev = recs[i-1]
				}
				if err := record.Link(prev, r); err != nil {
					return fmt.Errorf("records do not chain from seq 1 to the accused record: %w", err)
				}
			case r.PreHash != recs[i-1].Hash:
				return errors.New("the accused record does not follow the records before it")
			}
		}
		st := room.New(room.Config{Limits: room.ReplayLimits()})
		for i, r := range recs {
			err := st.Apply(r, envs[i], nil)
			if i < len(recs)-1 && err != nil {
				return fmt.Errorf("the chain before the accused record does not replay: %w", err)
			}
			if i == len(recs)-1 {
				switch {
				case err == nil:
					return errors.New("the accused record replays fine")
				case adp.CodeOf(err) == adp.CodePackUnavailable:
					// Offline replay has no external packs: the record
					// may be valid with the pack its host fetched.
					return fmt.Errorf("the accused record cannot be judged offline: %w", err)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("unknown evidence kind %q", e.Kind)
}

// fields are the members of an Evidence object.
var fields = []string{"type", "kind", "host", "room_id", "seq", "reason", "detected_at", "detector", "checkpoints", "records", "conflict", "log_key", "notes", "proof"}

// Parse decodes one piece of evidence strictly: strict JSON (no duplicate
// members at any depth), exactly the Evidence members, nothing after the
// object. It does not verify it (see Verify).
func Parse(b []byte) (*Evidence, error) {
	if err := identity.CheckJSON(b); err != nil {
		return nil, err
	}
	var ev Evidence
	if err := jsonobj.Unmarshal(b, &ev, fields...); err != nil {
		return nil, fmt.Errorf("evidence %w", err)
	}
	return &ev, nil
}
