package uring

import (
	"syscall"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// The send chain carries what Out says, linked (IOSQE_IO_LINK) so that it
// goes in with one enter and runs in order:
//
//	[send Mem, MSG_MORE if a body follows] → [poll] → [body in] → [body out]
//
// By default the body's resident parts go by sendfile(2) while the chain
// is planned (sendfile_linux.go); otherwise it goes through a carrier,
// one of two strategies behind one interface:
//
//	pipes (pipe_linux.go, --uring-body=splice, and while the disk is in play):
//	                                   splice file range → pipe, then pipe → socket
//	chunks (chunk_linux.go, cold parts): read file range → chunk, then send chunk
//
// The loop's side (send, the body CQEs, chainStep, free, trim, Teardown)
// goes through the carrier a connection holds (fileBody.via) or the one a
// body tries first (bodies.first), and never asks which one it is.
//
// A chain takes a pipe for no more bytes than the socket's send buffer
// takes now (sockRoom), so the pipe is empty when the chain ends and goes
// back to the loop at once; a socket without room is waited for by poll,
// holding no pipe. Pipes are made on demand within the pipe budget that
// the server's loops share (budget_linux.go). When it is spent, a body
// waits in line while a chain that waits for no client holds a pipe (it
// comes back within a splice), else takes a chunk of its own until the
// body is out (counted in Stats.BodyFallbacks). With Backend.ReadBodies
// every body takes a chunk.
//
// Sockets are non-blocking. IORING_OP_SPLICE always runs on an io_uring
// worker (the kernel punts it, REQ_F_FORCE_ASYNC), and a splice to a
// blocking socket would keep the worker until the client has read the
// lot. To a non-blocking one it moves what the socket takes and returns:
// a short count or -EAGAIN. Should that leave bytes in the pipe, the
// pipe stays with the connection (those bytes are its client's), and the
// next chain waits for room by poll, not on a worker:
//
//	[poll POLLOUT] → [splice pipe → socket]
//
// Each splice reports the bytes the socket took, so Sent, and with it the
// write timeout, follow progress. The chunk path needs no such care: a
// send (MSG_WAITALL) that would block is polled by io_uring itself.
//
// A short send, read or splice breaks the link and cancels the rest. The
// chain's last CQE then drives the connection again, which resumes from
// Out at whatever offset Sent has reached; bytes a short chain left in the
// pipe go out first. See doc.go for the measurements.

// A carrier takes a file body from its file to the socket, a chain at a
// time: *pipes by splice, *chunks by read and send. A connection holds
// one (fileBody.via, with one of its pipes or chunks) from the chain that
// takes it until the carrier gives it back: at a chain's end (ended), or
// when the connection is freed (fileBody.release). The carriers are the
// loop's own (bodies), so holding one boxes nothing.
type carrier interface {
	planner
	// queue queues the steps plan promised, from file offset off.
	queue(l *loop, cn *conn, fd int, off, n int64)
	// in and out account for a body-in and a body-out CQE (never
	// -ECANCELED); false: the connection must be closed.
	in(b *fileBody, res int32) bool
	out(b *fileBody, res int32) bool
	// ended: the chain's last CQE came; the carrier is given back once
	// the body no longer needs it.
	ended(cn *conn)
	// release gives b's pipe or chunk back.
	release(b *fileBody)
}

// A planner readies the body's part of the next chain: a carrier, or
// sendfiles, which sends while it plans and is never held.
type planner interface {
	// plan readies the body's part of the next chain, n bytes of the
	// body being left, header whether the chain sends Out().Mem first:
	// poll says whether it waits for POLLOUT first, steps how many body
	// SQEs follow (0, 1 or 2). It may take a pipe or chunk, or fall back
	// to the other carrier. ok false: nothing is queued, because the
	// connection was closed or waits in line (fileBody.waiting).
	plan(l *loop, cn *conn, n int64, header bool) (poll, steps uint32, ok bool)
}

// fileBody is a connection's file body under way. Its fields are owned by
// the loop's thread, like the rest of conn.
type fileBody struct {
	via     carrier // the carrier held, nil none
	idx     int32   // its pipe or chunk, when via is set
	asked   int32   // bytes asked of the body-in step
	inPipe  int64   // pipes: body bytes in the pipe, not yet in the socket
	pollOut bool    // pipes: the socket was full; wait for POLLOUT first
	polled  bool    // a POLLOUT wait has just ended: the socket has room
	active  bool    // pipes: its chain holds a pipe and waits for no client (pipes.active)
	waiting bool    // pipes: in line for a pipe (pipes.wait)
	late    int64   // body bytes sent before the Mem send's CQE was seen
	retried bool    // the last body-in came up short and is being tried again
	counted bool    // counted in pipeBudget.bodies, from its first chain to its end
	inline  bool    // sendfiles: a part went whole while planned, and nothing was queued
}

// release gives back the carrier's pipe or chunk; a pipe that still holds
// bytes is closed.
func (b *fileBody) release() {
	if b.via != nil {
		b.via.release(b)
		b.via, b.inPipe = nil, 0
	}
}

// bodies are the loop's carriers, and the one place that chooses which a
// body tries first.
type bodies struct {
	first     planner // &sendfiles; &pipes, or &chunks, for the ablations
	sendfiles sendfiles
	pipes     pipes
	chunks    chunks
}

// init picks the carrier a body tries first from the Backend's ablations:
// splice (SpliceBodies), read (ReadBodies), or from the File's view where
// resident, as the pipes' fallback does (ViewBodies); by default sendfile.
func (bs *bodies) init(cfg *Backend, budget *pipeBudget, st *core.Stats, sys loops.Sys) {
	bs.sendfiles.st = st
	bs.pipes = pipes{budget: budget, st: st, sys: sys, fallback: &bs.chunks}
	bs.chunks.sys, bs.chunks.st, bs.chunks.views = sys, st, cfg.Body != BodyRead
	switch cfg.Body {
	case BodyRead, BodyView, BodyViewZC:
		bs.first = &bs.chunks
	case BodySplice:
		bs.first = &bs.pipes
	default:
		bs.first = &bs.sendfiles
	}
}

// trim runs once a second: pipes and chunks that no connection took since
// the last call are closed or unmapped, so that a burst's pipes go back to
// the budget that every loop shares.
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

// send starts the chain for what Out says.
func (l *loop) send(cn *conn) {
	o := cn.c.Out()
	var mem, poll, body uint32
	if len(o.Mem) > 0 || o.Vec != nil {
		mem = 1
	}
	if o.N > 0 {
		if !cn.body.counted {
			cn.body.counted = true
			l.bodies.pipes.budget.bodies.Add(1)
		}
		p := l.bodies.first
		if cn.body.via != nil {
			p = cn.body.via
		}
		var ok bool
		if poll, body, ok = p.plan(l, cn, o.N, mem > 0); !ok {
			return
		}
	}
	l.reserve(mem + poll + body)
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
			e.PrepareSendMsg(cn.fd, cn.msgFor(o.Mem, o.Vec), uint32(flags)) // io_uring_prep_sendmsg(3)
		} else {
			cn.keep.cover(cn, o.Mem)                                       // Mem is the Conn's out from sent on
			e.PrepareSend(cn.fd, addrOf(o.Mem), uint32(len(o.Mem)), flags) // io_uring_prep_send(3)
		}
		if poll+body > 0 {
			e.Flags = giouring.SqeIOLink
		}
		l.queue(e, opSend, cn)
		cn.memSend = true
	}
	if poll > 0 {
		e := l.sqe()
		e.PreparePollAdd(cn.fd, unix.POLLOUT) // io_uring_prep_poll_add(3)
		if body > 0 {
			e.Flags = giouring.SqeIOLink
		}
		l.queue(e, opBodyPoll, cn)
		cn.body.pollOut = false
	}
	if body > 0 {
		cn.body.via.queue(l, cn, o.File.Fd(), o.Off, o.N)
	}
	cn.chain = int(mem + poll + body)
}

// chainStep accounts for one CQE of the chain; the last one tells the
// carrier, which gives its pipe or chunk back
// once the body no longer needs it.
func (l *loop) chainStep(cn *conn) {
	if cn.chain--; cn.chain > 0 {
		return
	}
	if v := cn.body.via; v != nil {
		v.ended(cn)
	}
	if cn.closing || cn.c.Out().N == 0 {
		l.bodyDone(cn)
	}
}

// bodyDone: cn's file body is out, or never will be.
func (l *loop) bodyDone(cn *conn) {
	if cn.body.counted {
		cn.body.counted = false
		l.bodies.pipes.budget.bodies.Add(-1)
	}
}

// msgFor points cn's msghdr and iovecs at vec (core.Out.Vec: headers in
// the Conn's out, bodies referenced from the cache) for one SENDMSG. Of
// what the kernel reads, the conn (holding the msghdr), the iovec array
// and the out array, of which mem (Out.Mem) is a slice to its end, are on
// the Go heap, and cn.keep pins them (heldPins); the bodies are mapped
// outside it (core.Out says so; a listing's too). The kernel owns all of it
// from the SQE to the CQE, and the Conn keeps the bodies referenced until
// Sent. giouring's PrepareSendMsg is liburing's io_uring_prep_sendmsg(3):
// addr = msg, len = 1, msg_flags = flags.
func (cn *conn) msgFor(mem []byte, vec [][]byte) *syscall.Msghdr {
	cn.iov = cn.iov[:0]
	for _, v := range vec {
		cn.iov = append(cn.iov, syscall.Iovec{Base: &v[0], Len: uint64(len(v))})
	}
	cn.keep.cover(cn, mem)
	cn.msg = syscall.Msghdr{Iov: &cn.iov[0], Iovlen: uint64(len(cn.iov))}
	return &cn.msg
}

func (l *loop) onSend(cn *conn, res int32) {
	cn.memSend = false
	if len(cn.iov) > 0 {
		// The bodies may be unmapped once Sent has them: no pointer into
		// them stays on the Go heap.
		clear(cn.iov)
		cn.iov, cn.msg = cn.iov[:0], syscall.Msghdr{}
	}
	switch {
	case res > 0 && !cn.closing:
		cn.c.Sent(int64(res))
		if cn.body.late > 0 {
			cn.c.Sent(cn.body.late)
			cn.body.late = 0
		}
	case res > 0:
	default:
		l.close(cn) // EPIPE, ECONNRESET; 0 would mean no progress ever
	}
	l.chainStep(cn)
}

func (l *loop) onBodyIn(cn *conn, res int32) {
	switch {
	case res == -int32(unix.ECANCELED):
		// The Mem send before it came up short.
	case l.retryBodyIn(cn, res):
	case !cn.body.via.in(&cn.body, res):
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
	if !short || b.retried || cn.closing {
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

// onBodyPoll: the socket has room (or an error, which the splice linked
// behind the poll will meet). Only a poll that a chain holding no pipe
// waited on vouches for the next pipe's room (sockRoom): one behind which
// a held pipe drains is spent by that splice, and left set it would fill
// a pipe for a socket full again, which then waits for its client.
func (l *loop) onBodyPoll(cn *conn, res int32) {
	switch {
	case res >= 0:
		cn.body.polled = cn.body.via == nil
	case res != -int32(unix.ECANCELED):
		l.close(cn)
	}
	l.chainStep(cn)
}

func (l *loop) onBodyOut(cn *conn, res int32) {
	switch {
	case res == -int32(unix.ECANCELED):
	case !cn.body.via.out(&cn.body, res):
		l.close(cn)
	case res <= 0:
		// The socket took nothing (a splice's -EAGAIN): the carrier
		// waits for room.
	case cn.closing:
	case cn.memSend:
		cn.body.retried = false
		// Linked CQEs arrive in order; should they not, Sent must
		// still see the Mem bytes first.
		cn.body.late += int64(res)
	default:
		cn.body.retried = false
		cn.c.Sent(int64(res))
	}
	l.chainStep(cn)
}
