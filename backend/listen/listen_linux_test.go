package listen

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// reusePortListener listens on 127.0.0.1:0 with SO_REUSEPORT, as another
// twinloop (or any server that sets it) does.
func reusePortListener(t *testing.T) net.Listener {
	return reusePortListenerOn(t, "tcp", "127.0.0.1:0")
}

// reusePortListenerOn listens on addr with SO_REUSEPORT, as a server and
// its --takeover replacement do; it skips the test where network is not
// available (no IPv6).
func reusePortListenerOn(t *testing.T, network, addr string) net.Listener {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), network, addr)
	if err != nil && network == "tcp6" {
		t.Skipf("no IPv6 here: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestOpenRefusesAPortInUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		ln   func(t *testing.T) net.Listener
	}{
		{"plain listener", func(t *testing.T) net.Listener {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { ln.Close() })
			return ln
		}},
		// Without the probe, this bind would succeed and the kernel would
		// split connections between the two servers.
		{"SO_REUSEPORT listener", reusePortListener},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln := tc.ln(t)
			ls, err := Open([]string{ln.Addr().String()}, 2, Options{})
			require.Error(t, err)
			assert.Nil(t, ls)
			assert.ErrorIs(t, err, unix.EADDRINUSE)
			assert.Contains(t, err.Error(), "listen on "+ln.Addr().String()+": bind: address already in use (another process has this port")
		})
	}
}

func TestOpenSharesItsOwnPortAcrossLoops(t *testing.T) {
	ls, err := Open([]string{"127.0.0.1:0"}, 3, Options{})
	require.NoError(t, err)
	require.Len(t, ls.FDs, 3)
	// A port freed by a stopped server is free again, TIME_WAIT or not.
	port := ls.Addrs[0].(*net.TCPAddr).Port
	c, err := net.Dial("tcp", ls.Addrs[0].String())
	require.NoError(t, err)
	c.Close()
	Close(ls)
	ls2, err := Open([]string{ls.Addrs[0].String()}, 1, Options{})
	require.NoError(t, err, "port %d", port)
	Close(ls2)
}

// TCP_DEFER_ACCEPT is set on every listener with Options.DeferAccept, and
// on none without (nginx's default); with it each loop has enough
// listeners per address to hold PendingPerLoop waiting connections.
func TestDeferAcceptOption(t *testing.T) {
	for _, on := range []bool{false, true} {
		addrs := []string{"127.0.0.1:0", "[::1]:0"}
		ls, err := Open(addrs, 2, Options{DeferAccept: on})
		if err != nil && NoIPv6(err) {
			addrs = addrs[:1]
			ls, err = Open(addrs, 2, Options{DeferAccept: on})
		}
		require.NoError(t, err)
		per := Options{DeferAccept: on}.PerAddress()
		require.Len(t, ls.Addrs, len(addrs))
		for _, fds := range ls.FDs {
			require.Len(t, fds, per*len(addrs))
			for _, fd := range fds {
				v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT)
				require.NoError(t, err)
				assert.Equal(t, on, v > 0, "TCP_DEFER_ACCEPT on fd %d is %d", fd, v)
			}
		}
		Close(ls)
	}
}

func TestDeferredSockets(t *testing.T) {
	assert.Equal(t, 4, deferredSockets(4096), "the default somaxconn")
	assert.Equal(t, 1, deferredSockets(65535), "a raised somaxconn: one listener's backlog holds them")
	assert.Equal(t, 2, deferredSockets(8192))
	assert.Equal(t, 8, deferredSockets(2048))
	assert.Equal(t, 8, deferredSockets(128), "at most maxDeferredSockets")
	assert.Equal(t, 8, deferredSockets(0))
	assert.Equal(t, 1, Options{DeferAccept: true, OneEach: true}.PerAddress(), "the blocking backend's")
	assert.Equal(t, 1, Options{}.PerAddress())
}
