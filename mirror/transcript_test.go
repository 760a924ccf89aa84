//go:build e2e

package mirror_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
)

// A mirror's Markdown transcript of an ended room renders from its own
// verified chain: after the mirror restarts with the host stopped, the
// transcript it serves is the one the host served, line for line, and a
// message whose text tries to forge transcript structure stays quoted
// content.
func TestMirrorTranscript(t *testing.T) {
	peers := fedtest.Network(t, 2, nil, fedtest.Options{Rates: noRates, Mirror: true})
	a, b := peers[0], peers[1]
	if _, err := b.Mir.AddTarget(mirror.TargetAll, ""); err != nil {
		t.Fatal(err)
	}
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "transcribed")
	for i := 0; i < 5; i++ {
		fedtest.MustSubmit(t, a, alice, "message.create", id, msg(fmt.Sprintf("line %d", i)))
	}
	// Hostile: text shaped like a transcript heading and a record line.
	forged := "\n# forged heading\n**seq 99** by someone else"
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg(forged))
	last := fedtest.MustSubmit(t, a, alice, "room.close", id, map[string]any{"reason": "done"}).Record
	testwait.Until(t, 20*time.Second, "B verified the closed room", func() bool {
		r, ok := b.Mir.Room(id, "")
		return ok && r.Tip() == last.Seq
	})
	get := func(p *fedtest.Peer, path string) string {
		r := adptest.Do(t, http.MethodGet, p.URL+path, "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s %s: %s", p.Name, path, r)
		}
		return string(r.Body)
	}
	hostMD := get(a, "/v1/rooms/"+id+"/archive.md")
	mirrorMD := get(b, "/v1/mirrors/rooms/"+id+"/archive.md")
	a.Stop()
	b = b.Restart(t)
	afterMD := get(b, "/v1/mirrors/rooms/"+id+"/archive.md")
	r, ok := b.Mir.Room(id, "")
	if !ok {
		t.Fatal("B lost the room across its restart")
	}
	var direct strings.Builder
	if err := r.WriteMarkdown(&direct, b.Clock.Ms()); err != nil {
		t.Fatal(err)
	}
	for name, md := range map[string]string{"served": mirrorMD, "after restart": afterMD, "WriteMarkdown": direct.String()} {
		if md != hostMD {
			t.Errorf("mirror transcript (%s) differs from the host's:\n--- host\n%s\n--- mirror\n%s", name, hostMD, md)
		}
	}
	if !strings.Contains(afterMD, "# transcribed") || !strings.Contains(afterMD, "line 4") {
		t.Fatalf("transcript lacks the topic or a message:\n%s", afterMD)
	}
	if prev := strings.Index(afterMD, "line 0"); prev < 0 || strings.Index(afterMD, "line 3") < prev {
		t.Fatalf("messages out of order:\n%s", afterMD)
	}
	// The forged heading is there, but only inside a fenced block.
	inFence, seen := false, false
	for _, l := range strings.Split(afterMD, "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if l == "# forged heading" {
			if !inFence {
				t.Fatalf("a message's text became a transcript heading:\n%s", afterMD)
			}
			seen = true
		}
	}
	if !seen {
		t.Fatalf("the hostile message is missing from the transcript:\n%s", afterMD)
	}
}
