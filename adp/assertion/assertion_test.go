package assertion_test

import (
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/assertion"
	"github.com/adpnode/adpnode/adp/identity"
)

const (
	t0     int64 = 1_780_000_000_000
	roomID       = "d8ftedhpqhsusbg001tg"
)

var hash = identity.EncodeB64(make([]byte, 32))

func signer(t testing.TB, name string) *assertion.Signer {
	t.Helper()
	seed := make([]byte, 32)
	copy(seed, name)
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return assertion.NewSigner(k)
}

func sign(t testing.TB, s *assertion.Signer, typ string, payload any) []byte {
	t.Helper()
	raw, err := s.Sign(typ, payload, t0)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func checkpoint(t testing.TB, s *assertion.Signer) []byte {
	return sign(t, s, assertion.TypeCheckpoint, assertion.Checkpoint{Host: s.HostKey(), RoomID: roomID, Seq: 7, Hash: hash, ReceivedAt: t0})
}

func cosign(t testing.TB, w *assertion.Signer, cp []byte) []byte {
	return sign(t, w, assertion.TypeCosign, assertion.Cosign{Witness: w.HostKey(), Checkpoint: cp})
}

func TestCheckpointAndCosign(t *testing.T) {
	host, witness := signer(t, "host"), signer(t, "witness")
	cpRaw := checkpoint(t, host)
	cp, err := assertion.OpenCheckpoint(cpRaw)
	if err != nil {
		t.Fatal(err)
	}
	if cp != (assertion.Checkpoint{Host: host.HostKey(), RoomID: roomID, Seq: 7, Hash: hash, ReceivedAt: t0}) {
		t.Fatalf("checkpoint %+v", cp)
	}
	c, err := assertion.OpenCosign(cosign(t, witness, cpRaw))
	if err != nil {
		t.Fatal(err)
	}
	if c.Witness != witness.HostKey() || c.Checkpoint != cp {
		t.Fatalf("cosignature %+v", c)
	}
	env, err := assertion.Open(cpRaw, assertion.TypeCheckpoint)
	if err != nil || env.Event.Protocol != assertion.Protocol || env.Event.Actor != host.HostKey() {
		t.Fatalf("Open = %v, %+v", err, env)
	}
}

// TestOpenRefuses: hostile assertions, each refused with invalid_event (or
// the envelope's own code).
func TestOpenRefuses(t *testing.T) {
	host, witness, other := signer(t, "host"), signer(t, "witness"), signer(t, "other")
	cpRaw := checkpoint(t, host)
	k, _ := identity.KeyFromSeed([]byte(strings.Repeat("h", 32)))
	agentEnv, _ := identity.Sign(k, identity.Event{Protocol: adp.Protocol, Type: assertion.TypeCheckpoint,
		Actor: identity.AgentIDFromKey(k.Public().(ed25519.PublicKey)), CreatedAt: t0, Nonce: 1, Payload: json.RawMessage(`{}`)})
	for name, c := range map[string]struct {
		raw  []byte
		open func([]byte) error
	}{
		"checkpoint naming another host":   {sign(t, other, assertion.TypeCheckpoint, assertion.Checkpoint{Host: host.HostKey(), RoomID: roomID, Seq: 1, Hash: hash}), openCP},
		"checkpoint of the wrong type":     {sign(t, host, assertion.TypeAnnounce, assertion.Checkpoint{Host: host.HostKey(), RoomID: roomID, Seq: 1, Hash: hash}), openCP},
		"checkpoint of the agent protocol": {agentEnv.Raw, openCP},
		"checkpoint with unknown member":   {sign(t, host, assertion.TypeCheckpoint, map[string]any{"host": host.HostKey(), "room_id": roomID, "seq": 1, "hash": hash, "received_at": 0, "shadow": true}), openCP},
		"checkpoint member in other case":  {sign(t, host, assertion.TypeCheckpoint, map[string]any{"Host": host.HostKey(), "room_id": roomID, "seq": 1, "hash": hash, "received_at": 0}), openCP},
		"checkpoint seq a string":          {sign(t, host, assertion.TypeCheckpoint, map[string]any{"host": host.HostKey(), "room_id": roomID, "seq": "1", "hash": hash, "received_at": 0}), openCP},
		"checkpoint payload not object":    {sign(t, host, assertion.TypeCheckpoint, []int{1}), openCP},
		"tampered checkpoint":              {[]byte(strings.Replace(string(cpRaw), `"seq":7`, `"seq":8`, 1)), openCP},
		"cosign naming another witness":    {sign(t, other, assertion.TypeCosign, assertion.Cosign{Witness: witness.HostKey(), Checkpoint: cpRaw}), openCosign},
		"cosign of a tampered checkpoint":  {cosign(t, witness, []byte(strings.Replace(string(cpRaw), `"seq":7`, `"seq":8`, 1))), openCosign},
		"cosign of a cosign":               {cosign(t, witness, cosign(t, witness, cpRaw)), openCosign},
		"cosign without checkpoint":        {sign(t, witness, assertion.TypeCosign, map[string]any{"witness": witness.HostKey()}), openCosign},
		"checkpoint passed as a cosign":    {cpRaw, openCosign},
	} {
		err := c.open(c.raw)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if code := adp.CodeOf(err); code == adp.CodeInternal {
			t.Errorf("%s: error without an ADP code: %v", name, err)
		}
	}
}

func openCP(b []byte) error     { _, err := assertion.OpenCheckpoint(b); return err }
func openCosign(b []byte) error { _, err := assertion.OpenCosign(b); return err }

// TestSignerNoncesIncrease: nonces never go backwards, even when the clock
// does and when many goroutines sign at once (Identity §8).
func TestSignerNoncesIncrease(t *testing.T) {
	s := signer(t, "host")
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				raw, err := s.Sign(assertion.TypeCheckpoint, assertion.Checkpoint{Host: s.HostKey(), RoomID: roomID, Seq: 1, Hash: hash}, t0-int64(i*g))
				if err != nil {
					t.Error(err)
					return
				}
				env, err := assertion.Open(raw, assertion.TypeCheckpoint)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[env.Event.Nonce] {
					t.Errorf("nonce %d used twice", env.Event.Nonce)
				}
				seen[env.Event.Nonce] = true
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	var prev int64
	for i := 0; i < 3; i++ {
		env, _ := assertion.Open(sign(t, s, assertion.TypeCheckpoint, assertion.Checkpoint{Host: s.HostKey()}), assertion.TypeCheckpoint)
		if env.Event.Nonce <= prev {
			t.Fatalf("nonce %d after %d", env.Event.Nonce, prev)
		}
		prev = env.Event.Nonce
	}
}

// FuzzOpenCosign: accepted implies verifies — an accepted cosignature's
// embedded checkpoint opens on its own to the same checkpoint, and both
// signers are the members they name.
func FuzzOpenCosign(f *testing.F) {
	host, witness := signer(f, "host"), signer(f, "witness")
	cp := checkpoint(f, host)
	f.Add(cosign(f, witness, cp))
	f.Add(cp)
	f.Add(cosign(f, witness, cosign(f, witness, cp)))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := assertion.OpenCosign(b)
		if err != nil {
			if adp.CodeOf(err) == adp.CodeInternal {
				t.Fatalf("error without an ADP code: %v", err)
			}
			return
		}
		env, err := assertion.Open(b, assertion.TypeCosign)
		if err != nil || env.Event.Actor != c.Witness {
			t.Fatalf("accepted cosign does not open as one by its witness: %v", err)
		}
		var p assertion.Cosign
		if err := json.Unmarshal(env.Event.Payload, &p); err != nil {
			t.Fatal(err)
		}
		cp, err := assertion.OpenCheckpoint(p.Checkpoint)
		if err != nil || cp != c.Checkpoint {
			t.Fatalf("embedded checkpoint: %v, %+v vs %+v", err, cp, c.Checkpoint)
		}
	})
}

// FuzzOpenCheckpoint: accepted implies signed by the host it names.
func FuzzOpenCheckpoint(f *testing.F) {
	f.Add(checkpoint(f, signer(f, "host")))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := assertion.OpenCheckpoint(b)
		if err != nil {
			return
		}
		env, err := identity.OpenEnvelope(b)
		if err != nil || env.Event.Actor != cp.Host || env.Event.Type != assertion.TypeCheckpoint {
			t.Fatalf("accepted checkpoint is not its host's: %v", err)
		}
	})
}
