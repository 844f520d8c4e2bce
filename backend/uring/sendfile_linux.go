package uring

import (
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// sendfiles is the default planner (body_linux.go): the part of a body
// that is in the page cache goes by sendfile(2), made on the loop's
// thread, and a cold part by READ into a chunk (chunks.planRead), so that
// the loop never waits for the disk.
//
// io_uring has no sendfile opcode, and the splice pair that stands in for
// it (file → pipe → socket) always runs on an io-wq worker: a thread's
// wake-up and switch per pipe-ful. sendfile copies no byte either: the
// page cache's pages go into the socket's buffers by reference
// (results/2026-12-01_uring-sendfile compares the two). On a non-blocking
// socket it moves what the socket takes and returns; the chain then waits
// for room by IORING_OP_POLL_ADD, holding nothing: no pipe, no chunk, no
// memory of the connection's own.
//
// One chain per call: [send Mem, MSG_MORE] when a header goes first
// (the body follows once it is out, at the chain's end), else the
// sendfile, made while the chain is planned, and [poll POLLOUT] while
// the part has bytes left: its CQE drives the connection again, which
// sends the next ones. A part sent whole queues nothing, and drive goes
// on with the Conn at once (planAgain).
//
// The call is raw (Sys.SendfileResident), as the loop's enters are:
// through the runtime (Syscall), a call this long loses its P to sysmon
// and takes it back at a cost (results/2026-12-01_uring-sendfile).
// cachestat counts a page that a read has put in the cache and not yet
// filled, and a sendfile that meets one waits for the disk on the loop's
// thread. So within the server's cold window (core.ColdWindow.LoopMayRead,
// the rule epoll's and poll's loops.Bodies follow too) bodies
// go by splice (pipes.plan, with its own cold fallback), on io_uring's
// workers: on a throttled disk with cold clients, sendfile there kept the
// clients of cached pages waiting for the disk
// (results/2026-12-01_uring-sendfile/cold). A page the kernel drops
// between the check and the call, or one that a read this process did
// not start is filling (another process's), is read or waited for by
// sendfile on the loop's thread.
//
// Without cachestat every part goes by chunk.
type sendfiles struct {
	st *core.Stats
}

// sendfileMax is the most one sendfile(2) is asked for, as epoll's
// sendfileChunk: the kernel stops earlier where the socket is full.
const sendfileMax = 1 << 20

// plan sends the body's next part, or lets the header go first. It holds
// no carrier: a cold part hands the body to the chunks.
func (s *sendfiles) plan(l *loop, cn *conn, n int64, header bool) chainPlan {
	now := l.core.Now()
	if !l.srv.Cold.LoopMayRead(now) {
		// The disk is in play: a range cachestat counts may still be
		// under read (another client's READ of the same file, the
		// kernel's read-ahead behind it), or leave the cache before the
		// call, and a sendfile would wait for it on the loop's thread,
		// with every client of the loop. A splice waits on an io-wq
		// worker instead.
		return l.bodies.pipes.plan(l, cn, n, header)
	}
	if header {
		return chainPlan{}
	}
	k := min(n, sendfileMax)
	switch cached, known := l.residency(cn, k); {
	case !known:
		// No cachestat, or a file that is not local: the part may be
		// cold, and only a READ cannot wait on the loop. Not counted as
		// cold: nothing says it is.
		return l.bodies.chunks.planRead(l, cn, n)
	case !cached:
		s.st.Own[ownBodyCold]++
		l.srv.Cold.Note(now)
		return l.bodies.chunks.planRead(l, cn, n)
	}
	fd, wait := l.sock.sysFd(l, cn)
	switch {
	case wait:
		return planNone // fixedfd_linux.go: the fd is on its way, and its CQE drives cn
	case fd < 0:
		return l.bodies.chunks.planRead(l, cn, n) // none to be had
	}
	o := cn.c.Out()
	off := o.Off
	m, errno := l.sys.SendfileResident(fd, o.File.Fd(), &off, int(k))
	switch {
	case errno == unix.EAGAIN || errno == unix.EINTR:
		return planPoll
	case errno != 0 || m == 0:
		// EPIPE, ECONNRESET; or no bytes: the file shrank since it was
		// opened, and only closing tells the client.
		l.close(cn)
		return planNone
	}
	cn.c.Sent(int64(m))
	if int64(m) < n {
		// More of the part is left: the poll waits for room, and the
		// write timeout runs meanwhile (the Conn has bytes to send).
		return planPoll
	}
	// The part is out. No poll: once the response is whole the Conn
	// waits for nothing (no timeout runs), and a client that does not
	// read would keep a full socket's POLLOUT, and the connection, for
	// ever. drive asks the Conn again at once instead.
	if l.bodies.pipes.counted > 0 && cn.c.Out().N == 0 {
		l.bodies.pipes.bodyDone(cn) // as chainStep
	}
	return planAgain
}

// residency is the loop's cachestat answer for the next n bytes of cn's
// body (loops.Residency.Body: once per pass for a file up to
// loops.WholeMax). known false: it could not tell, and a splice may then
// go ahead (at worst it holds a worker); a sendfile or a send from the
// File's mapping may not, since it could read the disk on the loop.
func (l *loop) residency(cn *conn, n int64) (cached, known bool) {
	o := cn.c.Out()
	return l.res.Body(o.File, o.Off, n, l.pass)
}
