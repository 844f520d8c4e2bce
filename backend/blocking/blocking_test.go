//go:build linux

package blocking

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestConnectionQueuedBeforeTheLoop: a client that connected and sent
// part of a head before the loop started (with TCP_DEFER_ACCEPT the
// connection is queued when its first bytes arrive) is timed out like any
// other, and the client after it is served. Such a connection does not
// inherit the timeouts the loop sets on its listeners; without them the
// read of the rest of its head blocked the one thread for good.
func TestConnectionQueuedBeforeTheLoop(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
	srv, err := core.NewServer(core.Config{Dir: dir, HeaderTimeout: time.Second})
	require.NoError(t, err)
	defer srv.Close()
	ls, err := listen.Open([]string{"127.0.0.1:0"}, 1, listen.Options{})
	require.NoError(t, err)
	addr := ls.Addrs[0].String()

	silent := servertest.Dial(t, addr) // queued: nobody accepts yet
	_, err = io.WriteString(silent, "GET / HTTP/1.1\r\n")
	require.NoError(t, err)
	silent.WaitSent() // the kernel queues it, with its bytes, before the loop starts

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New().Serve(ctx, srv, ls) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
	}()

	require.NoError(t, silent.SetDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(silent.R, nil)
	require.NoError(t, err, "the stalled head gets its 408, not a read that blocks for good")
	assert.Equal(t, 408, resp.StatusCode)
	silent.Close() // ends the server's linger, so the next client is served at once

	c := servertest.Dial(t, addr)
	defer c.Close() // before the deferred stop of Serve above
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(c.R, nil)
	require.NoError(t, err)
	body, err := io.ReadAll(io.LimitReader(resp.Body, 6))
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "hello\n", string(body))
}

// TestRefusesCGI: the blocking loop cannot watch a script's pipe, so Serve
// refuses a Config with CGIDir at once, says what to use instead, and
// closes the listeners it was given.
func TestRefusesCGI(t *testing.T) {
	dir := t.TempDir()
	srv, err := core.NewServer(core.Config{Dir: dir, CGIDir: dir})
	require.NoError(t, err)
	defer srv.Close()
	ls, err := listen.Open([]string{"127.0.0.1:0"}, 1, listen.Options{})
	require.NoError(t, err)
	err = New().Serve(context.Background(), srv, ls)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.ErrorContains(t, err, "use --backend=epoll or --backend=uring")
	_, err = net.DialTimeout("tcp", ls.Addrs[0].String(), time.Second)
	assert.Error(t, err, "the listener is closed")
}
