package hostapi

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTPOptions bound what one client can hold of the HTTP edge (issue 11,
// row 4). Zero fields take the defaults below.
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
	// (default 4096); a connection beyond it is closed at once.
	MaxConnections int
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
	return o
}

// NewHTTPServer is the one construction of the node's http.Server, used by
// serve, the test harnesses and devnet: every timeout and cap of the edge
// is set here. Serve it on Listen's listener (or LimitListener) so the
// connection cap applies.
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
	}
}

// LimitListener caps the connections accepted from l and still open at
// max: one beyond it is accepted and closed at once, so the client sees a
// prompt reset instead of hanging in the backlog, and the file descriptor
// is released.
func LimitListener(l net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultMaxConnections
	}
	return &limitListener{Listener: l, slots: make(chan struct{}, max)}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Open returns the number of connections currently held.
func (l *limitListener) Open() int { return len(l.slots) }

// OpenConnections reports the connections a LimitListener holds (-1 for
// another listener).
func OpenConnections(l net.Listener) int {
	if ll, ok := l.(*limitListener); ok {
		return ll.Open()
	}
	return -1
}
