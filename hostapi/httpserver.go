package hostapi

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// HTTPOptions bound what one client can hold of the HTTP edge. Zero
// fields take the defaults below.
type HTTPOptions struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included
	// (default 30 s). Streaming responses (SSE) lift it once the request
	// is read, so it never cuts a long-lived stream.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing an ordinary response (default 60 s).
	// SSE streams instead get a rolling deadline from SSEWriteTimeout.
	WriteTimeout time.Duration
	// SSEWriteTimeout is the least time every SSE write has before its
	// deadline (default 10 s). The deadline is renewed at most every
	// quarter of it (to 5/4 of it ahead), not per flush, so a client that
	// stops reading is cut within 5/4 of it (12.5 s by default), freeing
	// its goroutine.
	SSEWriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long
	// (default 60 s).
	IdleTimeout time.Duration
	// MaxHeaderBytes caps request headers (default 64 KiB).
	MaxHeaderBytes int
	// MaxConnections caps concurrently open client connections
	// (default 4096). At the cap a new connection closes the connection
	// that has waited longest for a request (idle keep-alive, or accepted
	// and not yet sending); when every connection is busy it is closed at
	// once instead.
	MaxConnections int
	// MaxConnectionsPerAddress caps the connections open from one client
	// address (an IPv4 address, or an IPv6 /64; default 512). At the cap
	// a new connection from that address closes the address's own
	// longest-waiting connection, or is closed at once when all of them
	// are busy. A value at or above MaxConnections leaves only the total
	// cap.
	MaxConnectionsPerAddress int
}

// Defaults for HTTPOptions.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultSSEWriteTimeout   = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnections    = 4096
	// DefaultMaxConnectionsPerAddress is an eighth of the total: a
	// single address (or /64) cannot hold more than that, and a host
	// behind one NAT still has room for hundreds of streams.
	DefaultMaxConnectionsPerAddress = 512
)

// WithDefaults fills unset fields.
func (o HTTPOptions) WithDefaults() HTTPOptions {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	set(&o.ReadTimeout, DefaultReadTimeout)
	set(&o.WriteTimeout, DefaultWriteTimeout)
	set(&o.SSEWriteTimeout, DefaultSSEWriteTimeout)
	set(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerAddress == 0 {
		o.MaxConnectionsPerAddress = DefaultMaxConnectionsPerAddress
	}
	return o
}

// NewHTTPServer is the one construction of the node's http.Server, used by
// serve, the test harnesses and devnet: every timeout and cap of the edge
// is set here. Serve it on LimitListener's listener so the connection
// caps apply: the server reports each connection's state to the listener
// (ConnState), which is how the listener knows which connections wait
// idle and may be closed to make room.
func NewHTTPServer(h http.Handler, o HTTPOptions) *http.Server {
	o = o.WithDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		// WriteTimeout stays 0 at the server: it would cut SSE streams.
		// Handlers set write deadlines per response (see deadlines).
		IdleTimeout:    o.IdleTimeout,
		MaxHeaderBytes: o.MaxHeaderBytes,
		ConnState:      trackConnState,
	}
}

// LimitListener caps the connections accepted from l and still open: at
// most o.MaxConnections in all and o.MaxConnectionsPerAddress from one
// client address (WithDefaults fills zeros). A connection over a cap
// makes room by closing a connection that waits for a request, the one
// that has waited longest (of its own address at the address cap);
// served by a NewHTTPServer, whose ConnState tells the listener which
// connections wait (a connection counts as waiting until the server has
// read a whole request head from it: idle, or new, or sending its headers
// slowly). A connection in the middle of a request (or a stream) is never
// closed for room: when there is none to close, the new one is accepted
// and closed at once, so the client sees a prompt reset instead of
// hanging in the backlog, and the file descriptor is released.
//
// The bookkeeping is a counter and two intrusive lists per connection and
// an entry per address with open connections, under one mutex; it starts
// no goroutines.
func LimitListener(l net.Listener, o HTTPOptions) net.Listener {
	o = o.WithDefaults()
	if o.MaxConnections < 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	per := o.MaxConnectionsPerAddress
	if per <= 0 || per > o.MaxConnections {
		per = o.MaxConnections
	}
	return &limitListener{Listener: l, max: o.MaxConnections, perAddr: per, addrs: map[netip.Addr]*addrConns{}}
}

type limitListener struct {
	net.Listener
	max, perAddr int

	mu      sync.Mutex
	open    int
	waiting connList // connections waiting for a request, longest first
	addrs   map[netip.Addr]*addrConns
	evicted uint64
	refused uint64
}

// addrConns is what one client address holds.
type addrConns struct {
	open    int
	waiting connList
}

// limitConn is a connection the listener counts. Its fields other than
// Conn, l and key are guarded by l.mu.
type limitConn struct {
	net.Conn
	l   *limitListener
	key netip.Addr // zero: not an IP connection, no per-address cap
	a   *addrConns

	released bool // no longer counted (closed, or chosen to make room)
	all, own links
}

type links struct {
	prev, next *limitConn
	in         bool
}

// connList is an intrusive doubly linked list of connections; which links
// of a connection it uses is fixed per list (own for an address, all for
// the listener).
type connList struct {
	head, tail *limitConn
	n          int
	own        bool
}

func (q *connList) links(c *limitConn) *links {
	if q.own {
		return &c.own
	}
	return &c.all
}

func (q *connList) pushBack(c *limitConn) {
	k := q.links(c)
	if k.in {
		q.remove(c)
	}
	k.in, k.prev, k.next = true, q.tail, nil
	if q.tail != nil {
		q.links(q.tail).next = c
	} else {
		q.head = c
	}
	q.tail = c
	q.n++
}

func (q *connList) remove(c *limitConn) {
	k := q.links(c)
	if !k.in {
		return
	}
	if k.prev != nil {
		q.links(k.prev).next = k.next
	} else {
		q.head = k.next
	}
	if k.next != nil {
		q.links(k.next).prev = k.prev
	} else {
		q.tail = k.prev
	}
	*k = links{}
	q.n--
}

// addrKey is the client address a connection counts against: the IPv4
// address, or the /64 of an IPv6 address (one subscriber's usual
// allocation, so that one host cannot take a fresh address per
// connection); the zero Addr for a connection that is not over IP.
func addrKey(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Addr{}
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, victims := l.admit(c)
		for _, v := range victims {
			v.Conn.Close()
		}
		if lc != nil {
			return lc, nil
		}
		c.Close()
	}
}

// admit counts c in, choosing the connections to close to make room (at
// most one per cap), or returns nil when c must be refused.
func (l *limitListener) admit(c net.Conn) (*limitConn, []*limitConn) {
	key := addrKey(c.RemoteAddr())
	l.mu.Lock()
	defer l.mu.Unlock()
	var victims []*limitConn
	a := l.addrs[key]
	if key.IsValid() && a != nil && a.open >= l.perAddr {
		v := a.waiting.head
		if v == nil {
			l.refused++
			return nil, nil
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	if l.open >= l.max {
		v := l.waiting.head
		if v == nil {
			l.refused++
			return nil, victims
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	l.evicted += uint64(len(victims))
	if key.IsValid() {
		if a = l.addrs[key]; a == nil {
			a = &addrConns{waiting: connList{own: true}}
			l.addrs[key] = a
		}
		a.open++
	}
	l.open++
	return &limitConn{Conn: c, l: l, key: key, a: a}, victims
}

// releaseLocked stops counting c: it leaves the lists, and its address's
// entry goes when it was the last.
func (l *limitListener) releaseLocked(c *limitConn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	l.waiting.remove(c)
	if a := c.a; a != nil {
		a.waiting.remove(c)
		if a.open--; a.open == 0 {
			delete(l.addrs, c.key)
		}
	}
}

// setState follows the server's view of c: a connection waits for a
// request when new or idle, and is busy when active or hijacked.
func (l *limitListener) setState(c *limitConn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	switch s {
	case http.StateNew, http.StateIdle:
		l.waiting.pushBack(c)
		if c.a != nil {
			c.a.waiting.pushBack(c)
		}
	case http.StateActive, http.StateHijacked:
		l.waiting.remove(c)
		if c.a != nil {
			c.a.waiting.remove(c)
		}
	}
}

// trackConnState is NewHTTPServer's ConnState: it tells the LimitListener
// a connection came from what state the server has it in. Connections
// from another listener are left alone.
func trackConnState(c net.Conn, s http.ConnState) {
	for range 4 { // a few wrappers at most
		switch x := c.(type) {
		case *limitConn:
			x.l.setState(x, s)
			return
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = x.NetConn()
		default:
			return
		}
	}
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

// ConnStats is what a LimitListener holds and has done.
type ConnStats struct {
	Open      int    // connections counted now
	Addresses int    // client addresses (IPv6: /64s) with open connections
	Waiting   int    // of Open, those waiting for a request
	Evicted   uint64 // waiting connections closed to make room
	Refused   uint64 // connections closed at accept: every one was busy
}

// Stats reports the listener's counts.
func (l *limitListener) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ConnStats{Open: l.open, Addresses: len(l.addrs), Waiting: l.waiting.n, Evicted: l.evicted, Refused: l.refused}
}

// OpenConnections reports the connections a LimitListener holds (-1 for
// another listener).
func OpenConnections(l net.Listener) int {
	if ll, ok := l.(*limitListener); ok {
		return ll.Stats().Open
	}
	return -1
}

// ListenerStats reports a LimitListener's counts (false for another
// listener).
func ListenerStats(l net.Listener) (ConnStats, bool) {
	if ll, ok := l.(*limitListener); ok {
		return ll.Stats(), true
	}
	return ConnStats{}, false
}
