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
			ls, err := Open([]string{ln.Addr().String()}, 2, false)
			require.Error(t, err)
			assert.Nil(t, ls)
			assert.ErrorIs(t, err, unix.EADDRINUSE)
			assert.Contains(t, err.Error(), "listen on "+ln.Addr().String()+": bind: address already in use (another process has this port")
		})
	}
}

func TestOpenSharesItsOwnPortAcrossLoops(t *testing.T) {
	ls, err := Open([]string{"127.0.0.1:0"}, 3, false)
	require.NoError(t, err)
	require.Len(t, ls.FDs, 3)
	// A port freed by a stopped server is free again, TIME_WAIT or not.
	port := ls.Addrs[0].(*net.TCPAddr).Port
	c, err := net.Dial("tcp", ls.Addrs[0].String())
	require.NoError(t, err)
	c.Close()
	Close(ls)
	ls2, err := Open([]string{ls.Addrs[0].String()}, 1, false)
	require.NoError(t, err, "port %d", port)
	Close(ls2)
}
