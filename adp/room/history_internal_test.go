package room

import (
	"errors"
	"testing"

	"github.com/adpnode/adpnode/adp"
)

// faultyHistory is a MemHistory whose reads fail while told to, as a host
// store on a failing disk would.
type faultyHistory struct {
	*MemHistory
	failRecord, failSeq bool
}

var errDisk = errors.New("read: input/output error")

func (h *faultyHistory) RecordHash(seq int64) ([32]byte, bool, error) {
	if h.failRecord {
		return [32]byte{}, false, errDisk
	}
	return h.MemHistory.RecordHash(seq)
}

func (h *faultyHistory) SeqOf(id [32]byte) (int64, bool, error) {
	if h.failSeq {
		return 0, false, errDisk
	}
	return h.MemHistory.SeqOf(id)
}

// TestHistoryReadErrorIsUnavailable: a History read that fails makes Admit
// answer unavailable — never a verdict on the client's event such as
// base_record_mismatch, unknown_reference or a wrong duplicate answer — and
// nothing is admitted. Property: storage errors are errors, not "absent".
func TestHistoryReadErrorIsUnavailable(t *testing.T) {
	h := newHarness(t)
	hist := &faultyHistory{MemHistory: NewMemHistory()}
	h.st = New(Config{Limits: DefaultLimits(), History: hist})
	publicWithSpeaker(h)
	h.must("creator", "message.create", msg("first"))
	h.must("alice", "message.create", msg("second"))
	old, _, err := h.st.RecordHash(2) // neither the head nor the last record: read from the History
	if err != nil || old == "" {
		t.Fatalf("RecordHash(2) = %q, %v", old, err)
	}

	cases := []struct {
		name                string
		failRecord, failSeq bool
		env                 func() error
	}{
		{"signal anchored to an old record", true, false, func() error {
			return h.post("bob", "room.join", map[string]any{"role": "observer"}, base(2, old))
		}},
		{"references an old record", false, true, func() error {
			return h.post("alice", "message.create", map[string]any{"content_type": "text/plain", "content": "re", "references": []string{h.envs[0].Hash}})
		}},
		{"any event: the exact-duplicate check", false, true, func() error {
			return h.post("alice", "message.create", msg("third"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seq := h.st.Seq
			hist.failRecord, hist.failSeq = c.failRecord, c.failSeq
			err := c.env()
			hist.failRecord, hist.failSeq = false, false
			var ae *adp.Error
			if !errors.As(err, &ae) || ae.Code != adp.CodeUnavailable || ae.Data["reason"] != "storage_read" {
				t.Fatalf("Admit with a failing History: %v, want unavailable (storage_read)", err)
			}
			if h.st.Seq != seq {
				t.Fatalf("state moved to seq %d", h.st.Seq)
			}
		})
	}
	// The store answers again: the same kinds of event are judged on their
	// merits.
	if err := h.post("bob", "room.join", map[string]any{"role": "observer"}, base(2, old)); err != nil {
		t.Fatalf("signal after the store recovered: %v", err)
	}
	if _, _, err := h.st.SeqOf(old); err != nil {
		t.Fatal(err)
	}
}
