package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

	file := filepath.Join(e.dir, "sealed.json")
	mustCLI(t, "export", "--node", e.node, id, "--format", "json", "-o", file)
	if out := mustCLI(t, "verify", file); !strings.HasPrefix(out, "OK room "+id) {
		t.Fatalf("verify: %s", out)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), secret) || !strings.Contains(string(b), "seal.epoch") {
		t.Fatal("the archive holds the plaintext, or no epoch")
	}
}
