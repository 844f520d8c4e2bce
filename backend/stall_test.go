package backend_test

// Clients that do not read, or read slowly, must hold nothing that other
// connections need (issue 9): no shared pipe or buffer, no kernel worker
// thread, and the write timeout measures progress.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
	"github.com/twinloop/twinloop/internal/slowclient"
)

// dialSmallRcvbuf connects with a 4 KiB receive buffer, so that a client
// that does not read stalls the server's sends early.
func dialSmallRcvbuf(t *testing.T, addr string) *servertest.Client {
	t.Helper()
	c, err := slowclient.Dial(addr)
	require.NoError(t, err)
	return servertest.NewClient(t, c)
}

// stallClients opens n connections that each ask for path and then read
// nothing, and waits until the server has filled their sockets.
func stallClients(t *testing.T, addr, path string, n int) {
	t.Helper()
	cs := make([]*servertest.Client, n)
	for i := range cs {
		cs[i] = dialSmallRcvbuf(t, addr)
		_, err := fmt.Fprintf(cs[i], "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path)
		require.NoError(t, err)
	}
	for _, c := range cs {
		c.WaitStalled()
	}
}

// ioUringWorkers counts this process's io_uring worker threads (the
// server runs in the test process).
func ioUringWorkers(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
		if err == nil && strings.HasPrefix(string(b), "iou-wrk") {
			n++
		}
	}
	return n
}

// download asks for path on a fresh connection and checks the body; it
// fails when the whole of it takes longer than limit, which only a server
// that makes the client wait for others (until their write timeout) does.
func download(t *testing.T, addr, path string, want []byte, limit time.Duration) {
	t.Helper()
	c := servertest.Dial(t, addr)
	start := time.Now()
	c.SetDeadline(start.Add(limit))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path)
	resp, err := http.ReadResponse(c.R, nil)
	require.NoError(t, err, "%s: no response within %v", path, limit)
	body, err := servertest.ReadBody(resp)
	require.NoError(t, err, "%s: %d of %d bytes within %v", path, len(body), len(want), limit)
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, bytes.Equal(want, body), "%s: body differs", path)
	t.Logf("%s: %d bytes in %v", path, len(body), time.Since(start).Round(time.Millisecond))
}

// TestNonReadersHoldNothing: with many clients on one loop that asked for
// a large file and read nothing, a fresh client's downloads of a 100 KiB
// and a 10 MiB file finish at once, and the io_uring worker threads stay
// within their bound (a splice must not wait for a client on one). The
// write timeout is the default minute: a server that makes the fresh
// client wait for the stalled ones fails the 5 s limit.
func TestNonReadersHoldNothing(t *testing.T) {
	eachBackendLoops(t, core.Config{}, 1, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "a client that does not read holds the only connection it serves until the write timeout")
		stallClients(t, srv.Addr, "/big.bin", 100)
		assert.LessOrEqual(t, ioUringWorkers(t), 16, "io_uring worker threads with 100 stalled clients")
		download(t, srv.Addr, "/mid.bin", s.mid, 5*time.Second)
		download(t, srv.Addr, "/big.bin", s.big, 5*time.Second)
		assert.LessOrEqual(t, ioUringWorkers(t), 16, "io_uring worker threads after the downloads")
	})
}

// TestNoReaderAfterLastByte: clients that ask for a part of a file with
// Connection: close, through a 4 KiB receive buffer, and read nothing are
// all closed within the write and linger timeouts, whatever the part's
// size: for some of them the whole part fits in the socket, which stays
// full once the last byte is in. io_uring used to wait for POLLOUT after
// the last sendfile, and such a connection, with nothing left to send and
// so no timeout running, stayed open until the server stopped.
func TestNoReaderAfterLastByte(t *testing.T) {
	cfg := core.Config{WriteTimeout: time.Second, LingerTimeout: 200 * time.Millisecond}
	eachBackend(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "a client that does not read holds the only connection it serves until the write timeout")
		// From 64 KiB to 8 MiB by 64 KiB: on loopback the server's send
		// buffer grows to a few MiB, and some part then ends with it more
		// than two thirds full, where POLLOUT is not reported.
		var sizes []int
		for n := 64 << 10; n <= 8<<20; n += 64 << 10 {
			sizes = append(sizes, n)
		}
		for _, n := range sizes {
			c := dialSmallRcvbuf(t, srv.Addr)
			_, err := fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\nRange: bytes=0-%d\r\n\r\n", n-1)
			require.NoError(t, err)
		}
		closed := func() bool {
			st := srv.Core.Stats()
			return st.Accepts >= uint64(len(sizes)) && st.Closes == st.Accepts
		}
		if !assert.Eventually(t, closed, 10*time.Second, 50*time.Millisecond) {
			st := srv.Core.Stats()
			t.Errorf("connections left open: %d accepted, %d closed", st.Accepts, st.Closes)
		}
	})
}

// TestSlowReaderWriteTimeout: --write-timeout is "no byte accepted for
// that long", as nginx's send_timeout. A client that reads 1 MiB steadily
// but slowly (16 KiB every 100 ms, about 6.4 s in all, through a 4 KiB
// receive buffer) with a two-second write timeout gets the whole body:
// it makes progress all along, though the body takes three times the
// timeout. (Two seconds, twenty times the reader's pause, leave room for
// a machine loaded by the tests running beside this one.)
func TestSlowReaderWriteTimeout(t *testing.T) {
	eachBackendTimed(t, core.Config{WriteTimeout: 2 * time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := dialSmallRcvbuf(t, srv.Addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		const n = 1 << 20
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=0-%d\r\n\r\n", n-1)
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		require.Equal(t, 206, resp.StatusCode)
		got := make([]byte, 0, n)
		buf := make([]byte, 16<<10)
		for len(got) < n {
			k, err := io.ReadFull(resp.Body, buf[:min(len(buf), n-len(got))])
			got = append(got, buf[:k]...)
			if err != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.Len(t, got, n, "a reader making progress was dropped")
		require.True(t, bytes.Equal(s.big[:n], got), "body differs")
		// And the connection is still good.
		_, body := c.Get("/")
		assert.Equal(t, s.index, body)
	})
}

// TestPipeBudgetSpent: with io_uring's bodies by splice
// (--uring-body=splice) and its pipe budget forced down (a test
// hook: room for no pipe, or for two of 64 KiB), bodies that find no pipe
// take the counted fallback, read + send through a chunk, or wait in line
// for a pipe that a chain in flight will give back, and every body
// arrives whole and byte-exact, under concurrency, with ranges and
// keep-alive, beside clients that do not read. epoll has no pipes and
// runs the same test once, with the first budget (which it ignores).
func TestPipeBudgetSpent(t *testing.T) {
	for i, pages := range []int64{1, 32} {
		for _, b := range backend.AllWith(backend.Options{UringPipeBudget: pages, UringBody: uring.BodySplice}) {
			if b.Name() != "uring" && i > 0 {
				continue
			}
			t.Run(fmt.Sprintf("budget=%d/%s", pages, b.Name()), func(t *testing.T) {
				skipOneAtATime(t, "the test runs clients at once, beside clients that do not read")
				s := makeSite(t)
				srv := servertest.Start(t, b, core.Config{Dir: s.dir}, 1)
				stallClients(t, srv.Addr, "/big.bin", 4)
				done := make(chan struct{})
				for i := range 6 {
					go func() {
						defer func() { done <- struct{}{} }()
						c := servertest.Dial(t, srv.Addr)
						for range 1 {
							_, body := c.Get("/big.bin")
							assert.True(t, bytes.Equal(s.big, body), "big.bin differs")
							_, body = c.Get("/mid.bin")
							assert.True(t, bytes.Equal(s.mid, body), "mid.bin differs")
							fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=%d-%d\r\n\r\n", 1000+i, 300000)
							resp, body := c.ReadResponse("GET")
							assert.Equal(t, 206, resp.StatusCode)
							assert.True(t, bytes.Equal(s.big[1000+i:300001], body), "range differs")
						}
					}()
				}
				for range 6 {
					<-done
				}
				// The loops publish their counters once a second.
				st := srv.WaitStats(func(st *core.Stats) bool { return st.Requests >= 6*3 })
				switch {
				case b.Name() != "uring":
				case pages == 1:
					// No pipe fits: every body takes the fallback.
					assert.Zero(t, st.Syscalls[core.SysPipe], "pipes made beyond the budget")
					assert.Contains(t, st.String(), " body_fallbacks=", "bodies sent by the fallback")
				default:
					// Two 64 KiB pipes, held only by chains that wait for
					// no client (the stalled ones wait without a pipe):
					// the others wait in line for them.
					assert.NotZero(t, st.Syscalls[core.SysPipe], "pipes made")
				}
				t.Logf("%s", st.String())
			})
		}
	}
}
