package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/internal/servertest"
)

// get is one GET on a connection of its own: its status, or 0 when it
// could not be made.
func get(url string) int {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestReadinessAndDrain: /livez and /readyz answer 200 while the binary
// serves; from SIGTERM on /readyz answers 503 while the listeners go on
// accepting and serving for --drain-delay, /livez still 200; then the
// usual shutdown, exit 0. Without --drain-delay, SIGTERM stops accepting
// at once, as before.
func TestReadinessAndDrain(t *testing.T) {
	for _, be := range []string{"epoll", "uring", "poll", "blocking"} {
		t.Run(be, func(t *testing.T) {
			if be == "uring" {
				if err := uring.New().Probe(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
			addr, maddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
			cmd, _, stderr := server(t, "--backend="+be, "--listen", addr, "-d", dir, "--loops", "1", "--metrics", maddr, "--drain-delay", "2s")
			servertest.WaitAccepting(t, addr)
			require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)
			assert.Equal(t, 200, get("http://"+maddr+"/livez"))
			assert.Equal(t, 200, get("http://"+maddr+"/readyz"))

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			termAt := time.Now()
			require.Eventually(t, func() bool { return get("http://"+maddr+"/readyz") == 503 }, time.Second, 10*time.Millisecond,
				"/readyz says 503 as soon as SIGTERM came")
			assert.Equal(t, 200, get("http://"+maddr+"/livez"), "alive while it drains")
			// New connections are still accepted and served meanwhile.
			for time.Since(termAt) < 1500*time.Millisecond {
				require.Equal(t, 200, get("http://"+addr+"/index.html"), "served %v after SIGTERM", time.Since(termAt))
				time.Sleep(100 * time.Millisecond)
			}
			require.NoError(t, cmd.Wait())
			assert.GreaterOrEqual(t, time.Since(termAt), 2*time.Second, "listeners open for --drain-delay")
			assert.Equal(t, 0, get("http://"+addr+"/index.html"), "stopped")
			assert.Contains(t, stderr.String(), "server: stopped;")
		})
	}
}

// TestDrainDelaySecondSignal: a second SIGTERM ends the delay at once.
func TestDrainDelaySecondSignal(t *testing.T) {
	dir := t.TempDir()
	addr, maddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	cmd, _, stderr := server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--metrics", maddr, "--drain-delay", "1m")
	servertest.WaitAccepting(t, addr)
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	// The first signal has started the delay once /readyz says so.
	require.Eventually(t, func() bool { return get("http://"+maddr+"/readyz") == 503 }, 5*time.Second, 10*time.Millisecond,
		"/readyz says 503 once SIGTERM came")
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestDrainSaysClose runs the binary on every backend with
// --drain-delay=3s: keep-alive clients send requests in a loop; SIGTERM;
// once /readyz says 503, every response says Connection: close, the
// clients move to new connections and an idle pooled connection is
// closed while the listeners still accept (its client is served on a new
// one). The clients stop as a balancer does, and the server exits 0
// after the delay. No request is lost.
func TestDrainSaysClose(t *testing.T) {
	eachServerBackend(t, func(t *testing.T, be string) {
		dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
		addr, maddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
		cmd, _, stderr := server(t, "--backend="+be, "--listen", addr, "-d", dir, "--loops", "2", "--metrics", maddr, "--drain-delay", "3s")
		servertest.WaitAccepting(t, addr)
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)

		var idle *servertest.Pooled
		if be != "blocking" { // one connection at a time: an idle one would hold a loop
			idle = servertest.NewPooled(addr)
			defer idle.Close()
			o := idle.Get("/index.html")
			require.NoError(t, o.Lost)
			require.False(t, o.Close)
		}
		const clients = 6
		var retired atomic.Bool
		var before, after, kept atomic.Int64
		var mu sync.Mutex
		var lost []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := servertest.NewPooled(addr)
				defer p.Close()
				for range 5000 {
					select {
					case <-stop:
						return
					default:
					}
					late := retired.Load()
					o := p.Get("/index.html")
					switch {
					case o.Refused != nil:
						return
					case o.Lost != nil:
						mu.Lock()
						lost = append(lost, o.Lost.Error())
						mu.Unlock()
					case late:
						after.Add(1)
						if !o.Close {
							kept.Add(1)
						}
					default:
						before.Add(1)
					}
				}
			}()
		}
		stopOnce := sync.OnceFunc(func() { close(stop); wg.Wait() })
		defer stopOnce()
		require.Eventually(t, func() bool { return before.Load() >= 10*clients }, 10*time.Second, time.Millisecond)

		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		termAt := time.Now()
		require.Eventually(t, func() bool { return get("http://"+maddr+"/readyz") == 503 }, 2*time.Second, time.Millisecond)
		retired.Store(true)
		if idle != nil {
			require.True(t, idle.WaitClosed(5*time.Second), "the idle pooled connection is closed during the drain")
			o := idle.Get("/index.html")
			require.NoError(t, o.Lost)
			assert.Equal(t, 200, o.Status, "served on a new connection")
			assert.True(t, o.Close)
			assert.Less(t, time.Since(termAt), 3*time.Second, "while the listeners accept")
		}
		require.Eventually(t, func() bool { return after.Load() >= 20*clients }, 3*time.Second, time.Millisecond)
		stopOnce()
		require.NoError(t, cmd.Wait())
		assert.GreaterOrEqual(t, time.Since(termAt), 3*time.Second, "listeners open for --drain-delay")
		t.Logf("%d responses before /readyz said 503, %d after", before.Load(), after.Load())
		assert.Empty(t, lost, "requests lost")
		assert.Zero(t, kept.Load(), "responses during the drain without Connection: close")
	})
}

// TestDrainIssueRun is issue 38's run on every backend: 20 keep-alive
// clients each sending a request every 20 ms, SIGTERM with
// --drain-delay=3s, the clients going on through the end of the delay
// until the listeners refuse them. Before the fix, the connections the
// clients pooled were closed under them at 3 s: 20 of 20 lost a
// request. Now none is lost on a connection the clients reused, nor
// before the listeners close. At the instant they close, a client whose
// connect the kernel completed as the last accept ran can still be
// reset, its request sent: TCP's own race at a listener's close, which a
// balancer does not meet (it stopped opening connections when /readyz
// said 503); those are logged, and must fall at that instant. The 20 ms
// is the clients' pace, the workload, not a wait for the server.
func TestDrainIssueRun(t *testing.T) {
	eachServerBackend(t, func(t *testing.T, be string) {
		dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
		addr := "127.0.0.1:" + freePort(t)
		cmd, _, stderr := server(t, "--backend="+be, "--listen", addr, "-d", dir, "--loops", "2", "--drain-delay", "3s")
		servertest.WaitAccepting(t, addr)
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)
		type loss struct {
			at     time.Time
			reused bool
			err    string
		}
		var served, refused atomic.Int64
		var mu sync.Mutex
		var lost []loss
		var firstRefused time.Time
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := servertest.NewPooled(addr)
				defer p.Close()
				for range 1000 { // 20 s at the pace: a bound
					o := p.Get("/index.html")
					switch {
					case o.Refused != nil:
						refused.Add(1)
						mu.Lock()
						if firstRefused.IsZero() {
							firstRefused = time.Now()
						}
						mu.Unlock()
						return
					case o.Lost != nil:
						mu.Lock()
						lost = append(lost, loss{at: time.Now(), reused: o.Reused, err: o.Lost.Error()})
						mu.Unlock()
					default:
						served.Add(1)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
		require.Eventually(t, func() bool { return served.Load() >= 100 }, 10*time.Second, time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		end := time.Now().Add(3 * time.Second) // the delay cannot end before
		wg.Wait()
		require.NoError(t, cmd.Wait())
		t.Logf("%d responses, %d clients refused at the end, %d reset as the listeners closed", served.Load(), refused.Load(), len(lost))
		assert.Equal(t, int64(20), refused.Load(), "every client ran until the listeners closed")
		for _, l := range lost {
			assert.False(t, l.reused, "lost on a reused connection: %s", l.err)
			assert.True(t, l.at.After(end), "lost during the delay: %s", l.err)
			assert.True(t, l.at.Before(firstRefused.Add(time.Second)), "lost after the listeners closed: %s", l.err)
		}
	})
}
