package uring

import (
	"net/netip"
	"syscall"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// A connection's life on the ring: accepted (newConn), driven by its
// core.Conn (drive, watch, onRecv), closed once nothing of it can still
// look its fd up (close, finishClose) and freed at its last CQE (free).
// Its response's body goes out through body_linux.go, a CGI script's output
// comes in through cgi_linux.go.

// conn is one accepted socket. Its fields are owned by the loop's thread.
// What the connection is waiting for is its core.Conn's to say
// (Conn.Interest); conn keeps only what the ring holds of it. Its fields
// are packed to stay in a size class below the one they took unpacked,
// as TestConnSize checks: every slot pays for each byte
// (results/2026-12-02_b966187_c10k-rss).
type conn struct {
	c *core.Conn
	// fd names the socket in SQEs: its fd, or with --uring-fixed-files
	// its direct descriptor's slot (the loop's sockets say which, and
	// which fd the system calls on it take).
	fd        int
	slot      uint32
	gen       uint32
	stdoutBuf int32 // the buffer of the read of a CGI script's output in flight (cgi_linux.go), -1 none
	life      life  // open, closing, closed: see life
	armd      armed // the connection's requests that stay armed on the ring

	inflight int32 // SQEs whose last CQE has not come; the slot is reused only at 0

	// The send chain (body_linux.go): [send Mem] → [poll] → [body in → body out].
	chain int32    // its SQEs still in flight
	skip  skipped  // its header, sent with IOSQE_CQE_SKIP_SUCCESS (skipsend_linux.go)
	vec   sendVec  // a SENDMSG's memory
	body  fileBody // the file body under way, and its carrier
}

// life is where a conn is between its accept and the reuse of its slot.
// It only moves forward: free → open → closing → closed → free (the slot,
// given to the next connection with a new generation). Being ordered, it
// is compared: life != lifeFree, a connection (live); life >=
// lifeClosing, close was called and no new request is queued.
type life uint8

const (
	lifeFree    life = iota // the slot holds no connection
	lifeOpen                // driven by its Conn
	lifeClosing             // close was called: no new requests; its IORING_OP_CLOSE waits for the ones in flight
	lifeClosed              // the IORING_OP_CLOSE is queued; the slot is freed at the last CQE
)

// armed are the connection's requests that stay on the ring until a CQE
// without IORING_CQE_F_MORE, or a cancel, ends them.
type armed uint8

const (
	armRecv       armed = 1 << iota // the multishot (or one-shot) recv
	armRecvCancel                   // a cancel of it is in flight
	armReset                        // the poll for a reset after the FIN (watchReset)
	armResetOnce                    // that poll was armed: it is armed at most once per connection
	armStdout                       // a read of the script's output (cgi_linux.go)
	armShutdown                     // an IORING_OP_SHUTDOWN of the direct descriptor (fixedfd_linux.go): the close waits for it
)

// sendVec is what a SENDMSG of Out.Vec hands the kernel from the Go heap,
// owned by the kernel from the SQE to the send's CQE (msgFor).
type sendVec struct {
	pins heldPins        // pins the conn (its msg), its iov array and its Conn's out array while they stay the same
	iov  []syscall.Iovec // the iovecs, reused
	msg  syscall.Msghdr
}

// newConn makes a connection of accepted socket fd, whose ends are remote
// and local (zero values unless core.Server.WantsAddrs).
func (l *loop) newConn(fd int, remote, local netip.AddrPort) {
	var cn *conn
	if n := len(l.freeSlots); n > 0 {
		cn = l.conns[l.freeSlots[n-1]]
		l.freeSlots = l.freeSlots[:n-1]
	} else {
		cn = &conn{slot: uint32(len(l.conns))}
		l.conns = append(l.conns, cn)
	}
	// The slot's iovec array and Pinner (released, in free) serve the
	// next connection too.
	*cn = conn{slot: cn.slot, gen: loops.NextGen(cn.gen, genMask), fd: fd, life: lifeOpen, stdoutBuf: -1, vec: sendVec{iov: cn.vec.iov[:0], pins: heldPins{p: cn.vec.pins.p}}}
	l.sock.opened(cn)
	cn.c = l.core.NewConn(remote)
	cn.c.Handle, cn.c.Local = int(cn.slot), local
	l.nconns++
	l.stats.Accepts++
	l.drive(cn)
}

// drive moves a connection along until it waits for a completion, and
// then has the ring watch what it waits for (watch).
func (l *loop) drive(cn *conn) {
	for cn.life < lifeClosing {
		switch cn.c.Next() {
		case core.ActWrite:
			if cn.chain == 0 && l.bodies.send(l, cn) {
				continue // a part went whole as it was planned: no CQE will come for it
			}
		case core.ActRead:
			if l.Stopping() && cn.c.Idle() && cn.chain == 0 {
				l.close(cn)
				return
			}
		case core.ActLinger:
			l.shutdown(cn, unix.SHUT_WR)
			cn.c.Linger()
			continue
		case core.ActClose:
			// No Conn.Unread (core.Backend): the loop knows of no
			// input left in the socket. Once a close is asked, and
			// until EOF, Interest.Read holds, so the recv is armed, or
			// re-armed by this pass (after ENOBUFS; a one-shot recv)
			// and issued at the submit before the cancel and close
			// queued behind it, all buffers published. What it takes
			// is fed (the close then lingers), or, completing once
			// the close is queued, is out of the socket all the same:
			// no RST. Read is off only while InBufMax bytes wait in
			// the Conn, whose close lingers for them anyway. Not seen:
			// bytes that arrive after the last enter ran the recv's
			// completion (DEFER_TASKRUN runs it only there), or that
			// find the ring dry again; epoll misses them likewise.
			l.close(cn)
			return
		}
		if l.watch(cn) {
			return
		}
	}
}

// watch brings the ring in line with what the connection waits for
// (core.Interest): a recv armed exactly while Interest.Read, and a read of
// the script's stdout in flight while PipeRead (cgi_linux.go). A socket
// write is not watched: the send chain (body_linux.go) waits in the
// kernel. watch reports false when it ended the script's answer (no
// buffer for the read): the Conn then has more to do.
func (l *loop) watch(cn *conn) bool {
	if cn.life >= lifeClosing {
		return true // close cancels what is armed
	}
	in := cn.c.Interest()
	if in.PipeRead && cn.armd&armStdout == 0 && !l.watchStdout(cn, in) {
		return false
	}
	if in.Reset && cn.armd&armResetOnce == 0 {
		l.watchReset(cn)
	}
	// The recv: a multishot one, or with Backend.OneShot a one-shot one,
	// armed again after each completion. Bytes that arrive before a
	// cancel takes effect are fed anyway: the core accepts them.
	// After the peer's FIN, Read is false (the core knows of the EOF).
	switch {
	case in.Read && cn.armd&armRecv == 0:
		// io_uring_prep_recv_multishot(3) (Linux 6.0): one SQE keeps
		// producing a CQE per arrival until it fails, ENOBUFS included;
		// with Backend.OneShot io_uring_prep_recv(3) (recvPrio says which).
		// Either takes a buffer from the ring (length 0: its size).
		e := l.sqe()
		e.PrepareRecv(cn.fd, 0, 0, 0)
		e.Flags |= giouring.SqeBufferSelect // PrepareRecv cleared Flags and BufIG
		e.BufIG = bufGroup
		e.IoPrio |= l.recvPrio
		l.queue(e, opRecv, cn)
		cn.armd |= armRecv
	case !in.Read:
		l.cancelRecv(cn)
	}
	return true
}

// watchReset arms, once the peer has sent its FIN while a script answers
// (watch: Interest.Reset, and not armed before), a multishot poll that completes when the socket is
// reset: a client that closed answers the core's probe (a 100 Continue)
// so, a half-closed one does not. A one-shot poll would not wait: io_uring
// adds POLLRDHUP to every poll's mask (io_uring/poll.c, IO_POLL_UNMASK),
// and after a FIN that is ready at once. The multishot one reports it
// too, then each wake-up after, the reset's POLLERR among them
// (TestResetPollWaits). It stays armed until close cancels it: after the
// FIN the connection closes once its answers are out.
func (l *loop) watchReset(cn *conn) {
	e := l.sqe()
	e.PreparePollMultishot(cn.fd, unix.POLLERR) // io_uring_prep_poll_multishot(3)
	l.queue(e, opResetPoll, cn)
	cn.armd |= armReset | armResetOnce
}

// onResetPoll: POLLERR ends the connection, and so the script (FreeConn).
func (l *loop) onResetPoll(cn *conn, res int32, flags uint32) {
	if flags&giouring.CQEFMore == 0 {
		cn.armd &^= armReset
	}
	if res > 0 && res&unix.POLLERR != 0 {
		l.close(cn)
	}
}

// cancelRecv cancels the armed recv, unless a cancel is on its way.
func (l *loop) cancelRecv(cn *conn) {
	if cn.armd&(armRecv|armRecvCancel) == armRecv {
		l.cancelConnOp(cn, opRecv, opCancel, 0)
		cn.armd |= armRecvCancel
	}
}

func (l *loop) onRecv(cn *conn, res int32, flags uint32) {
	if flags&giouring.CQEFMore == 0 {
		cn.armd &^= armRecv
	}
	if flags&giouring.CQEFBuffer != 0 {
		l.recv.feed(cn.c, cn.life >= lifeClosing, uint16(flags>>giouring.CQEBufferShift), res, flags)
	}
	switch {
	case res >= 0:
		if res == 0 {
			cn.c.EOF()
		}
	case res == -int32(unix.ENOBUFS):
		// The buffer ring ran dry; the recv ended and drive arms it again.
		// The data waits in the socket.
		l.stats.Own[ownRecvNoBufs]++
	case res == -int32(unix.ECANCELED):
	default:
		l.close(cn) // ECONNRESET and the like
	}
}

// completeConn hands a connection's CQE to its op's handler, then drives
// the connection, or finishes its close. A CQE whose connection is gone
// is dropped (a bug: see user_data), its buffers given back.
func (l *loop) completeConn(o op, gen, slot uint32, res int32, flags uint32) {
	final := flags&giouring.CQEFMore == 0 // as ended
	if final {
		l.inflight--
	}
	var cn *conn
	if int(slot) < len(l.conns) {
		cn = l.conns[slot]
	}
	if cn == nil || cn.life == lifeFree || cn.gen != gen {
		if flags&giouring.CQEFBuffer != 0 {
			l.recv.drop(uint16(flags>>giouring.CQEBufferShift), res, flags)
		}
		return
	}
	if final {
		cn.inflight--
	}
	l.ops.conn[o](l, cn, res, flags)
	if cn.life >= lifeClosing {
		l.finishClose(cn)
	} else {
		l.drive(cn)
	}
}

// A recv's buffers, from the provided-buffer ring (bufRing: its setup is
// in ring_linux.go), fed to the Conn and given back.

// recvBufs is how the loop takes a recv's buffers, chosen once at Setup:
// by default one buffer a CQE, the bufRing's; with --uring-recv-bundle or
// --uring-buf-inc several, or part of one (bufSpans, bufspan_linux.go).
type recvBufs interface {
	// feed feeds c (unless closing) a recv's res bytes, from buffer id
	// on, and gives back the buffers the kernel is done with.
	feed(c *core.Conn, closing bool, id uint16, res int32, flags uint32)
	// drop gives back the buffers of a CQE whose connection is gone.
	drop(id uint16, res int32, flags uint32)
}

// use is the recvBufs of b's recvs.
func (b *bufRing) use() recvBufs {
	if b.spans != nil {
		return b.spans
	}
	return b
}

// feed is the default recvBufs': one buffer a CQE, fed and given back
// at once (recycle's two lines, as every recv runs them).
func (b *bufRing) feed(c *core.Conn, closing bool, id uint16, res int32, _ uint32) {
	if res > 0 && !closing {
		off := int(id) * b.size
		c.Feed(b.mem[off : off+int(res) : off+int(res)]) // Feed copies what it keeps
	}
	b.br.BufRingAdd(b.base+uintptr(int(id)*b.size), uint32(b.size), id, b.mask, b.pending)
	b.pending++
}

func (b *bufRing) drop(id uint16, _ int32, _ uint32) { b.recycle(id) }

// recycle hands buffer id back; publish makes it visible to the kernel.
func (b *bufRing) recycle(id uint16) {
	b.br.BufRingAdd(b.base+uintptr(int(id)*b.size), uint32(b.size), id, b.mask, b.pending)
	b.pending++
}

// publish moves the ring's tail over the recycled buffers. It runs before
// every enter: a recv re-armed after ENOBUFS must find them.
func (b *bufRing) publish() {
	if b != nil && b.pending > 0 {
		b.br.BufRingAdvance(b.pending)
		b.pending = 0
	}
}

// shutdown is shutdown(2) of the connection, made on the loop: on a TCP
// socket it never waits (it queues a FIN, or wakes the socket's waiters).
// IORING_OP_SHUTDOWN is always punted to an io_uring worker
// (REQ_F_FORCE_ASYNC): a wake-up of a worker per Connection: close, and
// since the worker looks the fd up only when it runs, the close had to
// wait for its CQE (issue 10: closed under it, the fd number went to the
// next connection, whose response it cut). Made here, the fd is still
// this connection's. A socket that cannot be shut down (the peer reset
// it: ENOTCONN) has nothing left to end. A direct descriptor without an fd
// has to take IORING_OP_SHUTDOWN after all (fixedfd_linux.go).
func (l *loop) shutdown(cn *conn, how int) { l.sock.shutdown(l, cn, how) }

// close ends a connection. The socket is closed only once no request of
// the connection can still look its fd up: a request resolves its fd when
// it is issued, and a linked one is issued late, so closing under a chain
// could make its send reach whichever socket gets the fd number next.
//
//   - Nothing in flight: close now.
//   - Only the multishot recv in flight (the usual case): cancel it and
//     close, hard-linked in one submission; the recv holds its own
//     reference to the socket until its final CQE.
//   - A send chain in flight: shutdown(SHUT_RDWR), made on the loop
//     (shutdown), ends its sends (EPIPE) and the recv (EOF); the close
//     follows the last CQE.
//   - An IORING_OP_SHUTDOWN in flight (a direct descriptor's,
//     fixedfd_linux.go: sockets.closeWaits), which looks its slot up when
//     a worker runs it: the recv is cancelled, and the close follows the
//     last CQE.
//
// The slot, its Conn and its pinned memory are released at the last CQE.
func (l *loop) close(cn *conn) {
	if cn.life >= lifeClosing {
		return
	}
	cn.life = lifeClosing
	l.stats.Closes++
	if cn.armd&armStdout != 0 {
		// The core closes the pipe in FreeConn, which must wait for the
		// read's CQE.
		l.cancelConnOp(cn, opStdoutRead, opStdoutCancel, 0)
	}
	if cn.armd&armReset != 0 {
		// The poll holds the socket and would never end on its own.
		l.cancelConnOp(cn, opResetPoll, opResetCancel, 0)
	}
	l.bodies.closing(l, cn) // zero-copy sends: abortZC (sendzc_linux.go)
	if cn.chain > 0 {
		l.shutdown(cn, unix.SHUT_RDWR)
		return
	}
	if l.sock.closeWaits(cn) {
		l.cancelRecv(cn)
		return
	}
	l.reserve(2)
	if cn.armd&armRecv != 0 {
		// Hard-linked: the close runs even when the cancel finds nothing.
		l.cancelConnOp(cn, opRecv, opCancel, giouring.SqeIOHardlink)
	}
	l.queueClose(cn)
}

// cancelConnOp queues an ASYNC_CANCEL of cn's request of op target
// (io_uring_prep_cancel64(3)), its CQE seen as op as, with SQE flags.
func (l *loop) cancelConnOp(cn *conn, target, as op, flags uint8) {
	e := l.sqe()
	e.PrepareCancel64(pack(target, cn.gen, cn.slot), 0)
	e.Flags = flags
	l.queue(e, as, cn)
}

func (l *loop) queueClose(cn *conn) {
	e := l.sqe()
	l.sock.prepClose(l, e, cn)
	l.queue(e, opClose, cn)
	cn.life = lifeClosed
	l.closesQueued++
}

func (l *loop) finishClose(cn *conn) {
	switch {
	case cn.inflight > 0:
	case cn.life != lifeClosed:
		l.queueClose(cn)
	default:
		l.free(cn)
	}
}

// free releases a closed connection's slot, once nothing of it is in flight.
func (l *loop) free(cn *conn) {
	cn.vec.pins.release() // before FreeConn, which may drop the out array
	cn.releaseBody()
	l.bodies.pipes.forget(cn)
	cn.body = fileBody{}
	l.core.FreeConn(cn.c)
	cn.c = nil
	cn.life = lifeFree
	l.freeSlots = append(l.freeSlots, cn.slot)
	l.nconns--
	l.closesQueued--
}
