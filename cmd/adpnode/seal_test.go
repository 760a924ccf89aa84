//go:build e2e

package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/seal"
	"github.com/adpnode/adpnode/client"
)

// A member-only room through the CLI: create, join (publishes the key),
// post (sealed), tail opens for a member and shows "sealed (epoch N)" to a
// non-member, and the exported archive verifies offline on ciphertext
// without holding the plaintext.
func TestSealedRoomCLI(t *testing.T) {
	e := newCLIEnv(t)
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	bob := []string{"--node", e.node, "--key", e.key("bob")}
	out := mustCLI(t, append([]string{"room", "create", "--topic", "CLI sealed", "--confidentiality", "member-only"}, alice...)...)
	id := strings.Fields(out)[0]
	if out := mustCLI(t, append([]string{"join", id}, bob...)...); !strings.Contains(out, "sealing key published") {
		t.Fatalf("join: %s", out)
	}
	const secret = "the reserve price is 4200"
	if out := mustCLI(t, append([]string{"post", id, secret}, alice...)...); !strings.Contains(out, "(sealed)") {
		t.Fatalf("post: %s", out)
	}
	if out := mustCLI(t, append([]string{"post", id, "bob agrees"}, bob...)...); !strings.Contains(out, "(sealed)") {
		t.Fatalf("post: %s", out)
	}
	// The sealing key files sit beside the agent keys, 0600.
	for _, k := range []string{"alice", "bob"} {
		fi, err := os.Stat(client.SealKeyPath(e.key(k)))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s sealing key file: %v %v", k, fi, err)
		}
	}
	// A full message.create payload is sealed too.
	if out := mustCLI(t, append([]string{"post", id, "--payload", `{"content_type":"text/plain","content":"payload form"}`}, bob...)...); !strings.Contains(out, "(sealed)") {
		t.Fatalf("post --payload: %s", out)
	}
	mustCLI(t, append([]string{"seal", "key", id, "--new"}, bob...)...)
	if out := mustCLI(t, append([]string{"seal", "rotate", id}, alice...)...); !strings.Contains(out, "epoch 2") {
		t.Fatalf("rotate after bob's new key: %s", out)
	}
	mustCLI(t, append([]string{"room", "close", id}, alice...)...)

	code, out, errOut := cli(t, append([]string{"tail", "--poll", "20ms", id}, bob...)...)
	if code != 0 || !strings.Contains(out, "[opened] "+secret) || !strings.Contains(out, "[opened] bob agrees") || !strings.Contains(out, "[opened] payload form") || !strings.Contains(out, "seal.epoch") || !strings.Contains(out, "epoch 2 for 2 members") {
		t.Fatalf("tail as a member: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = cli(t, append([]string{"tail", "--poll", "20ms", id}, "--node", e.node, "--key", e.key("carol"))...)
	if code != 0 || strings.Contains(out, secret) || !strings.Contains(out, "sealed (epoch 1)") {
		t.Fatalf("tail as a non-member: exit %d\n%s\n%s", code, out, errOut)
	}
	// Reading as a non-member made no sealing key file.
	if _, err := os.Lstat(client.SealKeyPath(e.key("carol"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("tail as a non-member made %s: %v", client.SealKeyPath(e.key("carol")), err)
	}

	file := filepath.Join(e.dir, "sealed.json")
	mustCLI(t, "export", "--node", e.node, id, "--format", "json", "-o", file)
	if out := mustCLI(t, "verify", file); !strings.HasPrefix(out, "OK room "+id) {
		t.Fatalf("verify: %s", out)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), secret) || !strings.Contains(string(b), "seal.epoch") {
		t.Fatal("the archive holds the plaintext, or no epoch")
	}
}

// agentID reads the Agent ID of a CLI key file.
func agentID(t *testing.T, path string) identity.AgentID {
	t.Helper()
	k, err := client.LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

// junkEpochPayload is the room's next seal.epoch with honest wraps for
// members but 80 random bytes for victim: a shape the host accepts.
func junkEpochPayload(t *testing.T, node, roomID string, victim identity.AgentID, members ...identity.AgentID) string {
	t.Helper()
	recs, err := client.New(node, nil).History(context.Background(), roomID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var st seal.RoomState
	for _, r := range recs {
		env, err := identity.ParseEnvelope(r.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		st.Apply(r.Seq, env.Event.Actor, env.Event.Type, env.Event.Payload)
	}
	p, _, err := seal.NewEpoch(rand.Reader, roomID, st.Epoch+1, st.Recipients(members))
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, seal.WrapSize)
	rand.Read(junk)
	for i := range p.Wraps {
		if p.Wraps[i].Member == victim {
			p.Wraps[i].Wrap = identity.EncodeB64(junk)
		}
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// Property: through the CLI, a member (carol) that gives another (bob) a
// junk epoch key wrap is named on bob's stderr at his next command, which
// starts a new epoch and goes on (his post lands sealed and opens for the
// others); in the room's archive, verify --key as bob fails (exit 2) with
// a line naming carol and the seal.epoch's seq, while verify --key as
// alice or carol passes. seal reveal gives bob the one key the bad wrap
// names only once it is no longer his current key, and anyone's verify
// --key with that file fails the same way. verify --key with a key that
// cannot be used exits 3 and creates no file.
func TestSealedJunkWrapCLI(t *testing.T) {
	e := newCLIEnv(t)
	alice := []string{"--node", e.node, "--key", e.key("alice")}
	bob := []string{"--node", e.node, "--key", e.key("bob")}
	carol := []string{"--node", e.node, "--key", e.key("carol")}
	out := mustCLI(t, append([]string{"room", "create", "--topic", "CLI junk wrap", "--confidentiality", "member-only"}, alice...)...)
	id := strings.Fields(out)[0]
	mustCLI(t, append([]string{"join", id}, bob...)...)
	mustCLI(t, append([]string{"join", id}, carol...)...)
	mustCLI(t, append([]string{"post", id, "epoch one"}, alice...)...)
	a, b, c := agentID(t, e.key("alice")), agentID(t, e.key("bob")), agentID(t, e.key("carol"))

	junk := junkEpochPayload(t, e.node, id, b, a, b, c)
	out = mustCLI(t, append([]string{"post", id, "--type", seal.TypeEpoch, "--payload", junk}, carol...)...)
	junkSeq := strings.Fields(out)[1]

	code, out, errOut := cli(t, append([]string{"post", id, "bob goes on"}, bob...)...)
	if code != 0 || !strings.Contains(out, "(sealed)") || !strings.Contains(errOut, "signed by "+string(c)) ||
		!strings.Contains(errOut, "seal.epoch at seq "+junkSeq) || !strings.Contains(errOut, "started epoch 3 to replace it") {
		t.Fatalf("bob's post after the junk wrap: exit %d\n%s\n%s", code, out, errOut)
	}
	// Bob reveals the key the bad wrap names, once it is no longer his
	// current one.
	revealed := filepath.Join(e.dir, "bob-epoch2.seal")
	if code, out, errOut = cli(t, append([]string{"seal", "reveal", id, "--epoch", "2", "-o", revealed}, bob...)...); code == 0 || !strings.Contains(errOut, "seal key --new") {
		t.Fatalf("reveal of the current key: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Lstat(revealed); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused reveal wrote the file")
	}
	mustCLI(t, append([]string{"seal", "key", id, "--new"}, bob...)...)
	if out := mustCLI(t, append([]string{"seal", "reveal", id, "--epoch", "2", "-o", revealed}, bob...)...); !strings.Contains(out, "opens epochs [1 2 3]") {
		t.Fatalf("reveal: %s", out)
	}
	if fi, err := os.Lstat(revealed); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("revealed file: %v %v", fi, err)
	}
	if code, out, errOut = cli(t, append([]string{"seal", "reveal", id, "--epoch", "3", "-o", revealed + "2"}, bob...)...); code == 0 || !strings.Contains(errOut, "no bad wrap") {
		t.Fatalf("reveal for an honest epoch: exit %d\n%s\n%s", code, out, errOut)
	}
	mustCLI(t, append([]string{"post", id, "after the new key"}, alice...)...)
	mustCLI(t, append([]string{"room", "close", id}, alice...)...)
	code, out, errOut = cli(t, append([]string{"tail", "--poll", "20ms", id}, alice...)...)
	if code != 0 || !strings.Contains(out, "[opened] bob goes on") || strings.Contains(errOut, "bad epoch key wrap") {
		t.Fatalf("alice reads bob's message: exit %d\n%s\n%s", code, out, errOut)
	}

	file := filepath.Join(e.dir, "junk.json")
	mustCLI(t, "export", "--node", e.node, id, "--format", "json", "-o", file)
	code, out, errOut = cli(t, "verify", file, "--key", e.key("bob"))
	if code != 2 || !strings.Contains(out, "FAIL bad epoch key wrap in epoch 2") || !strings.Contains(out, "signed by "+string(c)) ||
		!strings.Contains(out, "seal.epoch at seq "+junkSeq) {
		t.Fatalf("verify --key as bob: exit %d\n%s\n%s", code, out, errOut)
	}
	// Anyone with the revealed key sees the same failure, and opens the
	// epochs wrapped for that key only (not epoch 4, for bob's new key).
	if code, out, errOut = cli(t, "verify", file, "--key", revealed); code != 2 || !strings.Contains(out, "signed by "+string(c)) ||
		!strings.Contains(out, "seal.epoch at seq "+junkSeq) || !strings.Contains(out, "opened as "+string(b)+": 2 of 3 sealed records") {
		t.Fatalf("verify --key with the revealed key: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, k := range []string{"alice", "carol"} {
		if code, out, errOut = cli(t, "verify", file, "--key", e.key(k)); code != 0 || strings.Contains(out, "FAIL") {
			t.Fatalf("verify --key as %s: exit %d\n%s\n%s", k, code, out, errOut)
		}
	}

	// A key that cannot be used: exit 4, and nothing is created.
	dave := filepath.Join(e.dir, "dave.key")
	mustCLI(t, "keygen", "--out", dave)
	wide := filepath.Join(e.dir, "wide.key.seal")
	sb, _ := os.ReadFile(client.SealKeyPath(e.key("bob")))
	os.WriteFile(wide, sb, 0o644)
	os.Chmod(wide, 0o644)
	for what, k := range map[string]string{
		"no such key file":       filepath.Join(e.dir, "nobody.key"),
		"no sealing key file":    dave,
		"a world-readable .seal": wide,
		"a node key":             filepath.Join(e.dir, "missing-dir", "x.key"),
	} {
		code, out, errOut := cli(t, "verify", file, "--key", k)
		if code != exitVerifyKey || !strings.Contains(errOut, "--key") {
			t.Errorf("verify --key with %s: exit %d\n%s\n%s", what, code, out, errOut)
		}
	}
	for _, p := range []string{client.SealKeyPath(dave), filepath.Join(e.dir, "nobody.key"), filepath.Join(e.dir, "nobody.key.seal")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("verify --key made %s", p)
		}
	}
}
