package uring

import "github.com/twinloop/twinloop/core"

// views is an ablation (--uring-body=view, view-zc), and the splice
// ablation's fallback when its pipe budget is spent: a body's part that is
// in the page cache goes by one SEND from the File's view (a shared,
// read-only mapping of the file: Conn.BodyView), copied once by the
// kernel and holding no memory of the connection's own; a cold part by
// chunk, as the default sends it. With zc the SEND is IORING_OP_SEND_ZC,
// which holds the File until its notification (sendzc_linux.go); so are
// --uring-send-zc's parts of file bodies (zcSends.views).
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

// queue queues one send from the view; with zc a SEND_ZC, which holds
// the File until its notification (sendzc_linux.go).
func (v *views) queue(l *loop, cn *conn, _ int, off, n int64) {
	k := int64(cn.body.asked)
	buf := cn.c.BodyView()[off : off+k]
	if v.zc {
		l.zc.sendFromView(l, cn, cn.c.Out().File, buf, n)
		return
	}
	e := l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), bodySendFlags(k < n)) // io_uring_prep_send(3)
	l.queue(e, opBodyOut, cn)
}

func (v *views) in(*conn, int32) bool { return false } // no body-in step

// out: a send that would block is polled by io_uring itself.
func (v *views) out(_ *conn, res int32) bool { return res > 0 }

// ended: a send from the view holds nothing.
func (v *views) ended(cn *conn) { cn.body.via = nil }

func (v *views) release(*conn) {}
