// Package servertest is what every backend test shares: it starts a real
// twinloop server in-process on a loopback ephemeral port (Start), makes
// its document root and CGI directory (Site, Scripts), and talks to it as
// a raw client (Dial, Client): exact bytes out, responses read with
// net/http's parser (Client.ReadResponse) or exactly as they came
// (ReadRaw).
package servertest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
)

// Server is a running server.
type Server struct {
	Addr     string // 127.0.0.1:port
	Core     *core.Server
	CloseErr error              // Core.Close's answer, once Stop returned
	stopMu   sync.Mutex         // held by Stop: a test's own Stop may run beside its cleanup's
	cancel   context.CancelFunc // guarded by stopMu; nil once stopped
	done     chan error
	t        testing.TB
}

// Start serves cfg with backend b on 127.0.0.1 and returns once it accepts.
// It skips the test, with the reason, when b cannot run here. The server is
// stopped when the test ends.
func Start(t testing.TB, b core.Backend, cfg core.Config, loops int) *Server {
	t.Helper()
	return StartAt(t, b, cfg, loops, "127.0.0.1:0", false)
}

// StartAt is Start on addr; with takeover, it shares the port of a server
// already there, as the server's --takeover does. The listeners defer
// accept, as the server's do unless --no-defer-accept.
func StartAt(t testing.TB, b core.Backend, cfg core.Config, loops int, addr string, takeover bool) *Server {
	t.Helper()
	// As the server does: the blocking backend gets one listener per
	// loop and address.
	return StartWith(t, b, cfg, loops, addr, listen.Options{Takeover: takeover, DeferAccept: true, OneEach: b.Name() == "blocking"})
}

// StartWith is StartAt with the listeners made as o says.
func StartWith(t testing.TB, b core.Backend, cfg core.Config, loops int, addr string, o listen.Options) *Server {
	t.Helper()
	if err := b.Probe(); err != nil {
		t.Skipf("backend %s unavailable: %v", b.Name(), err)
	}
	srv, err := core.NewServer(cfg)
	require.NoError(t, err)
	ls, err := listen.Open([]string{addr}, loops, o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{Addr: ls.Addrs[0].String(), Core: srv, cancel: cancel, done: make(chan error, 1), t: t}
	go func() { s.done <- b.Serve(ctx, srv, ls) }()
	t.Cleanup(func() { s.Stop() })
	// The sockets listen already; one dial proves a loop is running.
	WaitAccepting(t, s.Addr)
	return s
}

// WaitAccepting waits until a dial to addr succeeds: an event, whose
// bound (20 s) only says when to give up. A server that another make
// test beside it starves of CPU can take more than 5 s to start
// (TestReadinessAndDrain/uring did, in two fresh-clone runs at once).
func WaitAccepting(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		require.True(t, time.Now().Before(deadline), "the server at %s did not accept: %v", addr, err)
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop cancels the server, waits for Serve to return (at most 10 s), and
// closes Core, keeping what its Close said in CloseErr. It returns
// Serve's error; calling it again returns nil. It fails the test if a
// connection made a state transition the core does not allow
// (core.Stats.BadTransitions): a server counts them, not panics. A Stop
// called while another runs (a test's, on a goroutine, and the cleanup's
// after the test failed) waits for it.
func (s *Server) Stop() error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		s.CloseErr = s.Core.Close()
		if n := s.Core.Stats().BadTransitions; n > 0 {
			s.t.Errorf("%d illegal connection state transitions (core.Conn.to)", n)
		}
		return err
	case <-time.After(10 * time.Second):
		s.t.Errorf("server did not stop within 10s")
		return nil
	}
}

// WaitStats polls the server's counters until ok holds, and returns them;
// it fails the test after 10 s. The loops publish their counters once a
// second (core.Loop.Tick), so a test that asserts a count waits for it
// here rather than sleeping past the next publication.
func (s *Server) WaitStats(ok func(st *core.Stats) bool) core.Stats {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.Core.Stats()
		if ok(&st) {
			return st
		}
		require.True(s.t, time.Now().Before(deadline), "the counters never got there: %s", st.String())
		time.Sleep(20 * time.Millisecond)
	}
}
