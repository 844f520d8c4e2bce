package main

import (
	"io"
	"net/http"
	"strings"
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
	addr := "127.0.0.1:" + freePort(t)
	cmd, _, stderr := server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--drain-delay", "1m")
	servertest.WaitAccepting(t, addr)
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	assert.Less(t, time.Since(start), 10*time.Second)
}
