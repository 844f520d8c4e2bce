package uring

import (
	"github.com/pawelgaczynski/giouring"

	"github.com/twinloop/twinloop/core"
)

// views is an ablation (--uring-body=view, view-zc), and the splice
// ablation's fallback when its pipe budget is spent: a body's part that is
// in the page cache goes by one SEND from the File's view (a shared,
// read-only mapping of the file: Conn.BodyView), copied once by the
// kernel and holding no memory of the connection's own; a cold part by
// chunk, as the default sends it. With zc the SEND is IORING_OP_SEND_ZC.
type views struct {
	st *core.Stats
	zc bool
}

// viewSend is the most a chain sends from a view: one SEND, which
// io_uring polls and resumes (MSG_WAITALL) until it is whole, so Sent and
// with it the write timeout follow progress by this much.
const viewSend = 256 << 10

// plan sends the next part from the view where it may (viewable), else
// reads it into a chunk, which the body then keeps to its end.
func (v *views) plan(l *loop, cn *conn, n int64, _ bool) chainPlan {
	if cn.body.via == nil {
		if k := min(n, viewSend); v.viewable(l, cn, k) {
			cn.body.via, cn.body.asked = v, int32(k)
			v.st.Own[ownBodyViews]++
			return chainPlan{steps: 1}
		}
	}
	return l.bodies.chunks.planRead(l, cn, n)
}

// viewable reports whether the next k bytes of cn's body may be sent from
// its File's view: the view exists and covers them, and their pages are
// in the page cache (cachestat(2)), so the kernel's copy from it never
// waits for the disk on the loop's thread. Without cachestat nothing is
// sent from a view. Past the end of a file truncated since it was mapped,
// pages are not in the cache either, and the chunk's READ comes up short
// (retryBodyIn closes the connection); truncated between the check and
// the send, the kernel's copy gets EFAULT (never SIGBUS: the loop itself
// never reads the view) and the connection is closed.
func (v *views) viewable(l *loop, cn *conn, k int64) bool {
	o := cn.c.Out()
	if view := cn.c.BodyView(); int64(len(view)) < o.Off+k {
		return false
	}
	cached, known := l.residency(cn, k)
	return cached && known
}

// queue queues one send from the view.
func (v *views) queue(l *loop, cn *conn, _ int, off, n int64) {
	k := int64(cn.body.asked)
	buf := cn.c.BodyView()[off : off+k]
	e := l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), bodySendFlags(k < n)) // io_uring_prep_send(3)
	as := opBodyOut
	if v.zc {
		// io_uring_prep_send_zc(3): a second CQE (IORING_CQE_F_NOTIF)
		// says when the kernel is done with the pages (sentZC). The
		// pages are the page cache's, which the kernel pins meanwhile.
		// giouring's PrepareSendZC passes the address of the slice
		// header, not of its bytes (the bodies came out garbled), so the
		// SQE is a SEND's with the opcode changed: the same fields.
		e.OpCode = giouring.OpSendZC
		as = opBodyOutZC
	}
	l.queue(e, as, cn)
}

func (v *views) in(*conn, int32) bool { return false } // no body-in step

// out: a send that would block is polled by io_uring itself.
func (v *views) out(_ *conn, res int32) bool { return res > 0 }

// ended: a send from the view holds nothing.
func (v *views) ended(cn *conn) { cn.body.via = nil }

func (v *views) release(*conn) {}

// sentZC turns a SEND_ZC's CQE into the body-out CQE the chain waits for,
// or drops its notification (op 0). The first CQE has IORING_CQE_F_MORE
// (its notification follows) but is the last that anything waits for. The
// notification says the kernel is done with the pages, which it held a
// reference to (the page cache's, not the mapping: the view may be
// unmapped before). Nothing waits for it: it comes only once the client
// has read the bytes, or its closed socket's queue is freed, and a close
// or Teardown waiting for it waited for clients that never read.
func sentZC(flags uint32) (op, uint32) {
	if flags&giouring.CQEFNotif != 0 {
		return 0, flags
	}
	return opBodyOut, flags &^ giouring.CQEFMore
}
