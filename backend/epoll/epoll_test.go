package epoll_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/epoll"
	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestSyscallsPerRequest pins down the design's claim: a keep-alive request
// for a cached small file costs one read and one write, and no open, stat
// or epoll_ctl (servertest.KeepAliveCounts checks what every readiness
// backend shares). It counts with the loop's own counters.
func TestSyscallsPerRequest(t *testing.T) {
	st := servertest.KeepAliveCounts(t, epoll.New(), 200)
	assert.LessOrEqual(t, st.Syscalls[core.SysEpollCtl], uint64(listenersPerLoop()+3), "registration once per connection")
}

// TestCloseRequestsNeedNoEpollCtl: with TCP_DEFER_ACCEPT (the default), a connection
// whose one request arrives with it and asks to close is answered and
// closed at accept time, without ever joining the epoll set. Without it
// (--no-defer-accept) the connection is accepted before its request and
// registered without a read; the first read waits for EPOLLIN, so a
// request still costs one read.
func TestCloseRequestsNeedNoEpollCtl(t *testing.T) {
	dir := servertest.Site(t, map[string][]byte{"index.html": make([]byte, 1500)})
	for _, deferAccept := range []bool{true, false} {
		srv := servertest.StartWith(t, epoll.New(), core.Config{Dir: dir}, 1, "127.0.0.1:0", listen.Options{DeferAccept: deferAccept})
		const n = 50
		for range n {
			c := servertest.Dial(t, srv.Addr)
			c.Do("GET", "/index.html", "Connection: close\r\n")
			c.Close()
		}
		require.NoError(t, srv.Stop())
		st := srv.Core.Stats()
		require.Equal(t, uint64(n), st.Requests)
		if deferAccept {
			// The listeners and the wake-up eventfd, and the start-up
			// probe's idle connection if it was accepted: never one per
			// request.
			assert.LessOrEqual(t, st.Syscalls[core.SysEpollCtl], uint64(listenersPerLoop()+3))
			continue
		}
		assert.LessOrEqual(t, st.Syscalls[core.SysEpollCtl], uint64(n+4), "at most one ADD per connection")
		// The probe dial adds a few.
		assert.LessOrEqual(t, st.Syscalls[core.SysRead], uint64(n+5), "reads for %d requests", n)
	}
}

// TestLevelDoesNotSpin: while a client that shut down its write side
// waits for its script's answer, the loop sleeps in epoll_wait, edge- and
// level-triggered alike: the level-triggered registration drops EPOLLIN
// while no input is wanted, since the socket stays readable (EOF).
func TestLevelDoesNotSpin(t *testing.T) {
	for _, level := range []bool{false, true} {
		t.Run(fmt.Sprint("level=", level), func(t *testing.T) {
			servertest.WaitsWhileIdle(t, &epoll.Backend{LevelTriggered: level}, core.SysEpollWait)
		})
	}
}

// listenersPerLoop is how many listeners servertest gives a loop on one
// address (deferred accept: listen.Options.PerAddress).
func listenersPerLoop() int { return listen.Options{DeferAccept: true}.PerAddress() }

// TestCork: with --epoll-cork a header and the file body behind it go
// under TCP_CORK, set before the header and cleared after the body's last
// byte: two setsockopt per response, no MSG_MORE send, and the bytes are
// the same as the default's, pipelined responses and ranges included.
func TestCork(t *testing.T) {
	body := make([]byte, 64<<10)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	dir := servertest.Site(t, map[string][]byte{"f.bin": body, "small.txt": []byte("small")})
	for _, cork := range []bool{false, true} {
		srv := servertest.Start(t, &epoll.Backend{Cork: cork}, core.Config{Dir: dir, Sendfile: core.SendfileAlways}, 1)
		c := servertest.Dial(t, srv.Addr)
		const n = 20
		for range n {
			resp, got := c.Get("/f.bin")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, body, got, "cork=%v", cork)
		}
		resp, got := c.Do("GET", "/f.bin", "Range: bytes=100-199\r\n")
		require.Equal(t, 206, resp.StatusCode)
		require.Equal(t, body[100:200], got)
		// Two requests in one segment: the second's header waits behind
		// the first's body, then goes under the cork again.
		fmt.Fprintf(c, "GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\nGET /f.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, got = c.ReadResponse("GET")
		require.Equal(t, "small", string(got))
		resp, got = c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, body, got)
		c.Close()
		require.NoError(t, srv.Stop())
		st := srv.Core.Stats()
		if !cork {
			assert.Zero(t, st.Syscalls[core.SysSetsockopt], "MSG_MORE needs no setsockopt")
			assert.GreaterOrEqual(t, st.Syscalls[core.SysSendto]+st.Syscalls[core.SysSendmsg], uint64(n+2))
			continue
		}
		assert.Equal(t, uint64(2*(n+3)), st.Syscalls[core.SysSetsockopt], "set and clear, once per response with a file body")
		assert.Zero(t, st.Syscalls[core.SysSendto]+st.Syscalls[core.SysSendmsg], "no MSG_MORE under the cork")
	}
}
