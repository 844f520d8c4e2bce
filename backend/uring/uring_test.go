//go:build linux

package uring

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pawelgaczynski/giouring"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// docroot makes a document root with a 1500-byte index.html and a
// size-byte big.bin of random bytes, and returns its path and both bodies.
func docroot(t *testing.T, size int) (dir string, index, big []byte) {
	t.Helper()
	index = bytes.Repeat([]byte("twinloop!\n"), 150)
	big = make([]byte, size)
	_, err := rand.Read(big)
	require.NoError(t, err)
	return servertest.Site(t, map[string][]byte{"index.html": index, "big.bin": big}), index, big
}

// clients runs fn on n connections to addr at once, each on its own
// goroutine with a minute to finish and a 64 KiB read buffer, and waits
// for them all.
func clients(t *testing.T, addr string, n int, fn func(c *servertest.Client)) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			cl := servertest.NewClient(t, c)
			cl.R = bufio.NewReaderSize(c, 64<<10)
			fn(cl)
		}()
	}
	wg.Wait()
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// settle waits for the fd and goroutine counts to come back to the given
// ones (closed client sockets and finished goroutines can lag a little).
func settle(t *testing.T, fds, goroutines int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if openFDs(t) <= fds && runtime.NumGoroutine() <= goroutines {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.LessOrEqual(t, openFDs(t), fds, "fd leak")
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutine leak")
}

// baseline dials once so that the runtime's own netpoll fd exists before
// fds are counted.
func baseline(t *testing.T) (fds, goroutines int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	c.Close()
	ln.Close()
	return openFDs(t), runtime.NumGoroutine()
}

// eachBody runs fn once per way of sending file bodies.
func eachBody(t *testing.T, fn func(t *testing.T, b *Backend)) {
	for _, name := range []string{"sendfile", "splice", "read", "view", "view-zc"} {
		t.Run(name, func(t *testing.T) {
			b := New()
			b.Body = BodyModes[name]
			fn(t, b)
		})
	}
}

func TestUserData(t *testing.T) {
	for _, tc := range []struct {
		o         op
		gen, slot uint32
	}{
		{o: opRecv, gen: 1, slot: 0},
		{o: opClose, gen: genMask, slot: 1<<32 - 1},
		{o: opBodyOut, gen: 12345, slot: 777},
	} {
		o, gen, slot := unpack(pack(tc.o, tc.gen, tc.slot))
		assert.Equal(t, tc.o, o)
		assert.Equal(t, tc.gen, gen)
		assert.Equal(t, tc.slot, slot)
	}
	// The generation wraps within its 24 bits.
	_, gen, _ := unpack(pack(opRecv, genMask+1, 3))
	assert.Equal(t, uint32(0), gen)
}

// testRing sets up a small ring on the test's thread, which stays locked
// to it until the test ends (SINGLE_ISSUER), or skips the test when
// io_uring cannot run here.
func testRing(t *testing.T) *ring {
	t.Helper()
	if err := New().Probe(); err != nil {
		t.Skip(err)
	}
	runtime.LockOSThread()
	r, err := newRing(8, 16, 0, Features{})
	require.NoError(t, err)
	t.Cleanup(func() {
		r.QueueExit()
		runtime.UnlockOSThread()
	})
	return r
}

func TestProbe(t *testing.T) {
	err := New().Probe()
	if err != nil {
		require.ErrorIs(t, err, errors.ErrUnsupported)
		t.Skipf("io_uring unavailable: %v", err)
	}
}

// TestShortReadBreaksLink checks the kernel behaviour the file-body chain
// relies on: a short read ends its link, so the send after it is
// cancelled instead of sending bytes the read did not fill.
func TestShortReadBreaksLink(t *testing.T) {
	r := testRing(t)
	f, err := os.CreateTemp(t.TempDir(), "short")
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("0123456789"))
	require.NoError(t, err)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(buf)

	e := r.GetSQE()
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareRead(int(f.Fd()), addrOf(buf), 100, 0)
	e.Flags = giouring.SqeIOLink
	e.UserData = 1
	e = r.GetSQE()
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareSend(fds[0], addrOf(buf), 100, unix.MSG_NOSIGNAL)
	e.UserData = 2
	got := map[uint64]int32{}
	for len(got) < 2 {
		c, err := r.waitOne()
		require.NoError(t, err)
		got[c.ud] = c.res
	}
	assert.Equal(t, int32(10), got[1], "the read is short")
	assert.Equal(t, -int32(unix.ECANCELED), got[2], "the linked send is cancelled")
}

func TestBurst2000(t *testing.T) {
	dir, index, _ := docroot(t, 1)
	fds, goroutines := baseline(t)
	srv := servertest.Start(t, New(), core.Config{Dir: dir}, 2)
	const n = 2000
	conns := make([]*servertest.Client, n)
	for i := range conns {
		conns[i] = servertest.Dial(t, srv.Addr)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, c := range conns {
		wg.Add(1)
		go func(c *servertest.Client) {
			defer wg.Done()
			defer c.Close()
			if _, err := io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				errs <- err
				return
			}
			resp, err := http.ReadResponse(c.R, nil)
			if err != nil {
				errs <- err
				return
			}
			body, err := servertest.ReadBody(resp)
			if err == nil && (resp.StatusCode != 200 || !bytes.Equal(body, index)) {
				err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, len(body))
			}
			if err != nil {
				errs <- err
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.GreaterOrEqual(t, st.Accepts, uint64(n))
	assert.Equal(t, uint64(n), st.Status[2])
	settle(t, fds, goroutines)
}

// TestPipelined1MiB sends 1 MiB of pipelined GETs in one write per client,
// from several clients at once, with a buffer ring of 8 buffers: recvs run
// out of buffers (ENOBUFS) over and over, and not a byte may be lost. The
// recvs are multishot, then one-shot (--uring-multishot=off).
func TestPipelined1MiB(t *testing.T) {
	for _, oneShot := range []bool{false, true} {
		t.Run(fmt.Sprintf("oneshot=%v", oneShot), func(t *testing.T) {
			b := New()
			b.OneShot = oneShot
			testPipelined1MiB(t, b)
		})
	}
}

func testPipelined1MiB(t *testing.T, b *Backend) {
	dir, index, _ := docroot(t, 1)
	b.bufCount, b.bufSize = 8, 4096
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
	req := []byte("GET /index.html HTTP/1.1\r\nHost: pipelined.example\r\n\r\n")
	reqs := (1 << 20) / len(req)
	payload := bytes.Repeat(req, reqs)
	clients(t, srv.Addr, 4, func(c *servertest.Client) {
		werr := make(chan error, 1)
		go func() { _, err := c.Write(payload); werr <- err }()
		for i := range reqs {
			resp, err := http.ReadResponse(c.R, nil)
			if !assert.NoError(t, err, "response %d", i) {
				return
			}
			body, err := servertest.ReadBody(resp)
			if !assert.NoError(t, err) || !assert.Equal(t, 200, resp.StatusCode) || !assert.True(t, bytes.Equal(index, body), "response %d", i) {
				return
			}
		}
		assert.NoError(t, <-werr)
	})
	require.NoError(t, srv.Stop())
	assert.Equal(t, uint64(4*reqs), srv.Core.Stats().Status[2])
}

func TestBigFileExact(t *testing.T) { eachBody(t, testBigFileExact) }

func testBigFileExact(t *testing.T, b *Backend) {
	dir, _, big := docroot(t, 10<<20)
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
	c := servertest.Dial(t, srv.Addr)
	for range 2 { // twice on one connection: the chain resumes and ends cleanly
		resp, body := c.Get("/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, strconv.Itoa(len(big)), resp.Header.Get("Content-Length"))
		require.True(t, bytes.Equal(big, body), "body differs")
	}
	// A range from the middle, through the same chain.
	resp, body := c.Do("GET", "/big.bin", "Range: bytes=1000-300000\r\n")
	require.Equal(t, 206, resp.StatusCode)
	require.True(t, bytes.Equal(big[1000:300001], body))
}

// TestFewSmallCarriers sends every body from its file with a pipe budget
// of a few small pipes, fewer than clients: some bodies go through pipes
// smaller than they are, the others by the chunk fallback.
func TestFewSmallCarriers(t *testing.T) { eachBody(t, testFewSmallCarriers) }

func testFewSmallCarriers(t *testing.T, b *Backend) {
	dir, index, big := docroot(t, 300<<10)
	b.PipeBudget = 3 * defaultPipe / pageSize
	srv := servertest.Start(t, b, core.Config{Dir: dir, Sendfile: core.SendfileAlways}, 1)
	clients(t, srv.Addr, 8, func(c *servertest.Client) {
		for range 3 {
			_, body := c.Get("/index.html")
			assert.True(t, bytes.Equal(index, body))
			_, body = c.Get("/big.bin")
			assert.True(t, bytes.Equal(big, body))
			// From an offset inside a page: a one-page pipe takes
			// less than asked, and what it holds goes out first.
			_, err := io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-99999\r\n\r\n")
			assert.NoError(t, err)
			resp, err := http.ReadResponse(c.R, nil)
			if !assert.NoError(t, err) {
				return
			}
			body, err = servertest.ReadBody(resp)
			assert.NoError(t, err)
			assert.Equal(t, 206, resp.StatusCode)
			assert.True(t, bytes.Equal(big[1000:100000], body))
		}
	})
}

// TestCloseDuringLargeSends has clients drop their connections while the
// server is in the middle of sending them a large file: every fd the
// server opened must be closed once it stops.
func TestCloseDuringLargeSends(t *testing.T) { eachBody(t, testCloseDuringLargeSends) }

func testCloseDuringLargeSends(t *testing.T, b *Backend) {
	dir, _, _ := docroot(t, 8<<20)
	fds, goroutines := baseline(t)
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 2)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", srv.Addr)
			if !assert.NoError(t, err) {
				return
			}
			io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
			buf := make([]byte, 32<<10)
			for read := 0; read < i*20<<10; {
				n, err := c.Read(buf)
				if err != nil {
					break
				}
				read += n
			}
			c.(*net.TCPConn).SetLinger(0) // a reset, as an impatient client does
			c.Close()
		}()
	}
	wg.Wait()
	// The server notices the resets and closes its side (the counters are
	// published once a second); a new request still works.
	srv.WaitStats(func(st *core.Stats) bool { return st.Closes >= 50 })
	c := servertest.Dial(t, srv.Addr)
	resp, _ := c.Get("/index.html")
	assert.Equal(t, 200, resp.StatusCode)
	c.Close()
	require.NoError(t, srv.Stop())
	settle(t, fds, goroutines)
}

// TestShutdownInFlight stops the server while a slow reader is receiving a
// big file: Serve returns within ShutdownTimeout plus some slack, with no
// fd or goroutine left behind.
func TestShutdownInFlight(t *testing.T) { eachBody(t, testShutdownInFlight) }

func testShutdownInFlight(t *testing.T, b *Backend) {
	dir, _, _ := docroot(t, 32<<20)
	fds, goroutines := baseline(t)
	const grace = 500 * time.Millisecond
	srv := servertest.Start(t, b, core.Config{Dir: dir, ShutdownTimeout: grace}, 2)
	var clients []net.Conn
	for range 4 {
		c := servertest.Dial(t, srv.Addr)
		c.Conn.(*net.TCPConn).SetReadBuffer(4096)
		_, err := io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		buf := make([]byte, 1024)
		_, err = io.ReadFull(c, buf) // the response has started
		require.NoError(t, err)
		clients = append(clients, c)
	}
	idle := servertest.Dial(t, srv.Addr) // an idle keep-alive connection
	start := time.Now()
	require.NoError(t, srv.Stop())
	took := time.Since(start)
	assert.Less(t, took, grace+2*time.Second, "Serve took %v to return", took)
	t.Logf("Stop took %v", took)
	// The idle connection was closed at once, the slow ones at the deadline.
	idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := idle.Read(make([]byte, 1))
	assert.Error(t, err)
	idle.Close()
	for _, c := range clients {
		c.Close()
	}
	settle(t, fds, goroutines)
}

// TestShutdownFinishesResponse stops the server while a response is on its
// way to a client that does read: it completes within the grace period and
// the connection is then closed.
func TestShutdownFinishesResponse(t *testing.T) { eachBody(t, testShutdownFinishesResponse) }

func testShutdownFinishesResponse(t *testing.T, b *Backend) {
	dir, _, big := docroot(t, 16<<20)
	srv := servertest.Start(t, b, core.Config{Dir: dir, ShutdownTimeout: 5 * time.Second}, 1)
	c := servertest.Dial(t, srv.Addr)
	_, err := io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(c.R, nil)
	require.NoError(t, err)
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	// 16 MiB do not fit in the socket buffers: the send is in flight
	// when the loop begins the shutdown.
	require.Eventually(t, srv.Core.Draining, 5*time.Second, time.Millisecond, "the shutdown did not begin")
	body, err := servertest.ReadBody(resp)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, body))
	require.NoError(t, <-stopped)
	// Then the server closes the connection.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = c.R.ReadByte()
	assert.ErrorIs(t, err, io.EOF)
}

func TestMaxConns(t *testing.T) {
	t.Run("default", func(t *testing.T) { testMaxConns(t, New()) })
	t.Run("fixed-files", func(t *testing.T) { // the refused socket's slot is closed by IORING_OP_CLOSE
		b := New()
		b.Features.FixedFiles = true
		testMaxConns(t, b)
	})
}

func testMaxConns(t *testing.T, b *Backend) {
	if err := b.Probe(); err != nil {
		t.Skip(err)
	}
	dir, _, _ := docroot(t, 1)
	srv := servertest.Start(t, b, core.Config{Dir: dir, MaxConns: 2}, 1)
	// servertest.Start's probe connection may still be open: wait until
	// the server has closed it.
	srv.WaitStats(func(st *core.Stats) bool { return st.Accepts >= 1 && st.Closes == st.Accepts })
	var open []net.Conn
	for range 2 {
		c := servertest.Dial(t, srv.Addr)
		resp, _ := c.Get("/index.html")
		require.Equal(t, 200, resp.StatusCode)
		open = append(open, c)
	}
	c := servertest.Dial(t, srv.Addr)
	// A request, so that the listener (TCP_DEFER_ACCEPT) hands it over.
	io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(make([]byte, 1))
	assert.Error(t, err, "the third connection is closed at once")
	assert.Zero(t, n)
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "closed, not left waiting")
	c.Close()
	for _, c := range open {
		c.Close()
	}
	require.NoError(t, srv.Stop())
	assert.GreaterOrEqual(t, srv.Core.Stats().Refused, uint64(1))
}

// TestAblationCounters runs one workload (10 keep-alive clients, 50
// requests each, one at a time) with each switch that changes what is
// submitted, and checks from the counters what the switch guarantees,
// whatever the timing:
//
//   - SubmitEach (--uring-batch=off) enters the kernel at least once per
//     request: each response's send goes in alone. (That batch=on enters
//     less is TestSubmitEach; over a whole run it depends on how many
//     requests a pass finds: with clients that wait for each answer it
//     is two enters per request either way, a recv's pass and a send's.)
//   - OneShot (--uring-multishot=off) queues a recv again after every
//     completion: at least two SQEs per request, a recv and a send, where
//     a multishot recv stays armed and a request costs about one.
func TestAblationCounters(t *testing.T) {
	dir, index, _ := docroot(t, 1)
	const conns, perConn = 10, 50
	const requests = conns * perConn
	run := func(b *Backend) core.Stats {
		srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
		clients(t, srv.Addr, conns, func(c *servertest.Client) {
			for range perConn {
				if _, body := c.Get("/index.html"); !assert.Equal(t, index, body) {
					return
				}
			}
		})
		require.NoError(t, srv.Stop())
		st := srv.Core.Stats()
		require.Equal(t, uint64(requests), st.Status[2])
		return st
	}
	perReq := func(n uint64) float64 { return float64(n) / requests }

	def := run(New())
	each := run(&Backend{SubmitEach: true})
	oneShot := run(&Backend{OneShot: true})
	t.Logf("per request: default %.2f enters, %.2f SQEs; batch=off %.2f enters; multishot=off %.2f SQEs",
		perReq(def.Syscalls[core.SysUringEnter]), perReq(uint64(def.Own[ownSQEs])), perReq(each.Syscalls[core.SysUringEnter]), perReq(uint64(oneShot.Own[ownSQEs])))

	assert.GreaterOrEqual(t, each.Syscalls[core.SysUringEnter], uint64(requests), "batch=off: an enter per request at least")
	assert.GreaterOrEqual(t, oneShot.Own[ownSQEs], int64(2*requests), "multishot=off: a recv and a send per request")
	assert.Less(t, perReq(uint64(def.Own[ownSQEs])), 1.5, "multishot: about one SQE (the send) per request")
}

// TestSubmitEach checks what --uring-batch switches, in the loop itself:
// with SubmitEach every SQE enters the kernel as it is queued (a linked
// chain once, whole); without it nothing enters until the pass's one
// io_uring_enter, which submits everything queued.
func TestSubmitEach(t *testing.T) {
	if err := New().Probe(); err != nil {
		t.Skip(err)
	}
	runtime.LockOSThread() // SINGLE_ISSUER: the loop's ring is this thread's
	defer runtime.UnlockOSThread()
	srv, err := core.NewServer(core.Config{Dir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Close()
	const singles = 8
	for _, tc := range []struct {
		each               bool
		queued, afterPass  uint64 // enters
		submittedByThePass int64  // SQEs
	}{
		{each: false, queued: 0, afterPass: 1, submittedByThePass: singles + 2},
		{each: true, queued: singles + 1, afterPass: singles + 2, submittedByThePass: 0},
	} {
		l := newLoop(srv, 0, nil, Backend{SubmitEach: tc.each}.withDefaults(), newPipeBudget(0, 0))
		require.NoError(t, l.Setup())
		l.submit() // the wake read that setup queued
		enters := func() uint64 { return l.stats.Syscalls[core.SysUringEnter] }
		e0, s0 := enters(), l.stats.Own[ownSQEs]
		// Requests that need no connection: cancels of nothing, which
		// complete at once with ENOENT (a linked one then with ECANCELED).
		for range singles {
			l.cancelLoopOp(pack(opAccept, 0, 99))
		}
		e := l.sqe()
		e.PrepareCancel64(pack(opAccept, 0, 99), 0)
		e.Flags = giouring.SqeIOHardlink
		e.UserData = pack(opCancelLoop, 0, 0)
		l.queue(e, opCancelLoop, nil)
		l.cancelLoopOp(pack(opAccept, 0, 99))
		assert.Equal(t, tc.queued, enters()-e0, "enters while queueing, SubmitEach=%v", tc.each)
		s1 := l.stats.Own[ownSQEs]
		l.enterAndWait()
		assert.Equal(t, tc.afterPass, enters()-e0, "enters after the pass, SubmitEach=%v", tc.each)
		assert.Equal(t, tc.submittedByThePass, l.stats.Own[ownSQEs]-s1, "SQEs the pass submitted, SubmitEach=%v", tc.each)
		assert.Equal(t, int64(singles+2), l.stats.Own[ownSQEs]-s0)
		l.Teardown()
		require.Zero(t, l.inflight)
	}
}

// TestExplainSetup: when io_uring_setup fails, the operator gets one line
// that names the cause, and the error says "unsupported" so that
// --backend=auto falls back to epoll.
func TestExplainSetup(t *testing.T) {
	for errno, says := range map[unix.Errno]string{
		unix.ENOSYS: "this kernel has no io_uring",
		unix.EPERM:  "io_uring_disabled",
		unix.ENOMEM: "RLIMIT_MEMLOCK",
		unix.EINVAL: "io_uring_setup: invalid argument",
	} {
		err := explainSetup(os.NewSyscallError("io_uring_setup", errno))
		require.ErrorIs(t, err, errors.ErrUnsupported)
		require.Contains(t, err.Error(), says)
		require.NotContains(t, err.Error(), "\n")
	}
}

// The CQ has room for a completion from every connection of the loop, up
// to maxCQ; the SQ stays small (ringEntries), and a ring so set up takes
// SQEs up to its size, then submits.
func TestRingEntries(t *testing.T) {
	sq, cq := ringEntries(65536)
	assert.Equal(t, uint32(maxSQ), sq)
	assert.Equal(t, uint32(maxCQ), cq)
	sq, cq = ringEntries(4000)
	assert.Equal(t, uint32(maxSQ), sq)
	assert.Equal(t, uint32(4096), cq)
	sq, cq = ringEntries(100)
	assert.Equal(t, uint32(256), sq)
	assert.Equal(t, uint32(512), cq)

	r, err := newRing(8, 64, 0, Features{})
	require.NoError(t, err)
	defer r.QueueExit()
	assert.Equal(t, uint32(8), r.SQSpaceLeft())
	assert.NotZero(t, r.flags&giouring.SetupCQSize)
	for range 8 {
		for range 8 {
			r.GetSQE().PrepareNop() // io_uring_prep_nop(3)
		}
		_, err := r.Submit()
		require.NoError(t, err)
	}
	assert.Equal(t, uint32(64), r.CQReady(), "64 completions in the CQ, none in the overflow list")
}

func TestFdQueue(t *testing.T) {
	var q fdQueue
	_, ok := q.pop()
	assert.False(t, ok)
	next, want := 0, 0
	push := func(k int) {
		for range k {
			q.push(next)
			next++
		}
	}
	pop := func(k int) {
		for range k {
			fd, ok := q.pop()
			require.True(t, ok)
			require.Equal(t, want, fd, "first in, first out")
			want++
		}
	}
	push(5)
	for range 10000 {
		push(3)
		pop(3)
		require.Equal(t, 5, q.len())
	}
	assert.LessOrEqual(t, cap(q.fds), 64, "30,000 sockets went through a queue of 5 to 8: it slides down instead of growing")
	pop(5)
	_, ok = q.pop()
	assert.False(t, ok)
	assert.Zero(t, q.len())
}

// TestAdmitBacklog: 1,000 Connection: close requests wait in the
// listener's backlog before the loop starts, which its multishot accept
// takes in one go. Each is answered, and the loop holds at most a few
// passes' worth of Conns at once (admit), not 1,000. The requests are
// OPTIONS, which the core answers with no file-system operation: 1,000
// GETs would all wait for their file's first load, however they were
// admitted.
func TestAdmitBacklog(t *testing.T) {
	dir, _, _ := docroot(t, 1)
	b := New()
	if err := b.Probe(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	fds, goroutines := baseline(t)
	srv, err := core.NewServer(core.Config{Dir: dir})
	require.NoError(t, err)
	ls, err := listen.Open([]string{"127.0.0.1:0"}, 1, listen.Options{DeferAccept: true})
	require.NoError(t, err)
	addr := ls.Addrs[0].String()
	const n = 1000
	conns := make([]*servertest.Client, n)
	for i := range conns {
		conns[i] = servertest.Dial(t, addr)
		_, err := io.WriteString(conns[i], "OPTIONS /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, srv, ls) }()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			resp, _ := c.ReadResponse("OPTIONS")
			assert.Equal(t, 204, resp.StatusCode)
			assert.Equal(t, "GET, HEAD, OPTIONS", resp.Header.Get("Allow"))
			assert.True(t, c.Closed(), "closed after the response")
		})
	}
	wg.Wait()
	cancel()
	require.NoError(t, <-done)
	st := srv.Stats()
	assert.Equal(t, uint64(n), st.Status[2])
	assert.Less(t, st.ConnsPeak, int64(n/2), "Conns open at once")
	srv.Close()
	settle(t, fds, goroutines)
}
