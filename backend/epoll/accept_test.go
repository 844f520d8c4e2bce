package epoll

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestAcceptGoesOnAfterAnError: accept4 failing for one connection
// (EPROTO; EPERM from a firewall) does not leave the connections queued
// behind it waiting for the next arrival, which an edge-triggered listener
// needs before it reports again; and a storm of such errors is logged
// about once a second, not once each.
func TestAcceptGoesOnAfterAnError(t *testing.T) {
	log := failAccepts(t, 500, func(i int) unix.Errno {
		if i%2 == 0 {
			return unix.EPERM
		}
		return unix.EPROTO
	})
	dir := servertest.Site(t, map[string]string{"index.html": "hi"})
	srv := servertest.Start(t, New(), core.Config{Dir: dir}, 1)
	getIndex(t, srv.Addr, 3*time.Second, "the queued connection was not accepted")
	require.NoError(t, srv.Stop())
	lines := strings.Count(log.String(), "\n")
	assert.GreaterOrEqual(t, lines, 1, log.String())
	assert.LessOrEqual(t, lines, 2, "one line a second: %s", log.String())
	assert.Contains(t, log.String(), "accept4")
}

// TestAcceptPausesWhenOutOfFds: EMFILE turns accepting off for 500 ms,
// logged once a spell; the connection left in the backlog is accepted
// when the listener is re-armed. One listener, so that the failures come
// one a spell: with several, one pass may meet a failure on each.
func TestAcceptPausesWhenOutOfFds(t *testing.T) {
	log := failAccepts(t, 2, func(int) unix.Errno { return unix.EMFILE })
	dir := servertest.Site(t, map[string]string{"index.html": "hi"})
	one := listen.Options{DeferAccept: true, OneEach: true}
	srv := servertest.StartWith(t, New(), core.Config{Dir: dir}, 1, "127.0.0.1:0", one)
	start := time.Now()
	getIndex(t, srv.Addr, 5*time.Second, "the connection left in the backlog was not accepted after the pauses")
	// Two pauses, the first begun about when Start returned (its probe's
	// connection met it).
	assert.Greater(t, time.Since(start), 750*time.Millisecond)
	require.NoError(t, srv.Stop())
	assert.Equal(t, 2, strings.Count(log.String(), "not accepting for 500ms (raise the fd limit"),
		"one line a spell: %s", log.String())
}

// failAccepts makes the loops' first n accept4 calls fail with errno(i),
// i counting from 1, and their log lines go to the buffer it returns,
// until the test ends.
func failAccepts(t *testing.T, n int, errno func(i int) unix.Errno) *bytes.Buffer {
	var mu sync.Mutex
	fails := 0
	var log bytes.Buffer
	accept4, logOut = func(fd int) (int, unix.Errno) {
		mu.Lock()
		defer mu.Unlock()
		if fails < n {
			fails++
			return -1, errno(fails)
		}
		return rawAccept(fd)
	}, &log
	t.Cleanup(func() { accept4, logOut = rawAccept, os.Stderr })
	return &log
}

// getIndex asks a new connection for / and requires a 200 within d.
func getIndex(t *testing.T, addr string, d time.Duration, msg string) {
	t.Helper()
	c := servertest.Dial(t, addr)
	c.SetDeadline(time.Now().Add(d))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
	resp, err := http.ReadResponse(c.R, nil)
	require.NoError(t, err, msg)
	assert.Equal(t, 200, resp.StatusCode)
}
