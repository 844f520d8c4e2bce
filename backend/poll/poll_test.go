package poll_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/poll"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestSyscallsPerRequest: a keep-alive request for a cached small file
// costs one read and one write, as on epoll (servertest.KeepAliveCounts),
// and at most two ppoll (the pass's first, which finds nothing ready, and
// the one that sleeps), and no epoll call. It counts with the loop's own
// counters.
func TestSyscallsPerRequest(t *testing.T) {
	const n = 200
	st := servertest.KeepAliveCounts(t, poll.New(), n)
	assert.LessOrEqual(t, st.Syscalls[core.SysPoll], uint64(2*n+10), "two ppoll per request at most")
	assert.Zero(t, st.Syscalls[core.SysEpollWait]+st.Syscalls[core.SysEpollCtl])
}

// TestDoesNotSpin: while a client that shut down its write side waits for
// its script's answer, the loop sleeps in ppoll: level-triggered, a
// socket at EOF is readable on every pass, so POLLIN is asked for only
// while input is wanted (watch).
func TestDoesNotSpin(t *testing.T) {
	servertest.WaitsWhileIdle(t, poll.New(), core.SysPoll)
}

// TestClosesKeepTheArrayInStep: connections closed in the middle of the
// pollfd array (the last one moves into a closed one's place), by the
// client's FIN or its reset, leave every other connection served, and
// the loop's counts whole.
func TestClosesKeepTheArrayInStep(t *testing.T) {
	dir := servertest.Site(t, map[string][]byte{"index.html": []byte("hi")})
	srv := servertest.Start(t, poll.New(), core.Config{Dir: dir}, 1)
	const n = 60
	cs := make([]*servertest.Client, n)
	for i := range cs {
		cs[i] = servertest.Dial(t, srv.Addr)
		_, got := cs[i].Get("/index.html")
		require.Equal(t, "hi", string(got))
	}
	for round := range 3 {
		for i, c := range cs {
			switch {
			case c == nil:
			case i%3 == round%3 && i%2 == 0:
				require.NoError(t, c.Conn.(*net.TCPConn).SetLinger(0))
				c.Close() // a reset: POLLERR
				cs[i] = nil
			case i%3 == round%3:
				c.Close() // a FIN: EOF
				cs[i] = nil
			}
		}
		// Every one left answers, in the reverse order of their slots.
		for i := n - 1; i >= 0; i-- {
			if cs[i] != nil {
				_, got := cs[i].Get("/index.html")
				require.Equal(t, "hi", string(got), "round %d, connection %d", round, i)
			}
		}
		// New ones take the freed places.
		for i := range cs {
			if cs[i] == nil && i%5 == round {
				cs[i] = servertest.Dial(t, srv.Addr)
			}
		}
	}
	for _, c := range cs {
		if c != nil {
			_, got := c.Get("/index.html")
			require.Equal(t, "hi", string(got))
			c.Close()
		}
	}
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.Equal(t, st.Accepts, st.Closes, "every connection closed")
}
