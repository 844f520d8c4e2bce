//go:build linux

package uring

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pawelgaczynski/giouring"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestPipeReadWaits checks the kernel behaviour cgi_linux.go relies on:
// IORING_OP_READ of an empty non-blocking pipe waits for data (io_uring
// polls the pipe) instead of completing with -EAGAIN, can be cancelled,
// and reports end of file as 0.
func TestPipeReadWaits(t *testing.T) {
	r := testRing(t)
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK))
	defer unix.Close(p[0])
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(buf)
	read := func(ud uint64) {
		e := r.GetSQE()
		*e = giouring.SubmissionQueueEntry{}
		e.PrepareRead(p[0], addrOf(buf), uint32(len(buf)), 0)
		e.UserData = ud
		_, errno := r.enter(r.v.flushSQ(), 0, giouring.EnterGetEvents, nil, false)
		require.Zero(t, errno)
	}

	read(1)
	// A NOP behind it as a fence: a read that completed at once (-EAGAIN)
	// did so while it was issued, before the NOP's completion. One that
	// failed later, from a worker, fails the check of its completion below.
	e := r.GetSQE()
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareNop()
	e.UserData = 9
	c, err := r.waitOne()
	require.NoError(t, err)
	require.Equal(t, uint64(9), c.ud, "the read of an empty O_NONBLOCK pipe completed at once (-EAGAIN?): %+v", c)
	require.Zero(t, r.CQReady(), "the read of an empty O_NONBLOCK pipe completed at once (-EAGAIN?)")
	_, err = unix.Write(p[1], []byte("hello"))
	require.NoError(t, err)
	c, err = r.waitOne()
	require.NoError(t, err)
	assert.Equal(t, cqeCopy{ud: 1, res: 5}, c)

	read(2)
	e = r.GetSQE()
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareCancel64(2, 0)
	e.UserData = 3
	got := map[uint64]int32{}
	for range 2 {
		c, err := r.waitOne()
		require.NoError(t, err)
		got[c.ud] = c.res
	}
	assert.Equal(t, map[uint64]int32{2: -int32(unix.ECANCELED), 3: 0}, got)

	unix.Close(p[1])
	read(4)
	c, err = r.waitOne()
	require.NoError(t, err)
	assert.Equal(t, cqeCopy{ud: 4, res: 0}, c, "end of file")
}

// TestResetPollWaits checks the kernel behaviour watchReset relies on:
// after the peer's FIN, a poll for POLLERR alone completes at once (the
// kernel adds POLLRDHUP to every io_uring poll's mask), while a multishot
// one stays armed and reports POLLERR once a write to the closed peer has
// drawn its reset.
func TestResetPollWaits(t *testing.T) {
	r := testRing(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	sc, err := ln.Accept()
	require.NoError(t, err)
	defer sc.Close()
	f, err := sc.(*net.TCPConn).File()
	require.NoError(t, err)
	defer f.Close()
	fd := int(f.Fd())
	require.NoError(t, client.Close()) // a FIN, nothing unread
	var b [1]byte
	require.Eventually(t, func() bool { n, err := unix.Read(fd, b[:]); return n == 0 && err == nil }, time.Second, time.Millisecond)

	poll := func(ud uint64, multi bool) {
		e := r.GetSQE()
		*e = giouring.SubmissionQueueEntry{}
		if multi {
			e.PreparePollMultishot(fd, unix.POLLERR)
		} else {
			e.PreparePollAdd(fd, unix.POLLERR)
		}
		e.UserData = ud
	}
	poll(1, false)
	c, err := r.waitOne()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), c.ud)
	assert.Equal(t, int32(unix.POLLRDHUP), c.res, "a one-shot poll ends at once after a FIN")

	poll(2, true)
	c, err = r.waitOne()
	require.NoError(t, err)
	assert.Equal(t, int32(unix.POLLRDHUP), c.res)
	require.NotZero(t, c.flags&giouring.CQEFMore, "still armed")
	_, err = unix.Write(fd, []byte("HTTP/1.1 100 Continue\r\n\r\n"))
	require.NoError(t, err)
	for c.res&unix.POLLERR == 0 {
		c, err = r.waitOne()
		require.NoError(t, err, "no POLLERR after the peer's reset")
	}
	assert.Equal(t, uint64(2), c.ud)
}

// TestCGIWaitDoesNotSpin: while a script sleeps, and while a client
// reads nothing of a script's endless output, the loop sleeps in
// io_uring_enter instead of spinning.
func TestCGIWaitDoesNotSpin(t *testing.T) {
	dir, _, _ := docroot(t, 1)
	cgi := servertest.Scripts(t, map[string]string{
		"sleep": "sleep 2\nprintf 'Content-Type: text/plain\\n\\ndone\\n'\n",
		"yes":   "printf 'Content-Type: text/plain\\n\\n'\nexec yes twinloop\n",
	})
	srv := servertest.Start(t, New(), core.Config{Dir: dir, CGIDir: cgi}, 1)
	sleeper := servertest.Dial(t, srv.Addr)
	stalled := servertest.Dial(t, srv.Addr)
	require.NoError(t, stalled.Conn.(*net.TCPConn).SetReadBuffer(4096))
	yes := "GET /cgi-bin/yes HTTP/1.1\r\nHost: t\r\n\r\n"
	sleep := "GET /cgi-bin/sleep HTTP/1.1\r\nHost: t\r\n\r\n"
	fmt.Fprint(stalled, yes)
	fmt.Fprint(sleeper, sleep)
	// Both requests taken, as the next publication of the counters shows;
	// then a window of a second, the span measured, not a wait for an event.
	before := srv.WaitStats(func(st *core.Stats) bool {
		return st.BytesIn >= uint64(len(yes)+len(sleep))
	}).Syscalls[core.SysUringEnter]
	time.Sleep(1100 * time.Millisecond)
	after := srv.Core.Stats().Syscalls[core.SysUringEnter]
	// A loop with nothing to do enters about once a second (the
	// timeouts); a spinning one, hundreds of thousands of times.
	t.Logf("%d io_uring_enter in a second", after-before)
	assert.Less(t, after-before, uint64(20), "io_uring_enter calls in a second of waiting")

	sleeper.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(sleeper.R, nil)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
}

// TestCGIPipesLeaveBodiesTheirShare: running scripts' pipes are counted in
// a share of the pipe budget of their own, bounded by Config.CGIMax, so
// that silent scripts never spend the pipes file bodies need (issue 19:
// about 384 silent scripts put every large body of every loop on the
// read + send fallback, at 3.7 times the CPU). Here the scripts' pipes
// alone would take the whole budget; a large body still goes by splice.
func TestCGIPipesLeaveBodiesTheirShare(t *testing.T) {
	const scripts = 16
	dir, _, big := docroot(t, 1<<20)
	cgi := servertest.Scripts(t, map[string]string{"silent": "echo $$ > $QUERY_STRING.pid\nexec sleep 30\n"})
	b := New()
	b.Body = BodySplice // by sendfile, no body needs a pipe
	b.PipeBudget = scripts * cgiPipePages
	srv := servertest.Start(t, b, core.Config{Dir: dir, CGIDir: cgi, CGIMax: scripts, ShutdownTimeout: 100 * time.Millisecond}, 2)
	for i := range scripts {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/silent?%d HTTP/1.1\r\nHost: t\r\n\r\n", i)
		require.Eventually(t, func() bool {
			_, err := os.Stat(filepath.Join(cgi, fmt.Sprintf("%d.pid", i)))
			return err == nil
		}, 10*time.Second, 10*time.Millisecond, "script %d did not start", i)
	}
	c := servertest.Dial(t, srv.Addr)
	for range 3 {
		resp, body := c.Get("/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(big, body), "body differs")
	}
	st := srv.WaitStats(func(st *core.Stats) bool { return st.Requests >= scripts+3 })
	assert.Zero(t, st.Own[ownBodyFallbacks], "bodies sent by read + send beside %d silent scripts", scripts)
}
