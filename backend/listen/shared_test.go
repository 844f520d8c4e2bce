package listen

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProcAddr(t *testing.T) {
	assert.Equal(t, "0100007F:1F90", procAddr(net.ParseIP("127.0.0.1"), 8080))
	assert.Equal(t, "00000000:0050", procAddr(net.IPv4zero, 80))
	assert.Equal(t, "00000000000000000000000001000000:0050", procAddr(net.ParseIP("::1"), 80))
	assert.Equal(t, "00000000000000000000000000000000:1F90", procAddr(net.IPv6zero, 8080))
}

// fdOf is l's socket, owned by l.
func fdOf(t *testing.T, l net.Listener) int {
	raw, err := l.(*net.TCPListener).SyscallConn()
	require.NoError(t, err)
	var fd int
	require.NoError(t, raw.Control(func(f uintptr) { fd = int(f) }))
	return fd
}

// TestShared: a server alone on its port does not share it; once a second
// listener (a --takeover replacement) is bound to the same address, it
// does, whichever of the two asks.
func TestShared(t *testing.T) {
	for _, tc := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(tc.network, func(t *testing.T) {
			old := reusePortListenerOn(t, tc.network, tc.addr)
			oldFD := fdOf(t, old)
			addrs := []net.Addr{old.Addr()}
			oldInodes := Inodes([][]int{{oldFD}})
			require.Len(t, oldInodes, 1)
			assert.False(t, Shared(addrs, oldInodes), "alone on its port")

			newFD := fdOf(t, reusePortListenerOn(t, tc.network, old.Addr().String()))
			assert.True(t, Shared(addrs, oldInodes), "the old server sees the new one")
			assert.True(t, Shared(addrs, Inodes([][]int{{newFD}})), "the new server sees the old one")
			assert.False(t, Shared(addrs, Inodes([][]int{{oldFD, newFD}})), "both are ours")
		})
	}
}
