package backend_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
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

// TestTakeover replaces a running server three times in a row under a
// loop of clients that open a connection per request (Connection: close),
// as the server's --takeover and SIGTERM do: the new server shares the
// port, then the old one stops. No request may fail: the old server
// finishes what it accepted, and the kernel (tcp_migrate_req) moves the
// connections queued on its listeners to the new one's. It runs on the
// suite's backends: with --uring-fixed-files too, whose accepts go into
// the ring's table.
func TestTakeover(t *testing.T) {
	if !servertest.WithMigrateReq(t) {
		return
	}
	for _, nb := range suiteBackends() {
		b := nb.b
		t.Run(nb.name, func(t *testing.T) {
			s := makeSite(t)
			cfg := core.Config{Dir: s.dir, ShutdownTimeout: 5 * time.Second}
			cur := servertest.Start(t, b, cfg, 2)
			addr := cur.Addr

			var ok, failed atomic.Int64
			var mu sync.Mutex
			var firstErrs []string
			fail := func(format string, args ...any) {
				failed.Add(1)
				mu.Lock()
				if len(firstErrs) < 5 {
					firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
				}
				mu.Unlock()
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := getClose(addr, s.index); err != nil {
							fail("%v", err)
						} else {
							ok.Add(1)
						}
					}
				}()
			}
			// answered waits until the clients have had n more answers,
			// so that every phase (one server; two on the port; the new
			// one alone) has requests in it, however slow the machine.
			answered := func(n int64) {
				t.Helper()
				want := ok.Load() + n
				require.Eventually(t, func() bool { return ok.Load() >= want || failed.Load() > 0 }, 10*time.Second, time.Millisecond,
					"the clients had %d answers, waiting for %d", ok.Load(), want)
			}
			var served []uint64
			for range 3 {
				answered(50)
				next := servertest.StartAt(t, b, cfg, 2, addr, true)
				answered(50)
				require.NoError(t, cur.Stop())
				served = append(served, cur.Core.Stats().Requests)
				cur = next
			}
			answered(50)
			close(stop)
			wg.Wait()
			require.NoError(t, cur.Stop())
			served = append(served, cur.Core.Stats().Requests)
			t.Logf("%d requests, %d failed; served by each generation: %v", ok.Load(), failed.Load(), served)
			assert.Zero(t, failed.Load(), "first errors: %v", firstErrs)
			assert.Positive(t, ok.Load())
			var sum uint64
			for _, n := range served {
				sum += n
			}
			assert.GreaterOrEqual(t, sum, uint64(ok.Load()), "every answer came from one of the servers")
		})
	}
}

// getClose asks for /index.html on a connection of its own and checks the
// whole answer.
func getClose(addr string, want []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	resp, err := servertest.ReadRaw(r, "GET")
	switch {
	case err != nil:
		return err
	case !strings.HasPrefix(resp.Status, "HTTP/1.1 200 "):
		return fmt.Errorf("status line %q", resp.Status)
	case !bytes.Equal(resp.Body, want):
		return fmt.Errorf("body of %d bytes, want %d", len(resp.Body), len(want))
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
		return fmt.Errorf("after the response, %d bytes more and %v, not the close", len(rest), err)
	}
	return nil
}
