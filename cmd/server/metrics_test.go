package main

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/internal/servertest"
)

// TestMetricsListenerLimits: the binary's --metrics listener holds heads
// to --max-header-bytes (431) and --header-timeout (closed), as its HTTP
// listeners do (metrics.Limits; the cap is metrics' own test).
func TestMetricsListenerLimits(t *testing.T) {
	const timeout = time.Second
	dir := t.TempDir()
	addr, maddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	_, _, stderr := server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--metrics", maddr,
		"--max-header-bytes", "4096", "--max-request-line", "4096", "--header-timeout", timeout.String())
	servertest.WaitAccepting(t, addr)
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)

	long := servertest.Dial(t, maddr)
	go fmt.Fprintf(long, "GET /metrics HTTP/1.1\r\nHost: t\r\nX-Long: %s", strings.Repeat("a", 64<<10))
	got, err := io.ReadAll(long) // to the close, which may come as a reset
	var ne net.Error
	if ok := errorAsNet(err, &ne); ok {
		require.False(t, ne.Timeout(), "held, not answered")
	}
	assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 431 "), "%q", got)

	start := time.Now()
	stalled := servertest.Dial(t, maddr)
	_, err = fmt.Fprintf(stalled, "GET /metrics HTTP/1.1\r\nHost: t\r\nX-Stalled: a")
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, stalled) // to the close
	took := time.Since(start)
	if ok := errorAsNet(err, &ne); ok {
		require.False(t, ne.Timeout(), "held past the test's deadline")
	}
	assert.Zero(t, n)
	assert.GreaterOrEqual(t, took, timeout, "not before --header-timeout")
	assert.Less(t, took, timeout+5*time.Second, "at --header-timeout")
}

func errorAsNet(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}
