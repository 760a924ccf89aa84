package archive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"

	"github.com/adpnode/adpnode/adp/identity"
	"github.com/adpnode/adpnode/adp/record"
	"github.com/adpnode/adpnode/adp/room"
)

// What a reader of an archive is shown must come from the verified chain.
// These checks compare every such field with what the replay derived:
//   - the room resource (topic, creator, status, policy, registry, head…)
//     must equal the resource the replayed state renders;
//   - the pack documents must equal the ones the replay imported;
//   - manifest.url must be the Room URL of this room on manifest.host, and
//     the format links must be under it.
//
// manifest.host (and so url) is what the host asserts about where it
// served the room: no signature in the archive covers it. Verification
// keeps it consistent with the rest and reports it as host-asserted
// (Report.HostAsserted); the host key of extra.host_key is what the
// witnesses bind.

// checkManifestOrigin checks manifest.url and formats against host and room.
func checkManifestOrigin(m *Manifest) *Failure {
	u, err := url.Parse(m.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.RawQuery != "" || u.Fragment != "" {
		return &Failure{Step: 0, Reason: fmt.Sprintf("manifest url %q is not an http(s) Room URL", m.URL)}
	}
	if u.Host != m.Host {
		return &Failure{Step: 0, Reason: fmt.Sprintf("manifest url %q is not on manifest host %q", m.URL, m.Host)}
	}
	if u.Path != "/v1/rooms/"+m.RoomID && !(len(u.Path) > len(m.RoomID) && u.Path[len(u.Path)-len(m.RoomID)-1:] == "/"+m.RoomID) {
		return &Failure{Step: 0, Reason: fmt.Sprintf("manifest url %q does not name room %s", m.URL, m.RoomID)}
	}
	names := make([]string, 0, len(m.Formats))
	for k := range m.Formats {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := m.Formats[k]; len(v) <= len(m.URL) || v[:len(m.URL)] != m.URL || v[len(m.URL)] != '/' {
			return &Failure{Step: 0, Reason: fmt.Sprintf("manifest formats.%s %q is not under the Room URL %q", k, v, m.URL)}
		}
	}
	return nil
}

// checkPacks compares the archive's pack documents with the replay's.
func checkPacks(packs []PackDoc, st *room.State) *Failure {
	want := PackDocs(st.Imports)
	if len(packs) != len(want) {
		return &Failure{Step: 3, Reason: fmt.Sprintf("archive carries %d pack documents; the room imported %d", len(packs), len(want))}
	}
	for i := range want {
		g, err1 := canonical(packs[i])
		w, err2 := canonical(want[i])
		if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
			name := want[i].Use
			if name == "" {
				name = want[i].Pack
			}
			return &Failure{Step: 3, Reason: fmt.Sprintf("pack document %d (%s) differs from the pack the room imported%s", i, name, firstDiff(g, w, "document"))}
		}
	}
	return nil
}

// checkRoom compares the archive's room resource with the one the replayed
// state renders at the archive's time.
func checkRoom(raw json.RawMessage, m *Manifest, st *room.State, last *record.Record) *Failure {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil // the JSONL form has no room resource
	}
	at := max(m.GeneratedAt, last.ReceivedAt, st.EndTime)
	want, err := canonical(st.Resource(at, m.URL))
	if err != nil {
		return &Failure{Step: 3, Reason: "rendering the replayed room: " + err.Error()}
	}
	got, err := identity.Canonicalize(raw)
	if err != nil {
		return &Failure{Step: 0, Reason: "room is not valid JSON: " + err.Error()}
	}
	if !bytes.Equal(got, want) {
		return &Failure{Step: 3, Reason: "the room resource differs from the verified chain" + firstDiff(got, want, "room")}
	}
	return nil
}

func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return identity.Canonicalize(b)
}

// firstDiff names the first member (one level down, in sorted order) whose
// value differs between two JSON objects: ": room.topic is edited".
func firstDiff(got, want []byte, prefix string) string {
	var g, w map[string]json.RawMessage
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return ""
	}
	keys := map[string]bool{}
	for k := range g {
		keys[k] = true
	}
	for k := range w {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		gv, gok := g[k]
		wv, wok := w[k]
		switch {
		case !wok:
			return fmt.Sprintf(": %s.%s is not derived from the chain", prefix, k)
		case !gok:
			return fmt.Sprintf(": %s.%s is missing", prefix, k)
		case !bytes.Equal(gv, wv):
			if sub := firstDiff(gv, wv, prefix+"."+k); sub != "" && k == "document" {
				return sub
			}
			return fmt.Sprintf(": %s.%s does not match the verified chain", prefix, k)
		}
	}
	return ""
}
