package servertest

import (
	"syscall"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// WaitStalled waits, at most 10 s, until the server can send no more to
// c: bytes wait unread in c's socket and the window c last advertised is
// zero (TCP_INFO's tcpi_rcv_wnd). A test that stops reading so that the
// server's sends wait for room calls it instead of sleeping "long enough
// for the buffers to fill": from here on the server's socket takes no
// more, whatever the machine's load. The response must be larger than
// the socket buffers, or this fails the test.
func (c *Client) WaitStalled() {
	c.t.Helper()
	sc, ok := c.Conn.(syscall.Conn)
	require.True(c.t, ok, "WaitStalled: %T is not a socket", c.Conn)
	rc, err := sc.SyscallConn()
	require.NoError(c.t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var inq int
		var ti *unix.TCPInfo
		var serr error
		err := rc.Control(func(fd uintptr) {
			if inq, serr = unix.IoctlGetInt(int(fd), unix.SIOCINQ); serr == nil {
				ti, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			}
		})
		require.NoError(c.t, err)
		require.NoError(c.t, serr)
		if inq > 0 && ti.Rcv_wnd == 0 {
			return
		}
		require.True(c.t, time.Now().Before(deadline), "the server's sends to %s never stalled: %d bytes unread, window %d", c.LocalAddr(), inq, ti.Rcv_wnd)
		time.Sleep(time.Millisecond)
	}
}

// WaitSent waits, at most 10 s, until the server's kernel has
// acknowledged every byte written to c (SIOCOUTQ is zero): they wait in
// the server's socket, read or not, whether a loop runs or not.
func (c *Client) WaitSent() {
	c.t.Helper()
	sc, ok := c.Conn.(syscall.Conn)
	require.True(c.t, ok, "WaitSent: %T is not a socket", c.Conn)
	rc, err := sc.SyscallConn()
	require.NoError(c.t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var outq int
		var serr error
		require.NoError(c.t, rc.Control(func(fd uintptr) { outq, serr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }))
		require.NoError(c.t, serr)
		if outq == 0 {
			return
		}
		require.True(c.t, time.Now().Before(deadline), "%d bytes written to %s never acknowledged", outq, c.RemoteAddr())
		time.Sleep(time.Millisecond)
	}
}
