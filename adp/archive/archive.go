// Package archive builds ADP archives (§19) and verifies them offline with
// nothing but the kernel: the five verification steps of §19, including a
// full replay of the room with the type definitions in force at each seq.
package archive

import (
	"bufio"
	"bytes"
	"crypto/sha3"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
	"github.com/adpnode/adpnode/adp/tlogproof"
	"github.com/adpnode/adpnode/adp/tlogwitness"
	"github.com/adpnode/adpnode/adp/types"
	"golang.org/x/mod/sumdb/note"
)

// Manifest is the §19 archive manifest. ArchiveRoot is the RFC 6962
// Merkle root over the records' hashes in seq order (§19's "MAY use a
// Merkle tree"; docs/decisions.md); an archive written before
// that has ArchiveRoot equal to EventsSHA3, which still verifies.
type Manifest struct {
	Protocol    string            `json:"protocol"`
	Type        string            `json:"type"`
	Host        string            `json:"host"`
	RoomID      string            `json:"room_id"`
	URL         string            `json:"url"`
	GeneratedAt int64             `json:"generated_at"`
	EventCount  int64             `json:"event_count"`
	FirstSeq    int64             `json:"first_seq"`
	LastSeq     int64             `json:"last_seq"`
	LastHash    string            `json:"last_hash"`
	EventsSHA3  string            `json:"events_sha3_256"`
	ArchiveRoot string            `json:"archive_root"`
	Formats     map[string]string `json:"formats,omitempty"`
	Extra       map[string]any    `json:"extra"`
}

// PackDoc is one imported pack document carried by an archive. A registered
// pack carries its pack object in Document; an external pack carries the
// exact fetched bytes in Content (a JSON string keeps them byte for byte, so
// the digest still verifies).
type PackDoc struct {
	Use      string          `json:"use,omitempty"`
	Pack     string          `json:"pack,omitempty"`
	Digest   string          `json:"digest,omitempty"`
	Document json.RawMessage `json:"document,omitempty"`
	Content  string          `json:"content,omitempty"`
}

// Archive is the JSON archive of DECISIONS 3.
type Archive struct {
	Manifest Manifest          `json:"manifest"`
	Room     json.RawMessage   `json:"room"`
	Packs    []PackDoc         `json:"packs"`
	Records  []json.RawMessage `json:"records"`
}

// PackDocs returns the archive pack entries for a room's imports.
func PackDocs(imports []types.Import) []PackDoc {
	out := make([]PackDoc, 0, len(imports))
	for _, imp := range imports {
		if imp.Digest == "" {
			out = append(out, PackDoc{Use: imp.Pack, Document: imp.Raw})
		} else {
			out = append(out, PackDoc{Pack: imp.Pack, Digest: imp.Digest, Content: string(imp.Raw)})
		}
	}
	return out
}

// NewManifest returns the manifest for a room's complete record list.
func NewManifest(host, url string, recs []*record.Record, generatedAt int64) Manifest {
	m := Manifest{Protocol: adp.Protocol, Type: "room.archive", Host: host, URL: url,
		GeneratedAt: generatedAt, EventCount: int64(len(recs)), Extra: map[string]any{}}
	if len(recs) > 0 {
		m.RoomID = recs[0].RoomID
		m.FirstSeq = recs[0].Seq
		m.LastSeq = recs[len(recs)-1].Seq
		m.LastHash = recs[len(recs)-1].Hash
	}
	d := newDigests()
	for _, r := range recs {
		d.add(r)
	}
	m.EventsSHA3, m.ArchiveRoot = d.eventsDigest(), d.archiveRoot()
	return m
}

// Failure says where and why verification failed: the first failing seq,
// the §19 step (1–5; 0 for the manifest itself), the ADP code when the
// kernel gave one, and the reason.
type Failure struct {
	Seq    int64
	Step   int
	Code   adp.Code
	Reason string
}

func (f *Failure) Error() string {
	if f.Seq == 0 {
		return fmt.Sprintf("archive invalid (step %d): %s", f.Step, f.Reason)
	}
	return fmt.Sprintf("archive invalid at seq %d (step %d): %s", f.Seq, f.Step, f.Reason)
}

// Report is what a successful verification established.
type Report struct {
	RoomID   string
	Records  int64
	LastSeq  int64
	LastHash string
	Status   room.Status
	Members  int
	Types    int
	Counts   map[string]int64
	State    *room.State
	// Witnesses are the verified cosignature/v1 lines on the checkpoint
	// of extra.host_log, one per key it lists.
	Witnesses []tlogwitness.Cosigned
	// LegacyWitnesses counts the entries of extra.witnesses (retired
	// checkpoint.cosign assertions), which are not checked.
	LegacyWitnesses int
	// HostAsserted is what the archive says that no signature covers: it
	// is consistent with the rest, but only the host vouches for it.
	HostAsserted HostAsserted
	// Complete is what the archive proves about being the whole room
	// (complete.go): Unproven is empty when it is proven complete.
	Complete Completeness
}

// HostAsserted are manifest fields only the serving host vouches for.
type HostAsserted struct {
	Host        string
	URL         string
	GeneratedAt int64
}

// Options tune verification.
type Options struct {
	// Limits are the limits replay enforces; nil means room.ReplayLimits:
	// protocol rules, not one host's policy.
	Limits *room.Limits
	// Parsed, when set, returns step 2 of the i-th record given (0-based,
	// in the order given): what ParseRecord returns for that record's
	// bytes. The kernel calls it in order and takes shape, hashes and
	// signature from it instead of checking them again, so a caller can
	// run step 2 on every core (ahead of the replay, blocking here until
	// record i is done) while the kernel replays in order; every other
	// step still runs. A Parsed that answers anything but ParseRecord of
	// the same bytes voids the verification.
	Parsed func(i int) Parsed

	room json.RawMessage // the JSON form's room resource (set by Verify)
}

// Parsed is the outcome of step 2 for one record: record.Parse of its
// bytes (shape, envelope hash, signature, record hash).
type Parsed struct {
	Record   *record.Record
	Envelope *identity.Envelope
	Err      error
}

// ParseRecord runs step 2 on one record's bytes. It is safe to call for
// different records at the same time.
func ParseRecord(raw []byte) Parsed {
	rec, env, err := record.Parse(raw)
	return Parsed{rec, env, err}
}

// Verify checks an archive document with the five §19 steps.
func Verify(a *Archive, opt Options) (*Report, error) {
	recs := make([][]byte, len(a.Records))
	for i, r := range a.Records {
		recs[i] = r
	}
	opt.room = a.Room
	return VerifyRecords(&a.Manifest, a.Packs, recs, opt)
}

// VerifyRecords checks raw server records (one JSON text each) against a
// manifest. Checks: every record's strict shape, envelope hash, signature
// and record hash (step 2); seq order (1); replay of the room state with
// the registry in force at each seq, on each record's received_at (3); the
// pre_hash chain and last_hash (4); events_sha3_256 and archive_root (5);
// the manifest's room, counts and seq range; that the pack documents, the
// room resource (JSON form) and the manifest's url are those the chain
// implies (shown.go). Does not check: the live time
// window, nonces or rates (host policy at write time), or who the host is.
func VerifyRecords(m *Manifest, packs []PackDoc, raws [][]byte, opt Options) (*Report, error) {
	lim := room.ReplayLimits()
	if opt.Limits != nil {
		lim = *opt.Limits
	}
	if len(raws) == 0 {
		return nil, &Failure{Step: 1, Reason: "archive has no records"}
	}
	src, err := newPackSource(packs)
	if err != nil {
		return nil, &Failure{Step: 3, Code: adp.CodePackUnavailable, Reason: err.Error()}
	}
	parse := func(i int) Parsed { return ParseRecord(raws[i]) }
	if opt.Parsed != nil {
		parse = opt.Parsed
	}
	st, recs, sums, failure := replayRecords(len(raws), parse, raws, lim, src)
	if failure != nil {
		return nil, failure
	}
	last := recs[len(recs)-1]
	switch {
	case m.RoomID != last.RoomID:
		return nil, &Failure{Step: 0, Reason: "manifest room_id does not match the records"}
	case m.EventCount != int64(len(recs)) || m.FirstSeq != 1 || m.LastSeq != last.Seq:
		return nil, &Failure{Step: 0, Reason: fmt.Sprintf("manifest counts (%d records, seq %d..%d) do not match the records (%d, 1..%d)",
			m.EventCount, m.FirstSeq, m.LastSeq, len(recs), last.Seq)}
	case m.LastHash != last.Hash:
		return nil, &Failure{Seq: last.Seq, Step: 4, Reason: "manifest last_hash is not the final record's hash"}
	}
	digest := sums.eventsDigest()
	if m.EventsSHA3 != digest {
		return nil, &Failure{Step: 5, Reason: "events_sha3_256 does not match the records"}
	}
	if m.ArchiveRoot != "" && m.ArchiveRoot != digest && m.ArchiveRoot != sums.archiveRoot() {
		return nil, &Failure{Step: 5, Reason: "archive_root is neither the records' Merkle root nor events_sha3_256"}
	}
	cp, witnesses, f := verifyHostLog(m)
	if f != nil {
		return nil, f
	}
	if f := checkManifestOrigin(m); f != nil {
		return nil, f
	}
	if f := checkPacks(packs, st); f != nil {
		return nil, f
	}
	if f := checkRoom(opt.room, m, st, last); f != nil {
		return nil, f
	}
	status := st.StatusAt(max(m.GeneratedAt, last.ReceivedAt))
	return &Report{HostAsserted: HostAsserted{Host: m.Host, URL: m.URL, GeneratedAt: m.GeneratedAt},
		RoomID: last.RoomID, Records: int64(len(recs)), LastSeq: last.Seq, LastHash: last.Hash,
		Status: status, Members: len(st.AllMembers()), Types: st.Registry.Len(),
		Counts: st.Counts(), State: st, Witnesses: witnesses, LegacyWitnesses: legacyWitnesses(m),
		Complete: completeness(m, st, status, last, cp)}, nil
}

// legacyWitnesses counts the entries of extra.witnesses, the retired
// checkpoint.cosign assertions of archives made before the witnesses
// cosigned the host log (docs/mirrors.md, "Witnessing"). They are not checked.
func legacyWitnesses(m *Manifest) int {
	raw, ok := m.Extra["witnesses"]
	if !ok || raw == nil {
		return 0
	}
	b, _ := json.Marshal(raw)
	var list []json.RawMessage
	if json.Unmarshal(b, &list) != nil {
		return 0
	}
	return len(list)
}

// replayRecords runs steps 1–4 over n records in the order given (parse(i)
// is step 2 of the i-th). When a record is out of place but the whole set
// is a complete permutation of 1..n, it sorts them (step 1) and starts
// again; otherwise the first failing position names the seq.
func replayRecords(n int, parse func(int) Parsed, raws [][]byte, lim room.Limits, src packSource) (*room.State, []*record.Record, *digests, *Failure) {
	st := room.New(room.Config{Limits: lim, Packs: src})
	recs := make([]*record.Record, 0, n)
	sums := newDigests()
	for i := 0; i < n; i++ {
		seq := int64(i + 1)
		p := parse(i)
		if p.Err != nil {
			return nil, nil, nil, fail(seq, 2, p.Err)
		}
		rec, env := p.Record, p.Envelope
		if rec.Seq != seq {
			if order, ok := sortedIfPermutation(raws); ok {
				return replayRecords(n, func(i int) Parsed { return parse(order[i]) }, permute(raws, order), lim, src)
			}
			return nil, nil, nil, &Failure{Seq: seq, Step: 1, Reason: fmt.Sprintf("expected seq %d, found %d", seq, rec.Seq)}
		}
		if err := st.Apply(rec, env, nil); err != nil {
			var ce *record.ChainError
			if errors.As(err, &ce) {
				return nil, nil, nil, &Failure{Seq: seq, Step: 4, Reason: ce.Reason}
			}
			return nil, nil, nil, fail(seq, 3, err)
		}
		sums.add(rec)
		recs = append(recs, rec)
	}
	return st, recs, sums, nil
}

// digests folds records, in order, into the manifest's two digests:
//
//   - events_sha3_256: base64url(SHA3-256(JCS(records)));
//   - archive_root: base64url of the RFC 6962 root over the records' raw
//     hashes in order (leaf = SHA-256(0x00 || hash)), the same leaves as
//     the host log's, so one record's inclusion in a room is an O(log n)
//     proof against it.
//
// Verification folds each record as the replay takes it, so that the
// caller's other cores keep verifying signatures meanwhile instead of one
// core hashing everything again at the end.
type digests struct {
	events *sha3.SHA3
	buf    []byte
	n      int
	tree   tlogproof.RootBuilder
	bad    bool // a record hash that is not 32 bytes (Apply checked it: never)
}

func newDigests() *digests {
	d := &digests{events: sha3.New256(), buf: make([]byte, 0, 4096)}
	d.events.Write([]byte{'['})
	return d
}

func (d *digests) add(r *record.Record) {
	d.buf = d.buf[:0]
	if d.n > 0 {
		d.buf = append(d.buf, ',')
	}
	d.buf = r.AppendCanonical(d.buf)
	d.events.Write(d.buf)
	d.n++
	leaf, err := tlogproof.RecordLeaf(r.Hash)
	d.bad = d.bad || err != nil
	d.tree.Add(leaf)
}

func (d *digests) eventsDigest() string {
	d.events.Write([]byte{']'})
	return identity.EncodeB64(d.events.Sum(nil))
}

func (d *digests) archiveRoot() string {
	if d.bad {
		return ""
	}
	r := d.tree.Root()
	return identity.EncodeB64(r[:])
}

// sortedIfPermutation returns the order (order[k] is the index of the
// record with seq k+1) when the raws' seqs are exactly 1..n, each once, and
// they were not already in that order.
func sortedIfPermutation(raws [][]byte) ([]int, bool) {
	order := make([]int, len(raws))
	seen := make([]bool, len(raws))
	inOrder := true
	for i, raw := range raws {
		var r struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Seq < 1 || r.Seq > int64(len(raws)) || seen[r.Seq-1] {
			return nil, false
		}
		seen[r.Seq-1] = true
		order[r.Seq-1] = i
		inOrder = inOrder && r.Seq == int64(i+1)
	}
	return order, !inOrder
}

func permute(raws [][]byte, order []int) [][]byte {
	out := make([][]byte, len(order))
	for k, i := range order {
		out[k] = raws[i]
	}
	return out
}

func fail(seq int64, step int, err error) *Failure {
	return &Failure{Seq: seq, Step: step, Code: adp.CodeOf(err), Reason: err.Error()}
}

// packSource serves external pack documents from an archive.
type packSource map[string][]byte

func newPackSource(packs []PackDoc) (packSource, error) {
	src := packSource{}
	for _, p := range packs {
		if p.Pack == "" {
			continue // registered packs come from the embedded copies
		}
		src[p.Pack+"\x00"+p.Digest] = []byte(p.Content)
	}
	return src, nil
}

func (p packSource) ExternalPack(uri, digest string) ([]byte, error) {
	b, ok := p[uri+"\x00"+digest]
	if !ok {
		return nil, fmt.Errorf("archive does not carry pack %s", uri)
	}
	return b, nil
}

// WriteJSONL writes the JSONL archive form: the manifest on the first line
// (with the pack documents under extra.packs, so the file is
// self-contained), then one record a line.
func WriteJSONL(w *bufio.Writer, m Manifest, packs []PackDoc, recs []*record.Record) error {
	mm := m
	mm.Extra = map[string]any{}
	for k, v := range m.Extra {
		mm.Extra[k] = v
	}
	if len(packs) > 0 {
		mm.Extra["packs"] = packs
	}
	if err := writeLine(w, mm); err != nil {
		return err
	}
	for _, r := range recs {
		b, _ := r.MarshalJSON()
		if _, err := w.Write(b); err != nil {
			return err
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
	}
	return w.Flush()
}

func writeLine(w *bufio.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// ParseJSONL splits a JSONL archive into its manifest, packs and raw records.
func ParseJSONL(data []byte) (*Manifest, []PackDoc, [][]byte, error) {
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) < 1 || len(bytes.TrimSpace(lines[0])) == 0 {
		return nil, nil, nil, errors.New("empty archive")
	}
	var m Manifest
	if err := identity.CheckJSON(lines[0]); err != nil {
		return nil, nil, nil, fmt.Errorf("manifest line: %w", err)
	}
	if err := json.Unmarshal(lines[0], &m); err != nil {
		return nil, nil, nil, fmt.Errorf("manifest line: %w", err)
	}
	var packs []PackDoc
	if raw, ok := m.Extra["packs"]; ok {
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &packs); err != nil {
			return nil, nil, nil, fmt.Errorf("manifest extra.packs: %w", err)
		}
	}
	return &m, packs, lines[1:], nil
}

// ParseJSON parses the JSON archive document (strictly).
func ParseJSON(data []byte) (*Archive, error) {
	if err := identity.CheckJSON(data); err != nil {
		return nil, err
	}
	var a Archive
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// verifyHostLog checks extra.host_log when present: a record proof file
// (adp/tlogproof) proving the archive's last record in the host log,
// signed by the host key the manifest names (extra.host_key) if any, and
// the cosignature/v1 line of every witness key it lists. It returns the
// proof's checkpoint (nil without extra.host_log) and the witnesses.
func verifyHostLog(m *Manifest) (*tlogproof.Checkpoint, []tlogwitness.Cosigned, *Failure) {
	raw, ok := m.Extra["host_log"]
	if !ok || raw == nil {
		return nil, nil, nil
	}
	b, _ := json.Marshal(raw)
	var f tlogproof.File
	if err := json.Unmarshal(b, &f); err != nil || f.Type != tlogproof.FileType {
		return nil, nil, &Failure{Step: 5, Reason: "extra.host_log is not a record proof"}
	}
	if f.RecordHash != m.LastHash {
		return nil, nil, &Failure{Step: 5, Reason: "extra.host_log proves another record than the last"}
	}
	cp, pub, err := tlogproof.VerifyFile(f)
	if err != nil {
		return nil, nil, &Failure{Step: 5, Reason: "extra.host_log: " + err.Error()}
	}
	var hostKey string
	switch v := m.Extra["host_key"].(type) {
	case string:
		hostKey = v
	case fmt.Stringer:
		hostKey = v.String()
	}
	if hostKey != "" && string(identity.AgentIDFromKey(pub)) != hostKey {
		return nil, nil, &Failure{Step: 5, Reason: "extra.host_log is signed by another key than extra.host_key"}
	}
	if len(f.Witnesses) == 0 {
		return &cp, nil, nil
	}
	v, _ := note.NewVerifier(f.VerifierKey) // VerifyFile parsed it
	ws, err := tlogwitness.VerifyCosigned([]byte(f.Checkpoint), v, f.Witnesses)
	if err != nil {
		return nil, nil, &Failure{Step: 5, Reason: "extra.host_log witnesses: " + err.Error()}
	}
	return &cp, ws, nil
}
