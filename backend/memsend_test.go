package backend_test

// Bodies sent from the cache's memory by reference, and the memory a
// connection holds (issue 20).

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// addMemBody puts a 64 KiB file in s's root: in memory (MemBodyMax) and
// above the copy threshold, so it is sent by reference.
func addMemBody(t *testing.T, s *site) []byte {
	body := make([]byte, 64<<10)
	for i := range body {
		body[i] = byte('A' + i%23)
	}
	require.NoError(t, os.WriteFile(filepath.Join(s.dir, "64k.bin"), body, 0o644))
	return body
}

// TestMemoryBodiesByReference: pipelined requests for bodies sent from the
// cache entry (one writev or SENDMSG), mixed with a copied 1.5 KB body and
// a body sent from its file, to a client that reads only once the server
// has filled the socket, so that the vector goes out in partial writes.
// Every byte arrives in order, and the references are all given back.
func TestMemoryBodiesByReference(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		body := addMemBody(t, s)
		c := servertest.Dial(t, srv.Addr)
		want := [][]byte{body, body, s.index, body, s.mid, body, body}
		targets := []string{"/64k.bin", "/64k.bin", "/index.html", "/64k.bin", "/mid.bin", "/64k.bin", "/64k.bin"}
		var req bytes.Buffer
		for _, p := range targets {
			fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", p)
		}
		_, err := c.Write(req.Bytes())
		require.NoError(t, err)
		c.WaitStalled() // the server fills the socket and waits
		for i, w := range want {
			resp, got := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode, "response %d", i)
			require.True(t, bytes.Equal(w, got), "response %d: %d bytes", i, len(got))
		}
		fmt.Fprintf(c, "GET /64k.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		resp, got := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(body, got))
		require.True(t, c.Closed())
		st := srv.WaitStats(func(st *core.Stats) bool { return st.Requests >= 8 && st.BodyRefs == 0 })
		assert.Equal(t, int64(0), st.BodyRefBytes)
	})
}

// Budgets for what a connection holds in its buffers (Stats.BufBytes):
// an idle keep-alive one after a 1.5 KB response, and a busy one whose
// client does not read its 64 KiB body. Before bodies were referenced, a
// busy connection held the body's copy, 64 KiB and more.
const (
	idleConnBudget = 4 << 10
	busyConnBudget = 8 << 10
)

// TestHeldBytesPerConnection opens 2,000 connections to one loop, fetches
// a 64 KiB body on each without reading it, and holds the server's
// buffers to a budget per connection; then the same for idle keep-alive
// connections after a 1.5 KB response.
func TestHeldBytesPerConnection(t *testing.T) {
	eachBackendLoops(t, core.Config{}, 1, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "the test holds 2,000 connections open at once")
		addMemBody(t, s)
		const n, pipelined = 2000, 1
		// A small receive buffer; loopback still takes the whole body into
		// the sockets (up to 256 KiB per connection, seen here), so a body
		// may or may not be queued still. Either way the budget holds: out
		// kept a copied body's capacity after sending it.
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
		}}
		busy := make([]net.Conn, 0, n)
		for range n {
			c, err := d.Dial("tcp", srv.Addr)
			require.NoError(t, err)
			busy = append(busy, c)
			_, err = io.WriteString(c, strings.Repeat("GET /64k.bin HTTP/1.1\r\nHost: t\r\n\r\n", pipelined))
			require.NoError(t, err)
		}
		st := srv.WaitStats(func(st *core.Stats) bool { return st.Requests >= n*pipelined })
		t.Logf("busy: %s", st.String())
		assert.Less(t, st.BufBytes/n, int64(busyConnBudget), "buffer bytes per busy connection")
		for _, c := range busy {
			c.Close()
		}
		srv.WaitStats(func(st *core.Stats) bool { return st.Accepts-st.Closes <= 1 && st.BodyRefs == 0 })

		before := srv.Core.Stats().Requests
		idle := make([]*servertest.Client, 0, n)
		for range n {
			c := servertest.Dial(t, srv.Addr)
			idle = append(idle, c)
			_, err := io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
			require.NoError(t, err)
		}
		for _, c := range idle {
			resp, got := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode)
			require.True(t, bytes.Equal(s.index, got))
		}
		st = srv.WaitStats(func(st *core.Stats) bool { return st.Requests >= before+n })
		t.Logf("idle: %s", st.String())
		assert.Less(t, st.BufBytes/n, int64(idleConnBudget), "buffer bytes per idle connection")
	})
}
