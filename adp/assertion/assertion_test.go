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
	"github.com/adpnode/adpnode/adp/tlogwitness"
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

// witnessKey is the seed signer's cosignature/v1 verifier key.
func witnessKey(t testing.TB, name string) string {
	seed := make([]byte, 32)
	copy(seed, name)
	k, err := identity.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return tlogwitness.CosignatureVerifierKey("m.example/adp-witness", k.Public().(ed25519.PublicKey))
}

func announce(t testing.TB, w *assertion.Signer, vkey string) []byte {
	return sign(t, w, assertion.TypeWitness, assertion.Witness{Witness: w.HostKey(), VKey: vkey,
		URL: "https://m.example/v1/witness", Logs: []string{"h.example/adp-log"}})
}

func TestWitnessAnnouncement(t *testing.T) {
	w := signer(t, "witness")
	got, err := assertion.OpenWitness(announce(t, w, witnessKey(t, "witness")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Witness != w.HostKey() || got.URL != "https://m.example/v1/witness" || len(got.Logs) != 1 || got.VKey != witnessKey(t, "witness") {
		t.Fatalf("announcement %+v", got)
	}
}

func TestCheckpoint(t *testing.T) {
	host := signer(t, "host")
	cpRaw := checkpoint(t, host)
	cp, err := assertion.OpenCheckpoint(cpRaw)
	if err != nil {
		t.Fatal(err)
	}
	if cp != (assertion.Checkpoint{Host: host.HostKey(), RoomID: roomID, Seq: 7, Hash: hash, ReceivedAt: t0}) {
		t.Fatalf("checkpoint %+v", cp)
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
		"witness naming another witness":   {sign(t, other, assertion.TypeWitness, assertion.Witness{Witness: witness.HostKey(), VKey: witnessKey(t, "witness"), URL: "https://m.example/v1/witness", Logs: []string{}}), openWitness},
		"witness with another's vkey":      {announce(t, witness, witnessKey(t, "other")), openWitness},
		"witness with a note (log) vkey":   {announce(t, witness, "m.example+00000000+AQ"+strings.Repeat("A", 42)), openWitness},
		"witness with an unknown member":   {sign(t, witness, assertion.TypeWitness, map[string]any{"witness": witness.HostKey(), "vkey": witnessKey(t, "witness"), "url": "https://m.example/v1/witness", "logs": []string{}, "extra": 1}), openWitness},
		"witness with too many logs":       {sign(t, witness, assertion.TypeWitness, assertion.Witness{Witness: witness.HostKey(), VKey: witnessKey(t, "witness"), URL: "https://m.example/v1/witness", Logs: make([]string, assertion.MaxWitnessLogs+1)}), openWitness},
		"witness with a huge URL":          {sign(t, witness, assertion.TypeWitness, assertion.Witness{Witness: witness.HostKey(), VKey: witnessKey(t, "witness"), URL: "https://m.example/" + strings.Repeat("x", 600), Logs: []string{}}), openWitness},
		"checkpoint passed as a witness":   {cpRaw, openWitness},
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

func openCP(b []byte) error      { _, err := assertion.OpenCheckpoint(b); return err }
func openWitness(b []byte) error { _, err := assertion.OpenWitness(b); return err }

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

// FuzzOpenWitness: accepted implies signed by the witness it names, whose
// key the vkey carries.
func FuzzOpenWitness(f *testing.F) {
	w := signer(f, "witness")
	f.Add(announce(f, w, witnessKey(f, "witness")))
	f.Add(checkpoint(f, signer(f, "host")))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := assertion.OpenWitness(b)
		if err != nil {
			if adp.CodeOf(err) == adp.CodeInternal {
				t.Fatalf("error without an ADP code: %v", err)
			}
			return
		}
		env, err := assertion.Open(b, assertion.TypeWitness)
		if err != nil || env.Event.Actor != a.Witness {
			t.Fatalf("accepted announcement does not open as one by its witness: %v", err)
		}
		v, err := tlogwitness.NewCosignatureVerifier(a.VKey)
		if err != nil || !v.PublicKey().Equal(a.Witness.PublicKey()) {
			t.Fatalf("accepted announcement's vkey is not its signer's: %v", err)
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
