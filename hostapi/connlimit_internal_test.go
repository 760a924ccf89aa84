package hostapi

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"testing"
)

// fakeConn is a connection from a chosen remote address that records
// whether it was closed.
type fakeConn struct {
	net.Conn // nil: only the methods below are called
	remote   net.Addr
	closed   bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

func tcpAddr(s string) net.Addr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(s), 40000))
}

// Property: connections count against their client address: an IPv4
// address, an IPv6 /64 (one subscriber's allocation, so fresh addresses
// from it buy nothing), an IPv4-mapped IPv6 address as its IPv4 one; a
// connection that is not over IP has no address and only the total cap.
func TestConnAddrKey(t *testing.T) {
	for _, c := range []struct {
		remote net.Addr
		want   string
	}{
		{tcpAddr("192.0.2.7"), "192.0.2.7"},
		{tcpAddr("::ffff:192.0.2.7"), "192.0.2.7"},
		{tcpAddr("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::"},
		{tcpAddr("2001:db8:1:2::1"), "2001:db8:1:2::"},
		{tcpAddr("2001:db8:1:3::1"), "2001:db8:1:3::"},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "invalid IP"},
	} {
		if got := addrKey(c.remote).String(); got != c.want {
			t.Errorf("addrKey(%v) = %s, want %s", c.remote, got, c.want)
		}
	}
}

// admitFrom is one Accept of a connection from remote, through the
// listener's bookkeeping; the server's ConnState says it is new.
func admitFrom(l *limitListener, remote string) (*limitConn, *fakeConn, []*limitConn) {
	fc := &fakeConn{remote: tcpAddr(remote)}
	lc, victims := l.admit(fc)
	for _, v := range victims {
		v.Conn.Close()
	}
	if lc != nil {
		trackConnState(lc, http.StateNew)
	}
	return lc, fc, victims
}

// Property: at a cap only a connection waiting for a request (new or idle)
// is closed to make room, the one that has waited longest (of the same
// address at the address cap); a busy one never is, and with every
// connection busy the new one is refused. Connections from a TLS listener
// are followed through the *tls.Conn the server reports.
func TestLimitListenerEvictsLongestWaiting(t *testing.T) {
	l := LimitListener(nil, HTTPOptions{MaxConnections: 4, MaxConnectionsPerAddress: 2}).(*limitListener)
	a1, fa1, _ := admitFrom(l, "10.0.0.1")
	a2, fa2, _ := admitFrom(l, "10.0.0.1")
	// a1 becomes busy: a third connection from 10.0.0.1 closes a2.
	trackConnState(tls.Server(a1, &tls.Config{}), http.StateActive)
	a3, _, v := admitFrom(l, "10.0.0.1")
	if a3 == nil || len(v) != 1 || v[0] != a2 || !fa2.closed || fa1.closed {
		t.Fatalf("at the address cap: admitted %v, closed %v (a1 closed %v)", a3 != nil, v, fa1.closed)
	}
	// a3 busy too: the address is all busy and its next one is refused,
	// though the total has room.
	trackConnState(a3, http.StateActive)
	if c, _, v := admitFrom(l, "10.0.0.1"); c != nil || len(v) != 0 {
		t.Fatalf("a connection over the address cap with none idle: admitted %v, closed %v", c != nil, v)
	}
	// Other addresses fill the total: b1 idle before b2.
	b1, fb1, _ := admitFrom(l, "10.0.0.2")
	b2, _, _ := admitFrom(l, "10.0.0.3")
	trackConnState(b1, http.StateActive)
	trackConnState(b1, http.StateIdle)
	trackConnState(b2, http.StateActive)
	trackConnState(b2, http.StateIdle)
	trackConnState(b1, http.StateActive)
	trackConnState(b1, http.StateIdle) // b1 now idle for less time than b2
	if st := l.Stats(); st.Open != 4 || st.Waiting != 2 || st.Addresses != 3 {
		t.Fatalf("stats %+v", st)
	}
	c1, _, v := admitFrom(l, "10.0.0.4")
	if c1 == nil || len(v) != 1 || v[0] != b2 || fb1.closed {
		t.Fatalf("at the total cap: admitted %v, closed %v; want the longest idle, b2", c1 != nil, v)
	}
	// A closed connection's late ConnState changes nothing; closing twice
	// releases once.
	trackConnState(b2, http.StateIdle)
	b2.Close()
	if st := l.Stats(); st.Open != 4 || st.Evicted != 2 || st.Refused != 1 {
		t.Fatalf("stats %+v", st)
	}
	for _, c := range []*limitConn{a1, a3, b1, c1} {
		trackConnState(c, http.StateClosed)
		c.Close()
		c.Close()
	}
	if st := l.Stats(); st != (ConnStats{Evicted: 2, Refused: 1}) || len(l.addrs) != 0 || l.waiting.head != nil {
		t.Fatalf("after every close: %+v, %d address entries", st, len(l.addrs))
	}
}

// Property: the tracking of a connection costs a few hundred bytes and no
// goroutine, and nothing is left once it closes, even with every
// connection from its own address.
func TestLimitListenerTrackingBounded(t *testing.T) {
	const n = 4096
	l := LimitListener(nil, HTTPOptions{MaxConnections: n}).(*limitListener)
	remotes := make([]*fakeConn, n)
	for i := range remotes {
		remotes[i] = &fakeConn{remote: tcpAddr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String())}
	}
	conns := make([]*limitConn, 0, n)
	g := runtime.NumGoroutine()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for _, fc := range remotes {
		lc, _ := l.admit(fc)
		trackConnState(lc, http.StateNew)
		trackConnState(lc, http.StateActive)
		trackConnState(lc, http.StateIdle)
		conns = append(conns, lc)
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > 1024 {
		t.Fatalf("tracking allocated %d bytes per connection", per)
	} else {
		t.Logf("tracking allocated %d bytes per connection", per)
	}
	if runtime.NumGoroutine() > g {
		t.Fatalf("tracking started goroutines: %d → %d", g, runtime.NumGoroutine())
	}
	if st := l.Stats(); st.Open != n || st.Waiting != n || st.Addresses != n {
		t.Fatalf("stats %+v", st)
	}
	for _, c := range conns {
		c.Close()
	}
	if st := l.Stats(); st.Open != 0 || st.Waiting != 0 || len(l.addrs) != 0 {
		t.Fatalf("after closing: %+v", st)
	}
}

// BenchmarkLimitListenerConn is the bookkeeping of one connection
// (admitted at the total cap, closing the longest-idle of 4,096 from 64
// addresses; then new, active, idle, active, idle).
//
//	go test ./hostapi -run '^$' -bench LimitListenerConn
func BenchmarkLimitListenerConn(b *testing.B) {
	const n = 4096
	l := LimitListener(nil, HTTPOptions{MaxConnections: n, MaxConnectionsPerAddress: n}).(*limitListener)
	remotes := make([]*fakeConn, 64)
	for i := range remotes {
		remotes[i] = &fakeConn{remote: tcpAddr(netip.AddrFrom4([4]byte{10, 2, 0, byte(i)}).String())}
	}
	life := func(i int) *limitConn {
		c, _ := l.admit(remotes[i%len(remotes)])
		trackConnState(c, http.StateNew)
		trackConnState(c, http.StateActive)
		trackConnState(c, http.StateIdle)
		return c
	}
	for i := range n {
		life(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c := life(i)
		trackConnState(c, http.StateActive)
		trackConnState(c, http.StateIdle)
	}
	b.StopTimer()
	if st := l.Stats(); st.Open != n || st.Evicted != uint64(b.N) {
		b.Fatalf("stats %+v", st)
	}
}
