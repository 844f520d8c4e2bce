package metrics_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/internal/servertest"
	"github.com/twinloop/twinloop/metrics"
)

// serveLimited serves an empty registry within lim on a listener of its
// own, until the test ends, and returns its address.
func serveLimited(t *testing.T, lim metrics.Limits) string {
	ln, err := metrics.Listen("127.0.0.1:0", false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- metrics.Serve(ctx, ln, prometheus.NewRegistry(), &metrics.Health{}, lim) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	return ln.Addr().String()
}

// TestMetricsHeadLimit: a head longer than --max-header-bytes is answered
// 431 and closed, as on the HTTP listeners, not held while it grows.
func TestMetricsHeadLimit(t *testing.T) {
	addr := serveLimited(t, metrics.Limits{MaxHeaderBytes: 4096, HeaderTimeout: time.Minute})
	c := servertest.Dial(t, addr)
	// 64 KiB of one header line and no end: net/http reads 4 KiB beyond
	// the limit, then answers. Written aside, as the server stops reading.
	go c.Write([]byte("GET /livez HTTP/1.1\r\nHost: t\r\nX-Long: " + strings.Repeat("a", 64<<10)))
	// The answer has no length: it ends with the close, which may come as
	// a reset, net/http closing with the rest of the head unread.
	got, err := io.ReadAll(c)
	var ne net.Error
	require.False(t, errorAs(err, &ne) && ne.Timeout(), "held, not closed")
	assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 431 "), "%q", got)
	assert.Contains(t, string(got), "\r\nConnection: close\r\n")

	// A head within the limit is served.
	ok := servertest.Dial(t, addr)
	resp, body := ok.Get("/livez")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok\n", string(body))
}

// TestMetricsHeaderTimeout: a head that stops short is closed at
// --header-timeout, not before; the test waits for the close itself.
func TestMetricsHeaderTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := serveLimited(t, metrics.Limits{MaxHeaderBytes: 4096, HeaderTimeout: timeout})
	start := time.Now() // before the server's clock starts, at accept
	c := servertest.Dial(t, addr)
	_, err := c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: t\r\nX-Stalled: a"))
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, c) // until the server closes
	took := time.Since(start)
	var ne net.Error
	require.False(t, errorAs(err, &ne) && ne.Timeout(), "the client's own deadline passed first: %v", err)
	assert.Zero(t, n, "closed without an answer, as net/http does at its header timeout")
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+5*time.Second)
}

// TestMetricsConnCap: while DefaultMaxConns connections are open, another
// is closed at accept, unserved; once one of them is closed, a new one is
// served again.
func TestMetricsConnCap(t *testing.T) {
	const max = metrics.DefaultMaxConns
	addr := serveLimited(t, metrics.Limits{MaxHeaderBytes: 4096, HeaderTimeout: time.Minute})
	held := make([]*servertest.Client, max)
	for i := range held {
		held[i] = servertest.Dial(t, addr)
		// Each one served once, so that the server has accepted it and
		// it holds its slot, idle, when the next one connects.
		resp, _ := held[i].Get("/livez")
		require.Equal(t, 200, resp.StatusCode)
	}
	extra := servertest.Dial(t, addr)
	_, err := extra.Write([]byte("GET /livez HTTP/1.1\r\nHost: t\r\n\r\n"))
	if err == nil {
		n, err := io.Copy(io.Discard, extra)
		var ne net.Error
		require.False(t, errorAs(err, &ne) && ne.Timeout(), "the connection over the cap was held, not closed")
		assert.Zero(t, n, "the connection over the cap was served")
	}
	// The held ones are still served.
	resp, _ := held[0].Get("/readyz")
	assert.Equal(t, 200, resp.StatusCode)

	held[max-1].Close()
	// The server gives the slot back once it has read the close: a new
	// connection is served then. Each try waits for its answer or close.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET /livez HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")); err != nil {
			return false
		}
		got, _ := io.ReadAll(c)
		return strings.HasPrefix(string(got), "HTTP/1.1 200 ")
	}, 10*time.Second, 10*time.Millisecond, "a slot freed by a close is given to a new connection")
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}
