package attention

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/adpnode/adpnode/internal/groupcommit"
)

// A batch is split into commits that end only at cuts, hold at most the
// limit, and together are the batch in order; a group with no cut inside
// that is larger than one commit is split where it overflows. Within a
// commit only a key's last write is kept.
func TestWritesChunks(t *testing.T) {
	var w writes
	for m := 0; m < 50; m++ {
		w.set([]byte(fmt.Sprintf("item/%03d", m)), []byte("v"))
		if m%7 == 0 {
			w.del([]byte(fmt.Sprintf("item/old/%03d", m)))
		}
		w.set([]byte(pfxInbox+"agent"), []byte(fmt.Sprint(m)))
		w.unit()
	}
	for k := 0; k < 25; k++ { // one group without a cut
		w.set([]byte(fmt.Sprintf("big/%03d", k)), []byte("v"))
	}
	chunks := w.chunks(10, 1<<20)
	var all []groupcommit.KV
	cuts := map[int]bool{0: true, len(w.ops): true}
	for _, c := range w.cuts {
		cuts[c] = true
	}
	pos, forced := 0, 0
	for i, c := range chunks {
		if len(c) == 0 || len(c) > 10 {
			t.Fatalf("commit %d holds %d ops", i, len(c))
		}
		all = append(all, c...)
		pos += len(c)
		if !cuts[pos] {
			if pos <= w.cuts[len(w.cuts)-1] {
				t.Fatalf("commit %d ends at op %d, not at a cut", i, pos)
			}
			forced++
		}
	}
	if !slices.EqualFunc(all, w.ops, func(a, b groupcommit.KV) bool { return string(a.K) == string(b.K) && a.Del == b.Del }) {
		t.Fatal("the commits are not the batch in order")
	}
	if forced != 2 {
		t.Fatalf("the uncut group of 25 was split %d times inside, want 2", forced)
	}
	// By bytes: 8 units of about 1 KiB each, 3 KiB per commit.
	w = writes{}
	for m := 0; m < 8; m++ {
		w.set([]byte(fmt.Sprint(m)), make([]byte, 1000))
		w.unit()
	}
	if got := len(w.chunks(100, 3<<10)); got != 3 {
		t.Fatalf("%d commits, want 3", got)
	}
	var want string
	for _, op := range chunks[0] {
		if string(op.K) == pfxInbox+"agent" {
			want = string(op.V)
		}
	}
	ops := lastWrites(chunks[0])
	var heads []string
	for _, op := range ops {
		if string(op.K) == pfxInbox+"agent" {
			heads = append(heads, string(op.V))
		}
	}
	if len(heads) != 1 || heads[0] != want || len(ops) >= len(chunks[0]) {
		t.Fatalf("last writes: heads %v (want [%s]), %d ops of %d", heads, want, len(ops), len(chunks[0]))
	}
}

// The owner's encoder of a stored mention gives json.Marshal's bytes,
// escapes included.
func TestAppendMentionIsJSON(t *testing.T) {
	for _, it := range []storedMention{
		{},
		{MentionItem: MentionItem{Seq: 7, RoomID: "c0ffee00000000000000", RoomSeq: -3, RecordHash: "AAAA_-", RoomURL: "http://127.0.0.1:1/rooms/x",
			Host: "127.0.0.1:1", Actor: "ed25519:abc", Type: "message.create", CreatedAt: 1764000000000, At: 1764000000001, Source: "local"}, Public: true},
		{MentionItem: MentionItem{RoomURL: "https://h/?a=1&b=<2>\"\\\n\u2028é\xff", Host: "hôte", Type: "\x00"}, Readable: true},
	} {
		want, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMention(nil, &it); string(got) != string(want) {
			t.Errorf("appendMention:\n got %s\nwant %s", got, want)
		}
	}
}
