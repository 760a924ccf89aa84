//go:build linux && e2e

package node_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/transparency-dev/tessera/api/layout"

	"github.com/adpnode/adpnode/adp/identity"
)

// checkHostLog: every record of every room's chain (acknowledged writes,
// and those in flight at a stop that landed) is in the host log exactly
// once, and the log holds nothing else: the log follows the change feed
// across SIGTERM and SIGKILL without losing or repeating a leaf. It waits
// (boundedly) for the log to cover the chains, then reads every entry
// bundle through the tlog-tiles API.
func (h *propHarness) checkHostLog() {
	t := h.t
	t.Helper()
	want := map[[32]byte]string{} // leaf data (record hash) -> room/seq
	for _, pr := range h.rooms {
		for i, raw := range pr.raws {
			var r struct {
				Hash string `json:"hash"`
			}
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatalf("round %d: room %s seq %d: %v", h.round, pr.id, i+1, err)
			}
			hb, err := identity.DecodeB64Len(r.Hash, 32)
			if err != nil {
				t.Fatalf("round %d: room %s seq %d hash %q: %v", h.round, pr.id, i+1, r.Hash, err)
			}
			want[[32]byte(hb)] = pr.id + "/" + strconv.Itoa(i+1)
		}
	}
	size := func() uint64 {
		r := h.getAny(nil, "/tlog/checkpoint")
		if r.status != http.StatusOK {
			return 0
		}
		lines := bytes.SplitN(r.body, []byte("\n"), 3)
		if len(lines) < 3 {
			t.Fatalf("round %d: host log checkpoint %q", h.round, r.body)
		}
		n, err := strconv.ParseUint(string(lines[1]), 10, 64)
		if err != nil {
			t.Fatalf("round %d: host log checkpoint size %q", h.round, lines[1])
		}
		return n
	}
	// Wait (boundedly) for the log to cover the chains; if it never
	// does, what it lacks is reported below.
	n := size()
	for deadline := time.Now().Add(60 * time.Second); n < uint64(len(want)) && time.Now().Before(deadline); n = size() {
		time.Sleep(20 * time.Millisecond)
	}
	seen := make(map[[32]byte]int, n)
	for i := uint64(0); i*layout.EntryBundleWidth < n; i++ {
		p := uint8(min(n-i*layout.EntryBundleWidth, layout.EntryBundleWidth) % layout.EntryBundleWidth)
		b := h.get(nil, "/tlog/"+layout.EntriesPath(i, p))
		for len(b) > 0 {
			if len(b) < 2 || int(binary.BigEndian.Uint16(b))+2 > len(b) {
				t.Fatalf("round %d: entry bundle %d is malformed", h.round, i)
			}
			l := int(binary.BigEndian.Uint16(b))
			if l != 32 {
				t.Fatalf("round %d: entry bundle %d holds a leaf of %d bytes", h.round, i, l)
			}
			seen[[32]byte(b[2:34])]++
			b = b[34:]
		}
	}
	for leaf, c := range seen {
		switch what, ok := want[leaf]; {
		case !ok:
			t.Errorf("round %d: the host log holds a leaf that is no record of any chain (%x)", h.round, leaf[:8])
		case c > 1:
			t.Errorf("round %d: the host log holds record %s %d times", h.round, what, c)
		}
	}
	for leaf, what := range want {
		if seen[leaf] == 0 {
			t.Errorf("round %d: record %s is missing from the host log (size %d, %d records)", h.round, what, n, len(want))
			if t.Failed() && len(want)-len(seen) > 20 {
				t.Fatalf("round %d: the host log lacks %d records", h.round, len(want)-len(seen))
			}
		}
	}
}
