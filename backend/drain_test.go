package backend_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// drainRun is what a client of a drain test saw.
type drainRun struct {
	before, after int // whole responses to requests sent before the drain started, and after
	keptAfter     int // of those after, the ones that did not say Connection: close
	reusedBefore  int // responses before the drain on a reused connection: the pool is a pool
	lost          []string
}

// loopClient sends GET /index.html in a loop on a Pooled client until
// the listeners refuse it, or until stop, counting what it saw; retired
// says whether the drain started before a request was sent.
func loopClient(addr string, retired *atomic.Bool, stop <-chan struct{}, run *drainRun, mu *sync.Mutex, afterN *atomic.Int64) {
	p := servertest.NewPooled(addr)
	defer p.Close()
	for range 5000 { // a bound, far above what a run sends
		select {
		case <-stop:
			return
		default:
		}
		after := retired.Load()
		o := p.Get("/index.html")
		mu.Lock()
		switch {
		case o.Refused != nil:
			mu.Unlock()
			return // the listeners are closed: nothing was sent
		case o.Lost != nil:
			run.lost = append(run.lost, o.Lost.Error())
		case after:
			run.after++
			afterN.Add(1)
			if !o.Close {
				run.keptAfter++
			}
		default:
			run.before++
			if o.Reused {
				run.reusedBefore++
			}
		}
		mu.Unlock()
	}
}

// idleClients are n pooled clients whose connections were kept alive
// after one request each, and are idle.
func idleClients(t *testing.T, addr string, n int) []*servertest.Pooled {
	var idle []*servertest.Pooled
	for range n {
		p := servertest.NewPooled(addr)
		t.Cleanup(p.Close)
		o := p.Get("/index.html")
		require.NoError(t, o.Lost)
		require.Equal(t, 200, o.Status)
		require.False(t, o.Close)
		idle = append(idle, p)
	}
	return idle
}

// stopFinishesHalfDone stops srv with a body half sent and (but on the
// blocking backend) a head half received, and checks that both are
// finished.
func stopFinishesHalfDone(t *testing.T, s *site, srv *servertest.Server, blocking bool) {
	// The end of the delay: a body half sent and a head half
	// received are finished. (Not the head on the blocking backend:
	// its loop may be the one sending the body, and a connection it
	// has not accepted is reset when it closes its listeners.)
	big := servertest.Dial(t, srv.Addr)
	fmt.Fprintf(big, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	bigHead, err := http.ReadResponse(big.R, nil)
	require.NoError(t, err)
	require.Equal(t, 200, bigHead.StatusCode)
	var half *servertest.Client
	if !blocking {
		half = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(half, "GET /index.html HTTP/1.1\r\nHo")
	}
	stopErr := make(chan error, 1)
	go func() { stopErr <- srv.Stop() }()
	if half != nil {
		fmt.Fprintf(half, "st: t\r\n\r\n")
		resp, body := half.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
		assert.True(t, resp.Close, "Connection: close")
		assert.True(t, half.Closed())
	}
	got, err := servertest.ReadBody(bigHead)
	require.NoError(t, err)
	assert.Equal(t, len(s.big), len(got), "the 10 MiB body whole")
	assert.True(t, bytes.Equal(s.big, got))
	require.NoError(t, <-stopErr)
}

// TestDrainLosesNothing (issue 38, item 5), on every backend, as the
// server's --drain-delay does it: keep-alive clients send requests in a
// loop, as a balancer's pool does; the drain starts (Server.Retire):
// every response to a request sent after it says Connection: close, and
// the clients move to new connections, which the listeners accept; an
// idle pooled connection is closed while they still do, and its client
// is served on a new one. The balancer stops sending (it saw /readyz
// say 503); then the shutdown, the end of the delay, with a request
// half received and a 10 MiB response half sent: both are finished, not
// cut. No request is lost anywhere: each got a whole response, or its
// client saw the close before it sent it.
func TestDrainLosesNothing(t *testing.T) {
	eachBackendTimed(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		const clients = 6
		// The blocking backend serves one connection at a time per
		// loop: an idle client would hold a loop from the others.
		blocking := strings.HasSuffix(t.Name(), "/blocking")
		var idle []*servertest.Pooled
		if !blocking {
			idle = idleClients(t, srv.Addr, 2)
		}

		var retired atomic.Bool
		var afterN atomic.Int64
		var mu sync.Mutex
		runs := make([]drainRun, clients)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				loopClient(srv.Addr, &retired, stop, &runs[i], &mu, &afterN)
			}()
		}
		stopped := false
		stopClients := func() {
			if !stopped {
				stopped = true
				close(stop)
				wg.Wait()
			}
		}
		defer stopClients()
		served := func() (before, reused int) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs {
				before += r.before
				reused += r.reusedBefore
			}
			return
		}
		require.Eventually(t, func() bool { b, r := served(); return b >= 10*clients && r >= 5*clients }, 10*time.Second, time.Millisecond,
			"the clients keep their connections alive before the drain")

		srv.Core.Retire()
		retired.Store(true)
		retiredAt := time.Now()
		// The idle connections are closed under their clients while the
		// listeners accept: the clients see it before they send, and are
		// served on new connections.
		for _, p := range idle {
			require.True(t, p.WaitClosed(5*time.Second), "an idle keep-alive connection is closed during the drain")
			o := p.Get("/index.html")
			require.NoError(t, o.Lost)
			assert.False(t, o.Reused)
			assert.Equal(t, 200, o.Status)
			assert.True(t, o.Close)
		}
		idleClosed := time.Since(retiredAt)
		require.Eventually(t, func() bool { return afterN.Load() >= 20*clients }, 10*time.Second, time.Millisecond,
			"the clients are served during the drain")
		stopClients() // the balancer sends no more: each client's last request was answered or lost

		stopFinishesHalfDone(t, s, srv, blocking)

		var total drainRun
		for _, r := range runs {
			total.before += r.before
			total.after += r.after
			total.keptAfter += r.keptAfter
			total.lost = append(total.lost, r.lost...)
		}
		t.Logf("%d responses before the drain, %d after; idle connections closed %v into it", total.before, total.after, idleClosed.Round(time.Millisecond))
		assert.Empty(t, total.lost, "requests lost")
		assert.Zero(t, total.keptAfter, "responses during the drain that did not say Connection: close")
		assert.GreaterOrEqual(t, total.after, 20*clients)
	})
}
