package uring

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pawelgaczynski/giouring"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// startWith starts a one-loop server with b, and returns it with its loop
// as Setup left it (read once the server has stopped).
func startWith(t *testing.T, b *Backend, dir string) (*servertest.Server, *atomic.Pointer[loop]) {
	t.Helper()
	if err := b.Probe(); err != nil {
		t.Skip(err)
	}
	var lp atomic.Pointer[loop]
	b.onSetup = func(l *loop) { lp.Store(l) }
	return servertest.Start(t, b, core.Config{Dir: dir}, 1), &lp
}

// cqesWithin submits what r has queued and collects the CQEs that come
// within d.
func cqesWithin(t *testing.T, r *ring, d time.Duration) []cqeCopy {
	t.Helper()
	var got []cqeCopy
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		var w waitArg
		w.ts = unix.NsecToTimespec(int64(10 * time.Millisecond))
		_, errno := r.enter(r.v.flushSQ(), 1, giouring.EnterGetEvents, &w, true)
		require.Contains(t, []unix.Errno{0, unix.EINTR, unix.ETIME}, errno)
		var one [1]*giouring.CompletionQueueEvent
		for r.CQReady() > 0 {
			r.PeekBatchCQE(one[:])
			got = append(got, cqeCopy{one[0].UserData, one[0].Res, one[0].Flags})
			r.CQAdvance(1)
		}
	}
	return got
}

// TestSkipSuccessLink checks the kernel behaviour --uring-skip-send
// relies on (skipsend_linux.go): a linked send with
// IOSQE_CQE_SKIP_SUCCESS posts no CQE when it succeeds, and the step
// behind it posts its own; when it fails it posts its CQE, and the step
// behind it, cancelled, posts none.
func TestSkipSuccessLink(t *testing.T) {
	r := testRing(t)
	if r.v.features&featCQESkip == 0 {
		t.Skip("no IOSQE_CQE_SKIP_SUCCESS (Linux 5.17)")
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(buf)
	for _, tc := range []struct {
		name     string
		peerGone bool
		want     []uint64 // user_data of the CQEs that come
	}{
		{name: "success", want: []uint64{2}},
		{name: "failure", peerGone: true, want: []uint64{1}},
	} {
		func() { // not a subtest: the ring belongs to this thread
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			defer unix.Close(fds[0])
			if tc.peerGone {
				unix.Close(fds[1])
			} else {
				defer unix.Close(fds[1])
			}
			e := r.GetSQE()
			*e = giouring.SubmissionQueueEntry{}
			e.PrepareSend(fds[0], addrOf(buf), 100, unix.MSG_NOSIGNAL|unix.MSG_WAITALL)
			e.Flags = giouring.SqeIOLink | sqeCQESkipSuccess
			e.UserData = 1
			e = r.GetSQE()
			*e = giouring.SubmissionQueueEntry{}
			e.PreparePollAdd(fds[0], unix.POLLOUT)
			e.UserData = 2
			got := cqesWithin(t, r, 200*time.Millisecond)
			var uds []uint64
			for _, c := range got {
				uds = append(uds, c.ud)
			}
			assert.Equal(t, tc.want, uds, tc.name)
			if tc.peerGone && len(got) == 1 {
				assert.Equal(t, -int32(unix.EPIPE), got[0].res)
			}
		}()
	}
}

// TestSkipSend: with --uring-skip-send, bodies read into chunks (whose
// header goes with the READ and SEND linked behind it) arrive whole, and
// skipped headers are counted; clients that reset their connection right
// after asking leave nothing in flight. (TestAblations pipelines them.)
func TestSkipSend(t *testing.T) {
	dir, index, big := docroot(t, 300<<10)
	b := New()
	b.Body = BodyRead
	b.Features.SkipSend = true
	srv, lp := startWith(t, b, dir)
	c := servertest.Dial(t, srv.Addr)
	for range 5 {
		_, body := c.Get("/big.bin")
		require.True(t, bytes.Equal(big, body), "big.bin: %d bytes of %d, or different", len(body), len(big))
	}
	for range 100 {
		nc, err := net.Dial("tcp", srv.Addr)
		require.NoError(t, err)
		_, err = io.WriteString(nc, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		require.NoError(t, err)
		nc.(*net.TCPConn).SetLinger(0) // a reset, which fails what is still to be sent
		nc.Close()
	}
	resp, body := c.Get("/index.html")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, index, body)
	require.NoError(t, srv.Stop())
	l := lp.Load()
	assert.GreaterOrEqual(t, l.stats.Own[ownSendsSkipped], int64(5))
	assert.Zero(t, l.inflight, "requests left in flight")
}

// TestSkipSendFails: a skipped header that fails completes (its
// connection is closed) and takes the steps behind it, which complete
// without CQEs, off the counts: nothing is left in flight, and the
// connections after it are served.
func TestSkipSendFails(t *testing.T) {
	dir, index, big := docroot(t, 300<<10)
	var n atomic.Int64
	faultSkipped = func() bool { return n.Add(1)%2 == 0 }
	t.Cleanup(func() { faultSkipped = nil })
	b := New()
	b.Body = BodyRead
	b.Features.SkipSend = true
	srv, lp := startWith(t, b, dir)
	failed := 0
	for range 20 {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		body, err := io.ReadAll(c.R)
		require.NoError(t, err)
		if bytes.HasSuffix(body, big) {
			continue
		}
		assert.Empty(t, body, "a failed header sends nothing")
		failed++
		c2 := servertest.Dial(t, srv.Addr)
		resp, body := c2.Get("/index.html")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, index, body)
	}
	require.NoError(t, srv.Stop())
	assert.Equal(t, 10, failed)
	assert.Zero(t, lp.Load().inflight, "requests left in flight")
}

// TestRecvSpans: with bundles, incremental buffers or both, requests
// whose heads span several small buffers, pipelined on connections that
// share the ring, are parsed and answered exactly; the ring runs dry
// and recovers (ENOBUFS) along the way.
func TestRecvSpans(t *testing.T) {
	dir, index, _ := docroot(t, 1)
	pad := strings.Repeat("x", 900)
	for _, f := range []Features{{Bundle: true}, {BufInc: true}, {Bundle: true, BufInc: true}} {
		t.Run(fmt.Sprintf("bundle=%v,inc=%v", f.Bundle, f.BufInc), func(t *testing.T) {
			b := New()
			b.Features = f
			b.bufCount, b.bufSize = 16, 256
			srv, lp := startWith(t, b, dir)
			clients(t, srv.Addr, 6, func(c *servertest.Client) {
				for range 5 {
					var req bytes.Buffer
					for i := range 8 {
						fmt.Fprintf(&req, "GET /index.html?%d HTTP/1.1\r\nHost: t\r\nX-Pad: %s\r\n\r\n", i, pad[:100*i])
					}
					if _, err := c.Write(req.Bytes()); !assert.NoError(t, err) {
						return
					}
					for range 8 {
						resp, body := c.ReadResponse("GET")
						if !assert.Equal(t, 200, resp.StatusCode) || !assert.Equal(t, index, body) {
							return
						}
					}
				}
			})
			require.NoError(t, srv.Stop())
			assert.Equal(t, int64(16*256), lp.Load().stats.Own[ownRecvBufBytes])
		})
	}
}

// TestRingFeatures: the features that belong to the ring are in effect
// once the loop is set up, and requests are answered through them.
func TestRingFeatures(t *testing.T) {
	dir, index, big := docroot(t, 200<<10)
	b := New()
	b.Features = Features{RegRing: true, WaitRegion: true, SQPoll: true, SQPollCPU: 0}
	srv, lp := startWith(t, b, dir)
	c := servertest.Dial(t, srv.Addr)
	for range 3 {
		_, body := c.Get("/index.html")
		require.Equal(t, index, body)
		_, body = c.Get("/big.bin")
		require.True(t, bytes.Equal(big, body))
	}
	// The poll thread goes to sleep after sqPollIdle without work (the
	// kernel says so in the SQ ring's flags); the next request wakes it.
	if l := lp.Load(); l.ring.sqpoll {
		require.Eventually(t, func() bool { return l.ring.sqWake() != 0 }, 5*time.Second, 10*time.Millisecond, "the poll thread did not go to sleep")
	}
	_, body := c.Get("/index.html")
	require.Equal(t, index, body)
	require.NoError(t, srv.Stop())
	l := lp.Load()
	assert.NotZero(t, l.stats.Own[ownSQEs])
	assert.Nil(t, l.ring.waitMem, "unmapped at teardown")
	// Read on the loop's ring before it was torn down: Setup's hook.
	var regRing, waitReg, sqpoll bool
	b = New()
	b.Features = Features{RegRing: true, WaitRegion: true, SQPoll: true}
	b.onSetup = func(l *loop) {
		regRing, waitReg, sqpoll = l.ring.enterFlags != 0 && l.ring.enterFd != l.ring.fd, l.wait.reg != nil && l.catch.reg != nil, l.ring.sqpoll
	}
	srv = servertest.Start(t, b, core.Config{Dir: dir}, 1)
	require.NoError(t, srv.Stop())
	assert.True(t, regRing, "entered by the registered index")
	assert.True(t, waitReg, "waits read from the registered region")
	assert.True(t, sqpoll, "a SQPOLL ring")
}

// TestFeatureRefusals: what cannot work is refused by Probe, so that
// --backend=auto falls back, with the reason.
func TestFeatureRefusals(t *testing.T) {
	if err := New().Probe(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		b    Backend
		says string
	}{
		{b: Backend{Features: Features{SQPoll: true, SQPollCPU: 100000}}, says: "CPU 100000 is not one this process may run on"},
		{b: Backend{Features: Features{SQPoll: true}, Wait: WaitSpin}, says: "--uring-sqpoll excludes --uring-wait=spin"},
	} {
		err := tc.b.Probe()
		require.Error(t, err)
		assert.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
		assert.Contains(t, err.Error(), tc.says)
	}
}

// TestNAPI: with --uring-napi the ring is registered for busy polling
// with dynamic tracking and the timeout asked for, as the ring's fdinfo
// shows (Linux 6.13 prints it; 6.9-6.12 print nothing of it), and
// requests are answered through the waits it changes. Loopback has no
// NAPI context, so nothing is polled here (scripts/veth.sh shows the
// polls over a veth pair).
func TestNAPI(t *testing.T) {
	dir, index, big := docroot(t, 200<<10)
	for _, tc := range []struct {
		f    Features
		want []string // lines of the ring's fdinfo
	}{
		{f: Features{}, want: []string{"NAPI:\tdisabled"}},
		{f: Features{NAPI: true, NAPIBusyPollUsec: 50}, want: []string{"NAPI:\tenabled", "napi tracking:\tdynamic", "napi_busy_poll_dt:\t50000"}},
		{f: Features{NAPI: true}, want: []string{"NAPI:\tenabled", "napi_busy_poll_dt:\t0"}},
		{f: Features{NAPI: true, NAPIBusyPollUsec: 20, SQPoll: true}, want: []string{"NAPI:\tenabled", "napi_busy_poll_dt:\t20000"}},
	} {
		t.Run(fmt.Sprintf("napi=%v,usec=%d,sqpoll=%v", tc.f.NAPI, tc.f.NAPIBusyPollUsec, tc.f.SQPoll), func(t *testing.T) {
			var fdinfo atomic.Value
			b := New()
			b.Features = tc.f
			if err := b.Probe(); err != nil {
				t.Skip(err)
			}
			b.onSetup = func(l *loop) {
				info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", l.ring.fd))
				if err == nil {
					fdinfo.Store(string(info))
				}
			}
			srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
			c := servertest.Dial(t, srv.Addr)
			for range 3 {
				_, body := c.Get("/index.html")
				require.Equal(t, index, body)
				_, body = c.Get("/big.bin")
				require.True(t, bytes.Equal(big, body))
			}
			require.NoError(t, srv.Stop())
			info, _ := fdinfo.Load().(string)
			if !strings.Contains(info, "NAPI:") {
				t.Logf("this kernel's io_uring fdinfo shows no NAPI state (Linux 6.13 does): registration checked by Probe only")
				return
			}
			for _, w := range tc.want {
				assert.Contains(t, info, w+"\n")
			}
		})
	}
}

// TestFixedFiles: with --uring-fixed-files a connection's socket is a
// direct descriptor, not an fd of the process: n keep-alive connections,
// each answered twice pipelined, grow /proc/self/fd by their n client ends
// only (by 2n with the flag off, the control). Large file bodies
// (sendfile and splice, which install an fd for the connection that sends
// one; read, which needs none), keep-alive, Connection: close, a bad
// request then a good one, and the access log's remote address all still
// work, and nothing is left in flight.
func TestFixedFiles(t *testing.T) {
	dir, index, big := docroot(t, 3<<20)
	for _, tc := range []struct {
		name     string
		fixed    bool
		body     BodyMode
		oneShot  bool // --uring-multishot=off: one-shot accepts into the table
		installs bool // the large body takes an installed fd
	}{
		{name: "off"},
		{name: "sendfile", fixed: true, installs: true},
		{name: "splice", fixed: true, body: BodySplice, installs: true},
		{name: "read", fixed: true, body: BodyRead},
		{name: "oneshot", fixed: true, oneShot: true, installs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Body = tc.body
			b.OneShot = tc.oneShot
			b.Features.FixedFiles = tc.fixed
			srv, lp := startWith(t, b, dir)
			warm := servertest.Dial(t, srv.Addr) // the cache's fd of index.html opens before the count
			_, body := warm.Get("/index.html")
			require.Equal(t, index, body)
			closeAndWait(t, warm) // its server end goes
			before := openFDs(t)
			const n = 40
			var cs []*servertest.Client
			for range n {
				c := servertest.Dial(t, srv.Addr)
				_, err := io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\nGET /index.html?2 HTTP/1.1\r\nHost: t\r\n\r\n")
				require.NoError(t, err)
				for range 2 {
					resp, body := c.ReadResponse("GET")
					require.Equal(t, 200, resp.StatusCode)
					require.Equal(t, index, body)
				}
				cs = append(cs, c)
			}
			grew := openFDs(t) - before
			if tc.fixed {
				assert.LessOrEqual(t, grew, n+2, "%d connections: the server's ends are not fds", n)
			} else {
				assert.GreaterOrEqual(t, grew, 2*n, "the control: both ends are fds")
			}
			for _, c := range cs { // keep-alive
				_, body := c.Get("/index.html")
				require.Equal(t, index, body)
			}
			for range 2 {
				resp, body := cs[0].Get("/big.bin")
				require.Equal(t, 200, resp.StatusCode)
				require.True(t, bytes.Equal(big, body), "big.bin: %d bytes of %d, or different", len(body), len(big))
			}
			_, body = cs[0].Get("/index.html")
			require.Equal(t, index, body, "keep-alive after the large bodies")

			closesAndRefuses(t, srv.Addr, index)
			for _, c := range cs {
				c.Close()
			}
			require.NoError(t, srv.Stop())
			l := lp.Load()
			assert.Zero(t, l.inflight, "requests left in flight")
			_, direct := l.sock.(*directSockets)
			assert.Equal(t, tc.fixed, direct)
			assert.Equal(t, tc.installs, l.stats.Own[ownFdInstalls] > 0, "fds installed: %d", l.stats.Own[ownFdInstalls])
			assert.Zero(t, l.stats.Own[ownFdInstallFails])
		})
	}
}

// closesAndRefuses checks a Connection: close request, then a bad
// request and a good one on new connections.
func closesAndRefuses(t *testing.T, addr string, index []byte) {
	c := servertest.Dial(t, addr)
	io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
	all, err := io.ReadAll(c.R)
	require.NoError(t, err, "Connection: close ends in EOF")
	require.True(t, bytes.HasSuffix(all, index))

	c = servertest.Dial(t, addr)
	io.WriteString(c, "GET /index.html HTTP/1.1\r\n\r\n") // no Host
	all, _ = io.ReadAll(c.R)
	require.True(t, strings.HasPrefix(string(all), "HTTP/1.1 400 "), "%q", all)
	c.Close() // else the server lingers for its FIN until Stop's deadline
	c = servertest.Dial(t, addr)
	resp, body := c.Get("/index.html")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, index, body)
}

// TestNAPIRefused: a kernel that cannot busy-poll refuses --uring-napi
// with the reason, wrapped in errors.ErrUnsupported, so that
// --backend=auto falls back to epoll: before Linux 6.9 the register
// opcode is unknown (EINVAL); a kernel without CONFIG_NET_RX_BUSY_POLL
// has it but says EOPNOTSUPP.
func TestNAPIRefused(t *testing.T) {
	for _, tc := range []struct {
		errno unix.Errno
		says  string
	}{
		{errno: unix.EINVAL, says: "--uring-napi needs Linux 6.9"},
		{errno: unix.EOPNOTSUPP, says: "built without busy polling (CONFIG_NET_RX_BUSY_POLL)"},
	} {
		err := napiRefused(tc.errno)
		assert.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
		assert.Contains(t, err.Error(), tc.says)
		assert.Contains(t, err.Error(), "IORING_REGISTER_NAPI")
	}
}

// TestFixedFilesAddrs: with an access log (core.Server.WantsAddrs) each
// direct descriptor gets an fd for getpeername and getsockname, closed at
// once: the log has the client's address, and the fds do not stay.
func TestFixedFilesAddrs(t *testing.T) {
	dir, index, _ := docroot(t, 1)
	b := New()
	b.Features.FixedFiles = true
	if err := b.Probe(); err != nil {
		t.Skip(err)
	}
	var log servertest.Buffer
	var lp atomic.Pointer[loop]
	b.onSetup = func(l *loop) { lp.Store(l) }
	srv := servertest.Start(t, b, core.Config{Dir: dir, AccessLog: &log}, 1)
	warm := servertest.Dial(t, srv.Addr) // the cache's fd of index.html opens before the count
	warm.Get("/index.html")
	closeAndWait(t, warm)
	before := openFDs(t)
	const n = 10
	for range n {
		c := servertest.Dial(t, srv.Addr)
		_, body := c.Get("/index.html?addr")
		require.Equal(t, index, body)
		defer c.Close()
	}
	assert.LessOrEqual(t, openFDs(t)-before, n+2, "the installed fds were closed")
	require.NoError(t, srv.Stop())
	lines := 0
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "/index.html?addr") {
			lines++
			assert.True(t, strings.HasPrefix(line, "127.0.0.1 "), "%q", line)
		}
	}
	assert.Equal(t, n, lines)
	assert.GreaterOrEqual(t, lp.Load().stats.Own[ownFdInstalls], int64(n))
}

// TestFixedFilesRefusals: what --uring-fixed-files needs and this kernel
// lacks is refused with the version that has it, or, for a table larger
// than the kernel takes, with the limit to raise; each wraps
// errors.ErrUnsupported, so that --backend=auto falls back to epoll.
func TestFixedFilesRefusals(t *testing.T) {
	r := testRing(t)
	err := r.setUpFixedFiles(maxFixedFiles + 1) // a real refusal: EMFILE
	require.Error(t, err)
	assert.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
	assert.Contains(t, err.Error(), "raise it, or lower --max-conns")
	for _, tc := range []struct {
		what  string
		errno unix.Errno
		says  string
	}{
		{what: "IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE", errno: unix.EINVAL, says: "--uring-fixed-files needs Linux 5.19"},
		{what: "IORING_OP_FIXED_FD_INSTALL", errno: unix.EINVAL, says: "io_uring lacks opcode IORING_OP_FIXED_FD_INSTALL: --uring-fixed-files needs Linux 6.8"},
	} {
		err := refuseFixedFiles(tc.what, tc.errno)
		assert.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
		assert.Contains(t, err.Error(), tc.says)
	}
	assert.LessOrEqual(t, tableSize(1<<30), uint32(maxFixedFiles), "no larger than the kernel takes")
	var rl unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &rl))
	assert.Equal(t, uint32(min(10+fixedSlack, rl.Cur)), tableSize(10), "--max-conns and the slack, within the fd limit")
}

// closeAndWait half-closes c and reads to the end of the stream: the
// server saw the client's FIN and closed its side, so that its fd is gone
// from the process's table before a test counts them.
func closeAndWait(t *testing.T, c *servertest.Client) {
	t.Helper()
	require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
	rest, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Empty(t, rest)
	c.Close()
}
