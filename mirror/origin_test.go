//go:build e2e

package mirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/adpnode/adpnode/adp/archive"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/federation"
	"github.com/adpnode/adpnode/index"
	"github.com/adpnode/adpnode/internal/adptest"
	"github.com/adpnode/adpnode/internal/fedtest"
	"github.com/adpnode/adpnode/internal/testwait"
	"github.com/adpnode/adpnode/mirror"
	"github.com/adpnode/adpnode/stack"
	"github.com/adpnode/adpnode/witness"
)

// startLogHostIn is startLogHost on a given data dir (so a restart keeps
// the key and the log) and a fresh port, so a fresh public URL.
func startLogHostIn(t *testing.T, dir string, clock *adptest.Clock, witnesses ...witness.Target) *fedtest.Peer {
	return startLogHostAs(t, dir, "", clock, witnesses...)
}

// startLogHostAs is startLogHostIn under the given public URL ("": its
// own).
func startLogHostAs(t *testing.T, dir, publicURL string, clock *adptest.Clock, witnesses ...witness.Target) *fedtest.Peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	origin := fmt.Sprintf("http://127.0.0.1:%d", port)
	if publicURL != "" {
		origin = publicURL
	}
	st, err := stack.Open(stack.Config{
		Node: stack.NodeConfig{PublicURL: origin, DataDir: filepath.Join(dir, "db"), Now: clock.Now, Rates: adptest.TestRates(noRates)},
		Federation: &federation.Config{ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}, AnnounceInterval: 2 * time.Second,
			AllowPrivateOrigins: true},
		KeyDir: dir, TokenDir: dir, ShutdownTimeout: time.Second,
		HostLog: &stack.HostLogConfig{Witnesses: witnesses, CheckpointInterval: 100 * time.Millisecond,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	st.Serve(ln)
	p := &fedtest.Peer{Stack: st, Name: "A", Dir: dir, Port: port, URL: origin, Clock: clock}
	t.Cleanup(p.Stop)
	return p
}

// Property: a mirror that witnesses a host's log learns the host's new
// log origin when the host changes its public URL: from the host's signed
// room announcements, once the new origin's binding to the host key is
// verified. It announces the new origin and cosigns the host's
// checkpoints under it, consistent with the old origin's tree, with no
// split view.
func TestMirrorWitnessLearnsNewOrigin(t *testing.T) {
	clock := adptest.NewClock()
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
	bv, err := tlogwitness.NewCosignatureVerifier(b.Mir.Witness().VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	target := witness.Target{URL: b.URL + mirror.WitnessPath, Verifier: bv}
	dir := t.TempDir()
	a := startLogHostIn(t, dir, clock, target)
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "moving")
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("before"))
	mirrorOf(t, b, a, id)
	mirrored(t, a, b, id)
	oldOrigin := a.HostLog.Origin()
	testwait.Until(t, 60*time.Second, "B's witness cosigns A's log", func() bool {
		st, err := b.Mir.Witness().State(oldOrigin)
		return err == nil && st != nil && st.Size == 2
	})

	a.Stop()
	clock.Advance(5 * time.Second)            // the new announcements are newer
	a = startLogHostIn(t, dir, clock, target) // a new public URL
	newOrigin := a.HostLog.Origin()
	if newOrigin == oldOrigin {
		t.Fatal("the restart kept the origin")
	}
	fedtest.Connect(t, a, b)
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("after"))
	testwait.Until(t, 90*time.Second, "B's witness cosigns A's log under its new origin", func() bool {
		st, err := b.Mir.Witness().State(newOrigin)
		return err == nil && st != nil && st.Size == 3
	})
	if logs := b.Mir.WitnessedLogsForTest(); !slices.Contains(logs, newOrigin) {
		t.Fatalf("B announces %v, not A's new origin %s", logs, newOrigin)
	}
	if n := len(b.Mir.EvidenceList()); n != 0 {
		t.Fatalf("%d pieces of evidence against a host that only moved", n)
	}
	// A serves B's cosignature of the new origin's checkpoint.
	testwait.Until(t, 30*time.Second, "A keeps B's cosignature", func() bool {
		_, size, vkeys := a.Witness.Witnessed()
		return size == 3 && slices.Contains(vkeys, bv.Key())
	})

	// The room ends: B fetches the host's proof of its last record where
	// the host answers now, under the new origin, and its archive carries
	// it with B's own cosignature.
	mirrored(t, a, b, id)
	clock.Advance(61 * time.Minute)
	testwait.Until(t, 90*time.Second, "B's archive embeds the new origin's proof", func() bool {
		resp, err := http.Get(b.URL + "/v1/mirrors/rooms/" + id + "/archive")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		doc, err := archive.ParseJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := archive.Verify(doc, archive.Options{})
		if err != nil {
			t.Fatalf("B's archive: %v", err)
		}
		if doc.Manifest.Extra["host_log"] == nil {
			return false
		}
		j, _ := json.Marshal(doc.Manifest.Extra["host_log"])
		var f tlogproof.File
		if err := json.Unmarshal(j, &f); err != nil {
			t.Fatal(err)
		}
		cp, _, err := tlogproof.VerifyFile(f)
		if err != nil || cp.Origin != newOrigin {
			t.Fatalf("the embedded proof: origin %q, %v", cp.Origin, err)
		}
		return slices.ContainsFunc(rep.Witnesses, func(w tlogwitness.Cosigned) bool { return w.VKey == bv.Key() })
	})
}

// Property: a mirrored host cannot make a mirror's witness vouch for an
// origin it does not hold: an announcement naming an origin whose
// discovery document does not name the host's key (here, the mirror's
// own) teaches the mirror nothing; it keeps witnessing the host under the
// origin it had.
func TestMirrorWitnessIgnoresUnverifiedOrigin(t *testing.T) {
	clock := adptest.NewClock()
	b := fedtest.Start(t, "B", t.TempDir(), clock, 0, fedtest.Options{Rates: noRates, Mirror: true})
	dir := t.TempDir()
	a := startLogHostIn(t, dir, clock)
	alice := adptest.NewAgent("alice")
	id := fedtest.CreateRoom(t, a, alice, room.Public, "lying")
	mirrorOf(t, b, a, id)
	mirrored(t, a, b, id)
	oldOrigin := a.HostLog.Origin()
	testwait.Until(t, 30*time.Second, "B learns A's origin", func() bool {
		b.Mir.ReconcileForTest()
		return slices.Contains(b.Mir.WitnessedLogsForTest(), oldOrigin)
	})

	a.Stop()
	clock.Advance(5 * time.Second)
	a = startLogHostAs(t, dir, b.URL, clock) // claims B's URL
	stolen := a.HostLog.Origin()
	fedtest.Connect(t, a, b)
	fedtest.MustSubmit(t, a, alice, "message.create", id, msg("moved?"))
	var lie *index.Entry
	testwait.Until(t, 60*time.Second, "B indexes A's announcement under the claimed URL", func() bool {
		for _, e := range b.Index.Entries(clock.Ms(), false) {
			if e.Host.Key == a.Fed.HostKey() && e.Host.Origin == b.URL {
				lie = e
				return true
			}
		}
		return false
	})
	if err := b.Fed.CheckBinding(context.Background(), lie.Host); err == nil {
		t.Fatal("the binding of A's key to B's origin verified")
	}
	b.Mir.ReconcileForTest()
	if logs := b.Mir.WitnessedLogsForTest(); slices.Contains(logs, stolen) || !slices.Contains(logs, oldOrigin) {
		t.Fatalf("B announces %v after A claimed %s", logs, stolen)
	}
}
