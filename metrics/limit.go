package metrics

import (
	"net"
	"sync"
	"time"
)

// Limits bound what one client may hold of the metrics listener, as
// core.Limits and the timeouts bound it on the HTTP listeners: without
// them net/http keeps up to a MiB of head per connection for as long as
// its client trickles, and takes every connection offered.
type Limits struct {
	MaxHeaderBytes int           // --max-header-bytes: a longer head is answered 431
	HeaderTimeout  time.Duration // --header-timeout: a head not whole by then is closed
	MaxConns       int           // connections open at once; more are closed at accept (0: DefaultMaxConns)
}

// DefaultMaxConns is the metrics listener's connection cap: a Prometheus
// server or two, health probes and an operator's curl need a handful.
const DefaultMaxConns = 64

// capListener closes a connection at accept while max are open, as the
// loops do at --max-conns. It refuses rather than leaving the connection
// in the backlog (netutil.LimitListener's way): a refused client learns
// at once, and the kernel frees what the connection had queued.
type capListener struct {
	net.Listener
	slots chan struct{} // a token per open connection
}

func limitListener(ln net.Listener, max int) net.Listener {
	return &capListener{Listener: ln, slots: make(chan struct{}, max)}
}

// Accept returns the next connection for which a slot is free; the slot
// is given back when the connection is closed.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &capConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

// capConn gives its slot back on its first Close.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
