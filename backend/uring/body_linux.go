package uring

import (
	"syscall"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// A response goes out as one send chain per call of send, linked
// (IOSQE_IO_LINK) so that it goes in with the pass's one enter and runs in
// order:
//
//	[send Mem] → [poll POLLOUT] → [body in → body out]
//
// Mem is what core.Out holds in memory: the headers, and the bodies
// small enough to be copied with them or referenced from the cache
// (SENDMSG of Out.Vec). A file body goes, by default, part by part:
//
//   - a part in the page cache by sendfile(2), made on the loop's thread
//     while the chain is planned (sendfiles, below): nothing is queued
//     for it but a poll when the socket is full;
//   - a cold part by READ into a chunk and SEND of the chunk, both on the
//     ring (chunk_linux.go): the loop never waits for the disk.
//
// A planner chooses, at each chain, how the body's next part goes; a
// carrier (chunks; pipes, splice_linux.go) is what a chain that queues
// body steps goes through, and the connection holds it (fileBody.via)
// from that chain until the carrier gives it back. bodies.init is the one
// place that picks the planner a body tries first from Backend.Body; the
// ablations (--uring-body=splice, read, view, view-zc) live in
// splice_linux.go and variant_view_linux.go.
//
// A short send or read breaks the link and cancels the rest. The chain's
// last CQE then drives the connection again, which resumes from Out at
// whatever offset Sent has reached.

// A carrier takes a file body from its file to the socket, a chain at a
// time. The carriers are the loop's own (bodies), so holding one boxes
// nothing.
type carrier interface {
	planner
	// queue queues the steps plan promised, from file offset off, n bytes
	// of the body being left.
	queue(l *loop, cn *conn, fd int, off, n int64)
	// in and out account for a body-in and a body-out CQE (never
	// -ECANCELED); false: the connection must be closed.
	in(cn *conn, res int32) bool
	out(cn *conn, res int32) bool
	// ended: the chain's last CQE came; the carrier is given back once
	// the body no longer needs it.
	ended(cn *conn)
	// release gives cn's pipe or chunk back.
	release(cn *conn)
}

// A planner readies the body's part of the next chain: n bytes of the
// body are left, and header says whether the chain sends Out().Mem
// first. It may take a carrier (cn.body.via), send a part itself
// (sendfiles), or close the connection.
type planner interface {
	plan(l *loop, cn *conn, n int64, header bool) chainPlan
}

// chainPlan is a planner's answer: how many steps the chain has beside
// its Mem send, or that nothing is queued.
type chainPlan struct {
	poll  uint32 // 1: wait for POLLOUT before the body steps
	steps uint32 // body SQEs the carrier queues: 0, 1 or 2
	// none: nothing is queued, because the connection was closed or
	// waits (in line for a pipe). again: a part went whole while it was
	// planned, and nothing was queued for it: the Conn is asked what is
	// next at once.
	none, again bool
}

var (
	planNone  = chainPlan{none: true}
	planAgain = chainPlan{again: true}
	planPoll  = chainPlan{poll: 1}
)

// fileBody is a connection's file body under way. Its fields are owned by
// the loop's thread, like the rest of conn.
type fileBody struct {
	via     carrier // the carrier held, nil none
	idx     int32   // its pipe or chunk, when via is set; -1: a chunk's view send
	asked   int32   // bytes asked of the body-in step
	retried bool    // the last body-in came up short and is being tried again
}

// release gives back the carrier's pipe or chunk.
func (cn *conn) releaseBody() {
	if v := cn.body.via; v != nil {
		v.release(cn)
		cn.body.via = nil
	}
}

// bodies are the loop's senders, planners and carriers.
type bodies struct {
	// send starts a response's chain (drive): (*loop).send, or with
	// --uring-send-zc sendZC, which tries a zero-copy send first
	// (sendzc_linux.go).
	send func(l *loop, cn *conn) (again bool)
	// linkHeader queues a chain's Mem send with body steps linked behind
	// it and says how many CQEs it has coming: linkHeader, or with
	// --uring-skip-send linkSkipped (skipsend_linux.go).
	linkHeader func(l *loop, e *giouring.SubmissionQueueEntry, cn *conn, o core.Out, tail uint32) uint32
	// closing is told of each connection that closes: nothing to do,
	// or with zero-copy sends abortZC (sendzc_linux.go).
	closing func(l *loop, cn *conn)
	// sysFd, when set (--uring-fixed-files: directSockets.sysFd,
	// fixedfd_linux.go), is the fd a sendfile(2) on cn's socket takes;
	// nil: conn.fd, the process's fd.
	sysFd func(l *loop, cn *conn) (fd int, wait bool)

	first     planner // what a body that holds no carrier tries: by Backend.Body
	sendfiles sendfiles
	chunks    chunks
	pipes     pipes // splice_linux.go: the cold window's, and --uring-body=splice
	views     views // variant_view_linux.go: --uring-body=view and view-zc
}

// init is the one selector of how responses go: by default one send of
// Mem and sendfile (sendfiles) for a file body; --uring-send-zc and
// --uring-skip-send replace a sender, each --uring-body ablation the
// planner a body tries first, and the pipes' fallback.
func (bs *bodies) init(cfg *Backend, budget *pipeBudget, st *core.Stats, l *loop) {
	bs.send, bs.linkHeader, bs.closing = (*loop).send, (*loop).linkHeader, func(*loop, *conn) {}
	if cfg.Features.SendZC > 0 {
		bs.send = (*loop).sendZC
	}
	if cfg.zeroCopy() {
		bs.closing = (*loop).abortZC
	}
	if cfg.Features.SkipSend {
		bs.linkHeader = (*loop).linkSkipped
	}
	if cfg.Features.FixedFiles {
		bs.sysFd = l.sock.sysFd
	}
	bs.sendfiles.st = st
	bs.chunks = chunks{sys: l.sys, st: st}
	bs.pipes = pipes{budget: budget, st: st, sys: l.sys, fallback: &bs.chunks}
	bs.first = &bs.sendfiles
	switch cfg.Body {
	case BodySplice:
		// A body that finds the budget spent is sent from its File's
		// mapping where resident (the fallback's cheaper half).
		bs.first, bs.pipes.fallback = &bs.pipes, &bs.views
		bs.views = views{st: st}
	case BodyRead:
		bs.first = &bs.chunks
	case BodyView, BodyViewZC:
		bs.views = views{st: st, zc: cfg.Body == BodyViewZC}
		bs.first = &bs.views
	}
}

// trim runs once a second: pipes and chunks that no connection took since
// the last call are closed or unmapped.
func (bs *bodies) trim() {
	bs.pipes.trim()
	bs.chunks.trim()
}

// close closes every pipe and unmaps every chunk; nothing may be in
// flight.
func (bs *bodies) close() {
	bs.pipes.close()
	bs.chunks.close()
}

// send starts the chain for what Out says. It reports true when it queued
// nothing because a part went whole (chainPlan.again): the Conn is then
// asked again at once.
func (l *loop) send(cn *conn) (again bool) {
	o := cn.c.Out()
	var mem uint32
	if len(o.Mem) > 0 || o.Vec != nil {
		mem = 1
	}
	var p chainPlan
	if o.N > 0 {
		pl := l.bodies.first
		if cn.body.via != nil {
			pl = cn.body.via
		}
		if p = pl.plan(l, cn, o.N, mem > 0); p.none || p.again {
			return p.again
		}
	}
	if n := mem + p.poll + p.steps; n > 1 {
		l.reserve(n) // a linked chain goes in whole; one SQE, sqe makes room for
	}
	if mem > 0 {
		flags := unix.MSG_NOSIGNAL
		if o.N > 0 {
			// MSG_WAITALL: without it a short send completes "successfully"
			// and the linked body would follow a half-sent header (seen in
			// the soak: a body's bytes in the middle of the previous
			// response). With it io_uring retries until all is sent, or
			// fails the link.
			flags |= unix.MSG_MORE | unix.MSG_WAITALL
		}
		// The out array to pin: Mem's, on the Go heap, unless the core
		// lent it from memory mapped outside the heap (core.Out.Mapped).
		heap := o.Mem
		if o.Mapped {
			heap = nil
		}
		e := l.sqe()
		if o.Vec != nil {
			e.PrepareSendMsg(cn.fd, cn.msgFor(heap, o.Vec), uint32(flags)) // io_uring_prep_sendmsg(3)
		} else {
			cn.vec.pins.cover(cn, heap)                                    // Mem is the Conn's out from sent on
			e.PrepareSend(cn.fd, addrOf(o.Mem), uint32(len(o.Mem)), flags) // io_uring_prep_send(3)
		}
		if p.poll+p.steps == 0 {
			l.queue(e, opSend, cn)
		} else {
			mem = l.bodies.linkHeader(l, e, cn, o, p.poll+p.steps)
		}
	}
	if p.poll > 0 {
		e := l.sqe()
		e.PreparePollAdd(cn.fd, unix.POLLOUT) // io_uring_prep_poll_add(3)
		if p.steps > 0 {
			e.Flags = giouring.SqeIOLink
		}
		l.queue(e, opBodyPoll, cn)
	}
	if p.steps > 0 {
		cn.body.via.queue(l, cn, o.File.Fd(), o.Off, o.N)
	}
	cn.chain = int32(mem + p.poll + p.steps)
	return false
}

// linkHeader queues a chain's Mem send e with tail steps linked behind
// it, and says how many CQEs it has coming: one.
func (l *loop) linkHeader(e *giouring.SubmissionQueueEntry, cn *conn, _ core.Out, _ uint32) uint32 {
	e.Flags = giouring.SqeIOLink
	l.queue(e, opSend, cn)
	return 1
}

// chainStep accounts for one CQE of the chain; the last one tells the
// carrier, which gives its pipe or chunk back once the body no longer
// needs it.
func (l *loop) chainStep(cn *conn) {
	if cn.chain--; cn.chain > 0 {
		return
	}
	if v := cn.body.via; v != nil {
		v.ended(cn)
	}
	// The body is out, or never will be. The pipes count the bodies that
	// went through them in the budget every loop shares; nothing else
	// counts bodies.
	if l.bodies.pipes.counted > 0 && (cn.life >= lifeClosing || cn.c.Out().N == 0) {
		l.bodies.pipes.bodyDone(cn)
	}
}

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
	o := cn.c.Out()
	switch cached, known := l.res.Body(o.File, o.Off, k, l.pass); { // residency's answer
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
	fd := cn.fd
	if l.bodies.sysFd != nil {
		var wait bool
		switch fd, wait = l.bodies.sysFd(l, cn); {
		case wait:
			return planNone // fixedfd_linux.go: the fd is on its way, and its CQE drives cn
		case fd < 0:
			return l.bodies.chunks.planRead(l, cn, n) // none to be had
		}
	}
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

// msgFor points cn's msghdr and iovecs at vec (core.Out.Vec: headers in
// the Conn's out, bodies referenced from the cache) for one SENDMSG. Of
// what the kernel reads, the conn (holding the msghdr), the iovec array
// and the out array, of which mem (Out.Mem) is a slice to its end, are on
// the Go heap, and cn.vec.pins pins them (heldPins), but an out array the
// core lent from its mapped slab (mem nil); the bodies are mapped
// outside it (core.Out says so; a listing's too). The kernel owns all of it
// from the SQE to the CQE, and the Conn keeps the bodies referenced until
// Sent. giouring's PrepareSendMsg is liburing's io_uring_prep_sendmsg(3):
// addr = msg, len = 1, msg_flags = flags.
func (cn *conn) msgFor(mem []byte, vec [][]byte) *syscall.Msghdr {
	sv := &cn.vec
	sv.iov = sv.iov[:0]
	for _, v := range vec {
		sv.iov = append(sv.iov, syscall.Iovec{Base: &v[0], Len: uint64(len(v))})
	}
	sv.pins.cover(cn, mem)
	sv.msg = syscall.Msghdr{Iov: &sv.iov[0], Iovlen: uint64(len(sv.iov))}
	return &sv.msg
}

// sent forgets a SENDMSG's iovecs once its CQE came (onSend, when there
// are some): the bodies may be unmapped once Sent has them, and no
// pointer into them stays on the Go heap.
func (sv *sendVec) sent() {
	clear(sv.iov)
	sv.iov, sv.msg = sv.iov[:0], syscall.Msghdr{}
}

// onSend: the Mem send's CQE. Linked CQEs arrive in the order of their
// SQEs, so Sent sees the header's bytes before any of the body's.
func (l *loop) onSend(cn *conn, res int32, _ uint32) {
	if len(cn.vec.iov) > 0 {
		cn.vec.sent()
	}
	switch {
	case res > 0 && cn.life < lifeClosing:
		cn.c.Sent(int64(res))
	case res > 0:
	default:
		l.close(cn) // EPIPE, ECONNRESET; 0 would mean no progress ever
	}
	l.chainStep(cn)
}

// onBodyIn: the body-in step's CQE. Until it came the connection waited
// for the file system (core.Conn.BodyWait), which ends now: a read on a
// mount that hangs is held to --fs-timeout, when everySecond closes the
// connection (its header is out; the close shuts the socket down at once
// and waits for this CQE before the slot is reused), and the body's SEND
// is held to the write timeout from here.
func (l *loop) onBodyIn(cn *conn, res int32, _ uint32) {
	if cn.life < lifeClosing {
		cn.c.Waited()
	}
	switch {
	case res == -int32(unix.ECANCELED):
		// The Mem send before it came up short.
	case l.retryBodyIn(cn, res):
	case !cn.body.via.in(cn, res):
		// A short read, or no bytes at all: the file shrank since it was
		// opened, and the promised length cannot be sent; only closing
		// tells the client.
		l.close(cn)
	}
	l.chainStep(cn)
}

// retryBodyIn decides that a body-in that came up short is tried again,
// once per step without progress: the linked body-out is cancelled, so
// nothing was sent, and the chain's last CQE drives the connection again
// from the offset Sent has reached. The files are opened O_NONBLOCK; on a
// file system without FMODE_NOWAIT (FUSE, NFS, 9p) a kernel may then
// complete the READ with -EAGAIN instead of running it on a worker, so
// the flag is cleared on the file first (a regular file: it changes
// nothing else). A read that is short (by chunk: the file system
// returned less than asked, not only at a shrunk file's end) is simply
// tried again. Only a second short read in a row closes the connection
// (the file shrank; only closing tells the client).
func (l *loop) retryBodyIn(cn *conn, res int32) bool {
	b := &cn.body
	short := res == -int32(unix.EAGAIN) || b.via == &l.bodies.chunks && res >= 0 && res < b.asked
	if !short || b.retried || cn.life >= lifeClosing {
		return false
	}
	b.retried = true
	if res == -int32(unix.EAGAIN) {
		if err := l.sys.SetBlocking(cn.c.Out().File.Fd()); err != nil {
			return false
		}
	}
	return true
}

// onBodyPoll: the socket has room (or an error, which the step linked
// behind the poll will meet).
func (l *loop) onBodyPoll(cn *conn, res int32, _ uint32) {
	if res < 0 && res != -int32(unix.ECANCELED) {
		l.close(cn)
	}
	l.chainStep(cn)
}

func (l *loop) onBodyOut(cn *conn, res int32, _ uint32) {
	switch {
	case res == -int32(unix.ECANCELED):
	case !cn.body.via.out(cn, res):
		l.close(cn)
	case res <= 0:
		// The socket took nothing (a splice's -EAGAIN): the carrier
		// waits for room.
	case cn.life >= lifeClosing:
	default:
		cn.body.retried = false
		cn.c.Sent(int64(res))
	}
	l.chainStep(cn)
}
