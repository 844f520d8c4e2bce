package uring

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
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

// zcSite is a document root for --uring-send-zc: a 1.5 KB page (copied
// into the Conn's out: never zero-copy), a 60 KiB memory body (referenced:
// SENDMSG_ZC), and a 1 MiB file body (SEND_ZC from its view).
func zcSite(t *testing.T) (dir string, index, mem, big []byte) {
	t.Helper()
	index = bytes.Repeat([]byte("twinloop!\n"), 150)
	mem, big = make([]byte, 60<<10), make([]byte, 1<<20)
	rand.Read(mem)
	rand.Read(big)
	return servertest.Site(t, map[string][]byte{"index.html": index, "mem.bin": mem, "big.bin": big}), index, mem, big
}

// startZC starts a one-loop server with --uring-send-zc=size.
func startZC(t *testing.T, size int64, cfg core.Config) (*servertest.Server, *atomic.Pointer[loop]) {
	t.Helper()
	b := New()
	b.Features.SendZC = size
	if err := b.Probe(); err != nil {
		t.Skip(err)
	}
	var lp atomic.Pointer[loop]
	b.onSetup = func(l *loop) { lp.Store(l) }
	return servertest.Start(t, b, cfg, 1), &lp
}

// assertZCDrained: the stopped loop's zero-copy sends all got their
// notifications, and gave back every File they held.
func assertZCDrained(t *testing.T, l *loop) {
	t.Helper()
	assert.Zero(t, l.inflight, "requests or notifications left in flight")
	assert.Zero(t, l.stats.Own[ownZCPending], "notifications to come")
	assert.Zero(t, l.stats.Own[ownZCHeld], "Files held")
	assert.Len(t, l.zc.free, len(l.zc.recs), "every record free")
}

// TestSendZCExact: with --uring-send-zc, memory bodies (SENDMSG_ZC with
// their headers, alone and pipelined) and file bodies (SEND_ZC from the
// view), whole, in ranges and after HEAD, arrive exactly; small pages
// still go by SEND; every notification comes.
func TestSendZCExact(t *testing.T) {
	dir, index, mem, big := zcSite(t)
	srv, lp := startZC(t, 4096, core.Config{Dir: dir})
	c := servertest.Dial(t, srv.Addr)
	for range 2 {
		resp, body := c.Get("/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, strconv.Itoa(len(big)), resp.Header.Get("Content-Length"))
		require.True(t, bytes.Equal(big, body), "1 MiB body: %d bytes, or different", len(body))
		_, body = c.Get("/mem.bin")
		require.True(t, bytes.Equal(mem, body), "memory body")
		_, body = c.Get("/index.html")
		require.Equal(t, index, body)
	}
	for _, r := range [][2]int{{1000, 300000}, {4095, 4096 + 8192}, {len(big) - 5000, len(big) - 1}} {
		resp, body := c.Do("GET", "/big.bin", "Range: bytes="+strconv.Itoa(r[0])+"-"+strconv.Itoa(r[1])+"\r\n")
		require.Equal(t, 206, resp.StatusCode)
		require.True(t, bytes.Equal(big[r[0]:r[1]+1], body), "range %v", r)
	}
	resp, body := c.Do("GET", "/mem.bin", "Range: bytes=100-50000\r\n")
	require.Equal(t, 206, resp.StatusCode)
	require.True(t, bytes.Equal(mem[100:50001], body), "a memory body's range")
	// HEAD, then the next response right behind its head.
	fmt.Fprintf(c, "HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\nHEAD /mem.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /mem.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	for _, want := range []int{len(big), len(mem)} {
		head, hbody := c.ReadResponse("HEAD")
		require.Equal(t, strconv.Itoa(want), head.Header.Get("Content-Length"))
		require.Empty(t, hbody)
	}
	_, body = c.ReadResponse("GET")
	require.True(t, bytes.Equal(mem, body))
	// Pipelined: memory bodies and pages in one Vec, a file body between.
	var req bytes.Buffer
	for range 6 {
		req.WriteString("GET /mem.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\n\r\nGET /mem.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	}
	req.WriteString("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /mem.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	_, err := c.Write(req.Bytes())
	require.NoError(t, err)
	for range 6 {
		for _, want := range [][]byte{mem, index, mem} {
			_, body := c.ReadResponse("GET")
			require.True(t, bytes.Equal(want, body), "pipelined: %d bytes", len(body))
		}
	}
	_, body = c.ReadResponse("GET")
	require.True(t, bytes.Equal(big, body))
	_, body = c.ReadResponse("GET")
	require.True(t, bytes.Equal(mem, body))
	require.NoError(t, srv.Stop())
	l := lp.Load()
	assert.GreaterOrEqual(t, l.stats.Own[ownZCSends], int64(20))
	t.Logf("zero-copy sends %d, copied after all %d (report usage: %v)", l.stats.Own[ownZCSends], l.stats.Own[ownZCCopied], l.zc.report != 0)
	if l.zc.report != 0 {
		assert.Positive(t, l.stats.Own[ownZCCopied], "loopback copies")
	}
	assertZCDrained(t, l)
}

// TestSendZCThreshold: bodies below the size go as without the feature.
func TestSendZCThreshold(t *testing.T) {
	dir, _, mem, big := zcSite(t)
	srv, lp := startZC(t, 2<<20, core.Config{Dir: dir})
	c := servertest.Dial(t, srv.Addr)
	_, body := c.Get("/big.bin")
	require.True(t, bytes.Equal(big, body))
	_, body = c.Get("/mem.bin")
	require.True(t, bytes.Equal(mem, body))
	require.NoError(t, srv.Stop())
	assert.Zero(t, lp.Load().stats.Own[ownZCSends])
}

// TestSendZCSlowReader: a reader that cannot keep up makes the sends
// short (SENDMSG_ZC returns what the socket took) or wait: each is
// resumed from where Sent got to, with a record of its own, and the
// bytes are exact. With the file cache off, the Conn holds the only
// reference to its File besides the sends': a notification that comes
// after the Conn let go finds the File still open (never released before
// it), and its release is the one that closes it.
func TestSendZCSlowReader(t *testing.T) {
	var open, notOpen, closedBy atomic.Int64
	zcReleased = func(o, closed bool) {
		if o {
			open.Add(1)
		} else {
			notOpen.Add(1)
		}
		if closed {
			closedBy.Add(1)
		}
	}
	t.Cleanup(func() { zcReleased = nil })
	dir, _, mem, big := zcSite(t)
	srv, lp := startZC(t, 1, core.Config{Dir: dir, NoFileCache: true})
	nc, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer nc.Close()
	// Not smaller: with a 16 KiB receive buffer, a zero-copy 1 MiB body
	// took seconds over loopback (--uring-body=view-zc too), a copied one
	// a few hundred ms.
	nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	c := servertest.NewClient(t, nc)
	// Per round: 12 memory bodies (SENDMSG_ZCs of several each, larger
	// than the socket takes at once), a file body, one more.
	var req bytes.Buffer
	var round [][]byte
	for range 12 {
		req.WriteString("GET /mem.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		round = append(round, mem)
	}
	req.WriteString("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /mem.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	round = append(round, big, mem)
	_, err = c.Write(bytes.Repeat(req.Bytes(), 4))
	require.NoError(t, err)
	slow := &slowReader{r: nc, chunk: 8 << 10, pause: time.Millisecond}
	c.R.Reset(slow)
	for i := range 4 {
		start := time.Now()
		for _, want := range round {
			resp, err := http.ReadResponse(c.R, nil)
			require.NoError(t, err)
			body, err := servertest.ReadBody(resp)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, body), "round %d: %d bytes of %d, or different", i, len(body), len(want))
		}
		slow.pause = 0 // later rounds at full speed: the sends need not be short
		t.Logf("round %d: %v", i, time.Since(start))
	}
	require.NoError(t, srv.Stop())
	l := lp.Load()
	assertZCDrained(t, l)
	assert.Zero(t, notOpen.Load(), "a File released before a notification")
	assert.Positive(t, open.Load())
	assert.Positive(t, closedBy.Load(), "no notification outlived its Conn's hold: the test proves nothing")
	if l.zc.shorts == 0 {
		// Whether the kernel ends a send short depends on how far the
		// reader is behind at that moment, which the machine's load
		// decides: the checks above hold either way, the short path's
		// are only the stronger when it came.
		t.Log("no send came up short this time")
	}
	t.Logf("sends %d (%d short), Files given back %d, closed by the notification %d", l.stats.Own[ownZCSends], l.zc.shorts, open.Load(), closedBy.Load())
}

// slowReader reads at most chunk bytes at a time, pausing before each.
type slowReader struct {
	r     io.Reader
	chunk int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), s.chunk)])
}

// TestSendZCClientCloses: clients close (some with a reset) while their
// bodies are being sent zero-copy; the server closes its side, the
// notifications all come, nothing stays held, no fd is left open.
func TestSendZCClientCloses(t *testing.T) {
	dir, index, _, _ := zcSite(t)
	fds, goroutines := baseline(t)
	srv, lp := startZC(t, 1, core.Config{Dir: dir})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", srv.Addr)
			if !assert.NoError(t, err) {
				return
			}
			nc.(*net.TCPConn).SetReadBuffer(32 << 10)
			io.WriteString(nc, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /mem.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
			buf := make([]byte, 16<<10)
			for read := 0; read < i*30<<10; {
				n, err := nc.Read(buf)
				if err != nil {
					break
				}
				read += n
			}
			if i%2 == 0 {
				nc.(*net.TCPConn).SetLinger(0) // a reset
			}
			nc.Close()
		}()
	}
	wg.Wait()
	srv.WaitStats(func(st *core.Stats) bool { return st.Closes >= 40 })
	c := servertest.Dial(t, srv.Addr)
	_, body := c.Get("/index.html")
	assert.Equal(t, index, body)
	c.Close()
	require.NoError(t, srv.Stop())
	assertZCDrained(t, lp.Load())
	settle(t, fds, goroutines)
}

// TestSendZCShutdownMidSend: the server stops while clients that read
// nothing have bodies queued in their sockets, and the loop's drain waits
// for the notifications (the Files stay held, never released before
// them); the clients close meanwhile, after the shutdown's grace, which
// frees their sockets' queues: the notifications come, Serve returns, and
// nothing is left held or open.
func TestSendZCShutdownMidSend(t *testing.T) {
	dir, _, _, _ := zcSite(t)
	fds, goroutines := baseline(t)
	const grace = 300 * time.Millisecond
	// Teardown waits for the notifications, past the conns' grace: the
	// loop says so before its drain waits, or Serve returns without.
	// Set before the server starts, and unset after it stopped.
	waiting := make(chan struct{})
	var once sync.Once
	drainWaits = func(zcPending int64) {
		if zcPending > 0 {
			once.Do(func() { close(waiting) })
		}
	}
	t.Cleanup(func() { drainWaits = nil })
	srv, lp := startZC(t, 1, core.Config{Dir: dir, ShutdownTimeout: grace})
	var conns []*servertest.Client
	for range 4 {
		c := servertest.Dial(t, srv.Addr)
		c.Conn.(*net.TCPConn).SetReadBuffer(64 << 10)
		_, err := io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /mem.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		_, err = io.ReadFull(c, make([]byte, 1024))
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.WaitStalled() // the sends fill the sockets
	}
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned (%v) with notifications to come", err)
	case <-waiting:
	}
	for _, c := range conns {
		c.Close() // unread bytes: a reset
	}
	require.NoError(t, <-stopped)
	assert.Less(t, time.Since(start), grace+core.ShutdownGrace, "Serve waited past the exit deadline")
	assertZCDrained(t, lp.Load())
	settle(t, fds, goroutines)
}

// TestSendZCWriteTimeout: a client that stops reading is cut off by the
// write timeout with its response unsent; its connection is reset, which
// frees its socket's queue, so the notifications come and the Files go
// back while the client still holds its end.
func TestSendZCWriteTimeout(t *testing.T) {
	dir, index, _, _ := zcSite(t)
	srv, lp := startZC(t, 1, core.Config{Dir: dir, WriteTimeout: time.Second})
	nc, err := net.Dial("tcp", srv.Addr)
	require.NoError(t, err)
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	_, err = io.WriteString(nc, strings.Repeat("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n", 8))
	require.NoError(t, err)
	st := srv.WaitStats(func(st *core.Stats) bool { return st.Closes >= 1 })
	require.EqualValues(t, 1, st.Closes, "closed by the write timeout")
	st = srv.WaitStats(func(st *core.Stats) bool { return st.Own[ownZCPending] == 0 })
	assert.Zero(t, st.Own[ownZCPending], "notifications still to come for a connection closed with its response cut short")
	assert.Zero(t, st.Own[ownZCHeld])
	assert.Positive(t, st.Own[ownZCSends])
	_, err = io.Copy(io.Discard, nc)
	assert.Error(t, err, "the client sees a reset")
	c := servertest.Dial(t, srv.Addr)
	_, body := c.Get("/index.html")
	assert.Equal(t, index, body)
	require.NoError(t, srv.Stop())
	assertZCDrained(t, lp.Load())
}
