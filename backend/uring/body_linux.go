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
//     while the chain is planned (sendfile_linux.go): nothing is queued
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
	bs.sendfiles.st = st
	bs.chunks = chunks{sys: l.sys, st: st, budget: budget, ps: &bs.pipes, floor: -1}
	bs.pipes = pipes{budget: budget, st: st, sys: l.sys, fallback: &bs.chunks, chunks: &bs.chunks}
	bs.first = &bs.sendfiles
	switch cfg.Body {
	case BodySplice:
		// A body that finds the budget spent is sent from its File's
		// mapping where resident (the fallback's cheaper half).
		bs.first, bs.pipes.fallback = &bs.pipes, &bs.views
		bs.views = views{st: st}
	case BodyRead:
		bs.first = readBodies{&bs.chunks}
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
	l.reserve(mem + p.poll + p.steps)
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
		e := l.sqe()
		if o.Vec != nil {
			e.PrepareSendMsg(cn.fd, cn.msgFor(heapMem(o), o.Vec), uint32(flags)) // io_uring_prep_sendmsg(3)
		} else {
			cn.vec.pins.cover(cn, heapMem(o))                              // Mem is the Conn's out from sent on
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
	if cn.closing() || cn.c.Out().N == 0 {
		l.bodies.done(cn)
	}
}

// done: cn's file body is out, or never will be. The pipes count the
// bodies that went through them in the budget every loop shares; nothing
// else counts bodies.
func (bs *bodies) done(cn *conn) {
	if bs.pipes.counted > 0 {
		bs.pipes.bodyDone(cn)
	}
}

// heapMem is o.Mem when it is on the Go heap, to be pinned, and nil when
// the core lent it from memory mapped outside the heap (core.Out.Mapped).
func heapMem(o core.Out) []byte {
	if o.Mapped {
		return nil
	}
	return o.Mem
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

// sent forgets a SENDMSG's iovecs once its CQE came: the bodies may be
// unmapped once Sent has them, and no pointer into them stays on the Go
// heap.
func (sv *sendVec) sent() {
	if len(sv.iov) > 0 {
		clear(sv.iov)
		sv.iov, sv.msg = sv.iov[:0], syscall.Msghdr{}
	}
}

// onSend: the Mem send's CQE. Linked CQEs arrive in the order of their
// SQEs, so Sent sees the header's bytes before any of the body's.
func (l *loop) onSend(cn *conn, res int32, _ uint32) {
	cn.vec.sent()
	switch {
	case res > 0 && !cn.closing():
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
	if !cn.closing() {
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
	if !short || b.retried || cn.closing() {
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
	case cn.closing():
	default:
		cn.body.retried = false
		cn.c.Sent(int64(res))
	}
	l.chainStep(cn)
}
