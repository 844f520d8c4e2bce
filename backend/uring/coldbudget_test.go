//go:build linux

package uring

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestColdBodiesWithinBudget: many clients of a large file evicted from the
// page cache, on two loops whose budget (pipes and chunks together) holds
// two chunks: what the bodies hold never exceeds the one budget of the
// server (and a floor chunk per loop, chunks.getFloor), the bodies beyond
// it wait in line and every one arrives whole and exact, beside clients
// that do not read. Before, a body that found the pipes spent took a
// chunk of its own to its end (results/2026-12-06_uring-cold1m-c10k).
func TestColdBodiesWithinBudget(t *testing.T) {
	const clientsN, gets = 24, 2
	dir, _, big := docroot(t, 1<<20)
	evict(t, filepath.Join(dir, "big.bin"), len(big))
	b := New()
	b.PipeBudget = 2 * chunkPages
	var budget atomic.Pointer[pipeBudget]
	b.onSetup = func(l *loop) { budget.Store(l.budget) }
	srv := servertest.Start(t, b, core.Config{Dir: dir, ShutdownTimeout: 100 * time.Millisecond}, 2)
	// Clients that ask and never read: their bodies wait for room by
	// poll, holding no chunk or pipe the others need.
	for range 4 {
		c, err := net.Dial("tcp", srv.Addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4096))
		_, err = io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
	}
	clients(t, srv.Addr, clientsN, func(c *servertest.Client) {
		for range gets {
			resp, body := c.Get("/big.bin")
			assert.Equal(t, 200, resp.StatusCode)
			assert.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
		}
	})
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.GreaterOrEqual(t, st.Status[2], uint64(clientsN*gets))
	assert.NotZero(t, st.Own[ownBodyCold], "bodies met the evicted file")
	assert.NotZero(t, st.Own[ownBodyWaits], "bodies waited in line for the budget")
	bg := budget.Load()
	require.NotNil(t, bg)
	assert.Equal(t, 2*chunkPages, bg.total)
	assert.NotZero(t, bg.peak.Load(), "bodies took from the budget")
	assert.LessOrEqual(t, bg.peak.Load(), bg.total, "pages held at once beyond the server's budget")
	assert.Equal(t, bg.total, bg.left.Load(), "every pipe and chunk gave its pages back")
}

// evict drops the file at path, of size bytes, from the page cache until
// cachestat counts some of its pages gone: pages that a socket still holds
// (until the client's ACK) stay through DONTNEED. It skips the test when
// they all stay.
func evict(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	pages := uint64((int64(size) + pageSize - 1) / pageSize)
	for i := 0; ; i++ {
		require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		var cs unix.Cachestat_t
		require.NoError(t, unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Len: uint64(size)}, &cs, 0))
		if cs.Cache < pages {
			return
		}
		if i == 50 {
			t.Skipf("all %d pages stayed in the page cache after DONTNEED", pages)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
