package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/adpnode/adpnode/directory"
	"github.com/adpnode/adpnode/fedport"
)

type fakeSource struct{}

func (fakeSource) Subscribers() int             { return 0 }
func (fakeSource) Summaries() []directory.Entry { return nil }

type fakeFederation struct{ st fedport.GossipStats }

func (f *fakeFederation) Peers() []fedport.PeerInfo   { return nil }
func (f *fakeFederation) Stats() *fedport.GossipStats { return &f.st }
func (f *fakeFederation) Bandwidth() (in, out int64)  { return 0, 0 }

// Property: what the federation's pull budget counts (bytes read and
// served, ids answered, requests refused, relayed claims penalised) reaches
// /metrics, so an operator sees a peer pulling against the budget.
func TestPullBudgetCountersExported(t *testing.T) {
	f := &fakeFederation{}
	f.st.PullRead.Store(11)
	f.st.PullServed.Store(22)
	f.st.PullIDs.Store(33)
	f.st.PullRefused.Store(44)
	f.st.Penalised.Store(55)
	m := New(fakeSource{})
	m.AttachFederation(f)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, line := range []string{
		"adp_pull_read_bytes_total 11",
		"adp_pull_served_bytes_total 22",
		"adp_pull_served_ids_total 33",
		"adp_pull_refused_total 44",
		"adp_pull_penalised_total 55",
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}

// Property: the profile cache's size and work reach /metrics, read at each
// scrape.
func TestProfileCacheSeriesExported(t *testing.T) {
	st := ProfileCacheStats{Entries: 3, Bytes: 1200, Fetches: 7, Refused: 2}
	m := New(fakeSource{})
	m.AttachProfiles(func() ProfileCacheStats { return st })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	body := scrape()
	for _, line := range []string{"adp_profile_cache_entries 3", "adp_profile_cache_bytes 1200", "adp_profile_fetches_total 7", "adp_profile_refused_total 2"} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
	st.Fetches = 8
	if body := scrape(); !strings.Contains(body, "\nadp_profile_fetches_total 8\n") {
		t.Error("the fetch counter is not read at the scrape")
	}
}

type protoFederation struct{ fakeFederation }

func (*protoFederation) BandwidthByProtocol() map[string][2]int64 {
	return map[string][2]int64{"/ipfs/kad/1.0.0": {100, 200}, "/meshsub/1.1.0": {7, 9}}
}

// Property: libp2p bytes by protocol and direction reach /metrics, so
// the DHT's share of a node's bandwidth can be told from gossip's.
func TestProtocolBytesExported(t *testing.T) {
	m := New(fakeSource{})
	m.AttachFederation(&protoFederation{})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, line := range []string{
		`adp_p2p_protocol_bytes_total{direction="in",protocol="/ipfs/kad/1.0.0"} 100`,
		`adp_p2p_protocol_bytes_total{direction="out",protocol="/ipfs/kad/1.0.0"} 200`,
		`adp_p2p_protocol_bytes_total{direction="out",protocol="/meshsub/1.1.0"} 9`,
	} {
		if !strings.Contains(body, "\n"+line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}
