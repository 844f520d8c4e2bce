//go:build linux

package uring

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestPipeSizeForBodiesInFlight: a pipe grows past 64 KiB only while the
// budget has room for a 64 KiB pipe for every other body in flight.
func TestPipeSizeForBodiesInFlight(t *testing.T) {
	b := newPipeBudget(12288, 0) // three quarters of the default soft limit
	ps := &pipes{budget: b}
	b.bodies.Store(1)
	assert.Equal(t, int64(1<<20), ps.want(1<<20), "one body: the pipe holds it whole")
	assert.Equal(t, int64(256<<10), ps.want(200<<10))
	b.bodies.Store(50)
	assert.Equal(t, int64(1<<20), ps.want(1<<20), "50 bodies leave room for 1 MiB")
	b.bodies.Store(10000)
	assert.Equal(t, int64(64<<10), ps.want(1<<20), "10,000 bodies: the smallest pipes, 768 of them")
	b.held.Store(9990)
	assert.Equal(t, int64(1<<20), ps.want(1<<20), "the others hold pipes already")
}

// TestPipeShrinks: a free 1 MiB pipe, made while one body was in flight,
// is shrunk to 64 KiB when many are, and its pages go back to the budget.
func TestPipeShrinks(t *testing.T) {
	var st core.Stats
	b := newPipeBudget(12288, 0)
	ps := &pipes{budget: b, st: &st, sys: loops.NewSys(&st)}
	b.bodies.Store(1)
	i := ps.get(1 << 20)
	require.GreaterOrEqual(t, i, int32(0))
	require.Equal(t, int64(1<<20), ps.p[i].cap)
	ps.put(i, false)
	b.bodies.Store(10000)
	j := ps.get(1 << 20)
	assert.Equal(t, i, j, "the free pipe is reused")
	assert.Equal(t, int64(64<<10), ps.p[j].cap)
	assert.Equal(t, int64(12288-16), b.left.Load())
	assert.Equal(t, int64(64<<10), st.Own[ownPipeBytes])
	ps.close()
	assert.Equal(t, int64(12288), b.left.Load())
}

// TestManyBodiesNoPipe: 64 clients at once of a 1 MiB file, by splice
// (--uring-body=splice) with a pipe budget too small for any pipe: every
// body falls back, and goes from the
// File's view, all exact, with no chunk made for them. (TestFewSmallCarriers
// mixes pipes and the fallback.)
func TestManyBodiesNoPipe(t *testing.T) {
	dir, _, big := docroot(t, 1<<20)
	servertest.KeepResident(t, filepath.Join(dir, "big.bin"))
	b := New()
	b.Body = BodySplice
	b.PipeBudget = 1
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
	clients(t, srv.Addr, 64, func(c *servertest.Client) {
		for range 2 {
			resp, body := c.Get("/big.bin")
			assert.Equal(t, 200, resp.StatusCode)
			assert.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
		}
	})
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.Equal(t, uint64(128), st.Status[2])
	assert.NotZero(t, st.Own[ownBodyFallbacks], "the budget was spent")
	assert.NotZero(t, st.Own[ownBodyViews], "fallbacks went from the view")
	assert.Zero(t, st.Own[ownBodyCold])
	assert.Zero(t, st.Own[ownChunks])
}

// TestViewExact: bodies sent from the File's view are exact, whole and in
// ranges that start and end inside pages, and the view is mapped once.
func TestViewExact(t *testing.T) {
	dir, _, big := docroot(t, 3<<20+123)
	servertest.KeepResident(t, filepath.Join(dir, "big.bin"))
	b := New()
	b.Body = BodyView
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
	c := servertest.Dial(t, srv.Addr)
	for range 2 {
		resp, body := c.Get("/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
	}
	for _, r := range [][2]int{{1000, 300000}, {4095, 4096}, {len(big) - 5000, len(big) - 1}, {300 << 10, 2<<20 + 7}} {
		resp, body := c.Do("GET", "/big.bin", "Range: bytes="+strconv.Itoa(r[0])+"-"+strconv.Itoa(r[1])+"\r\n")
		require.Equal(t, 206, resp.StatusCode)
		require.True(t, bytes.Equal(big[r[0]:r[1]+1], body), "range %v", r)
	}
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.GreaterOrEqual(t, st.Own[ownBodyViews], int64(6), "every body went from the view")
	assert.Zero(t, st.Own[ownChunks])
}

// TestTruncatedMidSend: the file is truncated while its body is being
// sent to a slow client, by sendfile (the default) or from its view. The
// server survives (no SIGBUS: only the kernel's copy touches the view, and
// gets EFAULT past the end; sendfile finds the file's end; or the
// residency check sends the rest by READ, which comes up short), the
// client gets the body up to the new end, and then the connection closes,
// cut short; the next request is answered.
func TestTruncatedMidSend(t *testing.T) {
	for _, view := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", view), func(t *testing.T) {
			dir, index, big := docroot(t, 8<<20)
			servertest.KeepResident(t, filepath.Join(dir, "big.bin")) // until the truncation drops its tail
			b := New()
			if view {
				b.Body = BodyView
			}
			srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
			nc, err := net.Dial("tcp", srv.Addr)
			require.NoError(t, err)
			defer nc.Close()
			nc.(*net.TCPConn).SetReadBuffer(64 << 10)
			nc.SetDeadline(time.Now().Add(30 * time.Second))
			_, err = io.WriteString(nc, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			c := servertest.NewClient(t, nc)
			resp, err := http.ReadResponse(c.R, nil)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			got := make([]byte, 100<<10)
			_, err = io.ReadFull(resp.Body, got)
			require.NoError(t, err)
			c.WaitStalled() // the server's send waits for room
			require.NoError(t, os.Truncate(filepath.Join(dir, "big.bin"), 1<<20))
			rest, err := servertest.ReadBody(resp)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the body is cut short by a close")
			got = append(got, rest...)
			assert.Less(t, len(got), len(big))
			// Up to the new end the bytes are the file's. Past it, a
			// view's SEND copied them when it ran, but sendfile hands the
			// page cache's pages to the socket by reference, so bytes the
			// socket still held read as the file reads now: the truncation
			// zeroed the tail of a large folio in place (seen here: 2 MiB
			// of zeros past 1 MiB). Each such page is the file's or zeros;
			// epoll's sendfile hands the pages over the same way.
			cut := min(len(got), 1<<20)
			assert.True(t, bytes.Equal(big[:cut], got[:cut]), "the body up to the new end (%d bytes of %d)", cut, len(got))
			for off := cut; off < len(got); off += int(pageSize) {
				end := min(off+int(pageSize), len(got))
				page := got[off:end]
				if !bytes.Equal(big[off:end], page) && (view || !bytes.Equal(page, make([]byte, len(page)))) {
					t.Errorf("bytes %d-%d past the new end are neither the file's nor zeros", off, end)
					break
				}
			}

			c2 := servertest.Dial(t, srv.Addr)
			resp, body := c2.Get("/index.html")
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, index, body)
			require.NoError(t, srv.Stop())
			if view {
				assert.NotZero(t, srv.Core.Stats().Own[ownBodyViews])
			} else {
				assert.NotZero(t, srv.Core.Stats().Syscalls[core.SysSendfile])
			}
		})
	}
}
