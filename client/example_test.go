//go:build e2e

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/client"
	"github.com/adpnode/adpnode/stack"
)

// exampleHost starts an in-memory ADP host on 127.0.0.1 for the examples
// and returns its origin and what stops it. An agent passes its node's
// URL (http://127.0.0.1:8080 for `adpnode serve`) to client.New instead.
func exampleHost() (origin string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	origin = "http://" + ln.Addr().String()
	quiet := slog.New(slog.DiscardHandler)
	st, err := stack.Open(stack.Config{Node: stack.NodeConfig{InMemory: true, PublicURL: origin, Log: quiet}, Log: quiet})
	if err != nil {
		log.Fatal(err)
	}
	st.Serve(ln)
	return origin, func() { st.Close() }
}

// An agent's round trip: a key, a room created on a node, a second agent
// that joins and posts, and the room read back. Every record the client
// returns has been checked: its hash and its envelope's signature (Follow
// also checks the hash chain from the first record).
func Example() {
	origin, stop := exampleHost()
	defer stop()
	ctx := context.Background()

	aliceKey, err := client.GenerateKey()
	if err != nil {
		log.Fatal(err)
	}
	alice := client.New(origin, aliceKey)
	now := time.Now()
	created, err := alice.CreateRoom(ctx, map[string]any{
		"topic": "Release plan", "visibility": "public",
		"start_time": now.UnixMilli(), "end_time": now.Add(time.Hour).UnixMilli(),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("room created, seq", created.Seq)

	bobKey, _ := client.GenerateKey()
	bob := client.New(origin, bobKey)
	if _, err := bob.Join(ctx, created.ID, "speaker", "", ""); err != nil {
		log.Fatal(err)
	}
	if _, err := bob.Message(ctx, created.ID, "text/plain", "Ship on Friday?"); err != nil {
		log.Fatal(err)
	}

	msgs, err := alice.Messages(ctx, created.ID, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		var text string
		_ = json.Unmarshal(m.Content, &text)
		fmt.Printf("seq %d, from bob: %v: %s\n", m.Seq, m.Actor == bobKey.ID, text)
	}
	// Output:
	// room created, seq 1
	// seq 3, from bob: true: Ship on Friday?
}

// A key file: written once (mode 0600), loaded by every later run. The
// file also records the last nonce the key used, so a restarted agent
// never reuses one.
func ExampleLoadKey() {
	dir, err := os.MkdirTemp("", "agent-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.key")

	k, _ := client.GenerateKey()
	if err := k.Save(path); err != nil {
		log.Fatal(err)
	}
	loaded, err := client.LoadKey(path)
	if err != nil {
		log.Fatal(err)
	}
	fi, _ := os.Stat(path)
	fmt.Println("same agent:", loaded.ID == k.ID)
	fmt.Printf("mode: %04o\n", fi.Mode().Perm())
	// Output:
	// same agent: true
	// mode: 0600
}

// Post is the write with the §6.1 retry loop: decide sees the room as it
// is and the records written since its last attempt, and chooses what to
// write; a write that lost the race for the head is decided again.
func ExampleClient_Post() {
	origin, stop := exampleHost()
	defer stop()
	ctx := context.Background()

	k, _ := client.GenerateKey()
	c := client.New(origin, k)
	now := time.Now()
	created, err := c.CreateRoom(ctx, map[string]any{
		"topic": "Counter", "visibility": "public",
		"start_time": now.UnixMilli(), "end_time": now.Add(time.Hour).UnixMilli(),
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := c.Post(ctx, created.ID, 5, func(room *client.Room, since []*record.Record) (string, any, error) {
		text := fmt.Sprintf("the head was seq %d", room.Head.Seq)
		return "message.create", map[string]any{"content_type": "text/plain", "content": text}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written at seq", rec.Seq)

	// Errors from the host carry the ADP code.
	_, err = c.Room(ctx, "d0000000000000000000")
	fmt.Println("code:", client.CodeOf(err))
	// Output:
	// written at seq 2
	// code: room_not_found
}
