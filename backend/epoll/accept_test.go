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

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestAcceptGoesOnAfterAnError: accept4 failing for one connection
// (EPROTO; EPERM from a firewall) does not leave the connections queued
// behind it waiting for the next arrival, which an edge-triggered listener
// needs before it reports again; and a storm of such errors is logged
// about once a second, not once each.
func TestAcceptGoesOnAfterAnError(t *testing.T) {
	var mu sync.Mutex
	fails := 0
	var log bytes.Buffer
	accept4, logOut = func(fd int) (int, unix.Errno) {
		mu.Lock()
		defer mu.Unlock()
		if fails < 500 {
			fails++
			if fails%2 == 0 {
				return -1, unix.EPERM
			}
			return -1, unix.EPROTO
		}
		return rawAccept(fd)
	}, &log
	defer func() { accept4, logOut = rawAccept, os.Stderr }()

	dir := servertest.Site(t, map[string]string{"index.html": "hi"})
	srv := servertest.Start(t, New(), core.Config{Dir: dir}, 1)
	c := servertest.Dial(t, srv.Addr)
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
	resp, err := http.ReadResponse(c.R, nil)
	require.NoError(t, err, "the queued connection was not accepted")
	assert.Equal(t, 200, resp.StatusCode)
	require.NoError(t, srv.Stop())
	lines := strings.Count(log.String(), "\n")
	assert.GreaterOrEqual(t, lines, 1, log.String())
	assert.LessOrEqual(t, lines, 2, "one line a second: %s", log.String())
	assert.Contains(t, log.String(), "accept4")
}
