package mirror

import (
	"crypto/ed25519"
	"net/url"

	"github.com/adpnode/adpnode/adp/evidence"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/witness"
)

// WitnessSuffix follows the mirror's public host[:port] in its witness
// name: the mirror https://m.example has the witness "m.example/adp-witness".
const WitnessSuffix = "/adp-witness"

// openWitness starts the mirror's C2SP tlog-witness for the hosts it
// mirrors, when the config carries a witness key.
func (m *Mirror) openWitness() error {
	if len(m.cfg.WitnessKey) == 0 {
		return nil
	}
	name := m.cfg.WitnessName
	if name == "" {
		name = m.n.Host() + WitnessSuffix
	}
	cs, err := tlogwitness.NewCosigner(name, m.cfg.WitnessKey)
	if err != nil {
		return err
	}
	m.witness, err = witness.New(witness.Config{DB: m.db, Prefix: pfxTlogW, Cosigner: cs,
		Logs: func(origin string) (tlogwitness.Log, bool) {
			lg, _, ok := m.hostLog(origin)
			return lg, ok
		},
		OnSplitView: m.splitView, Log: m.log})
	return err
}

// Witness returns the mirror's tlog-witness (nil without a witness key).
func (m *Mirror) Witness() *witness.Witness { return m.witness }

// hostLog returns the log of a host this mirror mirrors, by its origin
// (tlogproof.Origin of the host[:port] of its rooms' URLs, or of the
// origin its newest verified announcement names: see noteOrigin) and key. Two
// mirrored hosts claiming one origin make it unknown: the witness cannot
// tell whose log it is.
func (m *Mirror) hostLog(origin string) (tlogwitness.Log, identity.AgentID, bool) {
	var host identity.AgentID
	for _, r := range m.Rooms() {
		u, err := url.Parse(r.url)
		if err != nil || tlogproof.Origin(u.Host) != origin && m.currentOrigin(r.host) != origin {
			continue
		}
		if host != "" && host != r.host {
			return tlogwitness.Log{}, "", false
		}
		host = r.host
	}
	pub := host.PublicKey()
	if pub == nil {
		return tlogwitness.Log{}, "", false
	}
	v, err := tlogproof.Verifier(origin, pub)
	if err != nil {
		return tlogwitness.Log{}, "", false
	}
	return tlogwitness.Log{Origin: origin, Verifier: v}, host, true
}

// splitView turns a split view the witness saw into evidence against the
// host: stored, gossiped, and the host's rooms frozen.
func (m *Mirror) splitView(lg tlogwitness.Log, sv *tlogwitness.SplitView, reason string) {
	_, host, ok := m.hostLog(lg.Origin)
	if !ok {
		return
	}
	vkey, err := tlogproof.VerifierKey(lg.Origin, ed25519.PublicKey(host.PublicKey()))
	if err != nil {
		return
	}
	m.recordEvidence(evidence.SplitView(host, vkey, sv, reason, m.now(), m.fed.HostKey()))
}
