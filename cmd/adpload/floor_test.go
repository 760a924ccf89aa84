package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/internal/groupcommit"
	"github.com/adpnode/adpnode/node"
)

// TestFloorHandler: the floor's verify stage refuses what the node would
// refuse (so a floor figure never counts a request the node would not do
// the work for), writes a record's four keys durably for each request it
// accepts, and its edge stage answers a record-sized 201.
func TestFloorHandler(t *testing.T) {
	envs, err := sampleEnvelopes("message", 200, 2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := badger.Open(node.BadgerOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit := groupcommit.New(db, 16)
	defer commit.Close()
	srv := httptest.NewServer(floorHandler(true, commit))
	defer srv.Close()
	post := func(body []byte) int {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/rooms/floor0", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tampered := bytes.Replace(envs[0], []byte("adpload message"), []byte("adpload messagE"), 1)
	if bytes.Equal(tampered, envs[0]) {
		t.Fatal("the sample envelope has no content to tamper with")
	}
	for name, body := range map[string][]byte{
		"tampered":  tampered,
		"not json":  []byte("{"),
		"too large": bytes.Repeat([]byte("a"), floorMaxBody+1),
	} {
		if got := post(body); got != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, got)
		}
	}
	for _, e := range envs {
		if got := post(e); got != http.StatusCreated {
			t.Fatalf("a good envelope: status %d, want 201", got)
		}
	}
	keys := map[string]int{}
	_ = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys[strings.SplitN(string(it.Item().Key()), "/", 2)[0]]++
		}
		return nil
	})
	if keys["r"] != 2 || keys["e"] != 4 || keys["n"] != 2 {
		t.Fatalf("keys written for two accepted requests: %v, want r:2 e:4 n:2", keys)
	}

	edge := httptest.NewServer(floorHandler(false, nil))
	defer edge.Close()
	resp, err := http.Post(edge.URL+"/v1/rooms/floor0", "application/json", strings.NewReader("anything"))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	got.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || got.Len() < 1000 {
		t.Fatalf("edge stage: status %d with %d bytes, want 201 with a record-sized answer", resp.StatusCode, got.Len())
	}
}
