package uring

import (
	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// --uring-send-zc (Features.SendZC): bodies sent by IORING_OP_SEND_ZC
// (Linux 6.0) and IORING_OP_SENDMSG_ZC (6.1), from memory the loop holds
// until the kernel says it is done with it.
//
// What goes zero-copy is what the Conn does not copy, and only where it is
// at least SendZC bytes:
//
//   - a send of Out.Vec, whose referenced bodies (the cache's memory
//     bodies: core.Conn.OutRefs) make up SendZC bytes or more: one
//     SENDMSG_ZC, in place of the SENDMSG. The Vec's other entries are
//     the Conn's own out (headers, small bodies copied with them), which
//     it rewrites once Sent has them, long before the notification: they
//     are copied into the send's record (zcRec.mem), with the msghdr and
//     the iovecs, all mapped outside the Go heap.
//   - a part of a file body of SendZC bytes or more that is in the page
//     cache: [SEND of the header] → [SEND_ZC of up to viewSend bytes from
//     the File's view] (core.Conn.BodyView), in place of sendfile(2). A
//     cold part goes as the default sends it.
//
// A send from Out.Mem alone never does: those bytes are the Conn's out,
// which a copy into the record would only copy a second time.
//
// # Two completions
//
// A zero-copy send completes twice: its result (bytes sent; the CQE has
// IORING_CQE_F_MORE), and later a notification (IORING_CQE_F_NOTIF), once
// the network stack has let go of the pages, "the memory associated with
// the send is safe to get reused" (io_uring_prep_send_zc(3)); a result
// without F_MORE has no notification behind it. msg_zerocopy.rst:
// "Unlike with copying, the process cannot immediately overwrite the
// buffer after system call return without possibly modifying the data in
// flight." The result drives the connection as a SEND's would (Sent,
// the chain's next step); only the notification frees the memory. So:
//
//   - Each send has a record (zcRec), and its user_data names the record,
//     not the connection (op | the record's generation | its index): the
//     notification may come after the connection was closed and its slot
//     given to the next one. The record knows the connection, for the
//     result.
//   - The record holds every File whose memory the send reads
//     (core.Loop.HoldFile): the memory bodies of the Vec, or the File
//     whose view is sent. Sent, a close or a cache eviction then drop
//     only their own references; the body stays mapped, its fd open,
//     until the notification gives the record's back (ReleaseFile).
//   - The notification counts in the loop's inflight (not the
//     connection's, whose slot is freed at its result): Teardown's drain
//     waits for it, up to the exit deadline, and past that leaves the
//     Files held and the records mapped, as for any request the kernel
//     did not finish. A closed connection's notification comes when its
//     socket lets go of the bytes: once the client has them, or when the
//     connection is reset. So a connection closed with notifications to
//     come and its response cut short (bytes of Out unsent: a timeout,
//     an error, the end of the shutdown's grace) is reset (SO_LINGER 0,
//     close): the client could not have used the rest, and the Files are
//     given back at once instead of when the kernel gives up on the
//     client. One whose responses are all out closes as usual, and its
//     notifications follow the client's reads.
//   - A short send (a slow reader's socket is full: without MSG_WAITALL
//     the SENDMSG_ZC returns what the socket took) is resumed by the next
//     chain from where Sent got to, with a record of its own; the first
//     keeps its Files until its own notification.
//
// ownZCPending counts the notifications to come, ownZCHeld the Files they
// hold; both are back to 0 once a stopped loop has drained.
//
// # What it saves, and not on loopback
//
// msg_zerocopy.rst (the socket interface whose machinery SEND_ZC uses): a
// zero-copy send "replaces per byte copy cost with page accounting and
// completion notification overhead. As a result, MSG_ZEROCOPY is generally
// only effective at writes over around 10 KB" (hence SendZC, a size). On
// a NIC the pages go to the device as they are, and the copy from user
// memory into the socket's buffers is saved. On loopback it is not:
// "all packets generated with MSG_ZEROCOPY that are looped to a local
// socket will incur a deferred copy", since a local reader that does not
// read would hold the pages, and the notification, indefinitely; and
// "Deferred copies can be more expensive than a copy immediately in the
// system call, if the data is no longer warm in the cache. The process
// also incurs notification processing cost for no benefit." The lab's
// loopback cells therefore measure its cost, not its gain. With
// IORING_SEND_ZC_REPORT_USAGE (6.2; used when the kernel takes it) each
// notification says whether the kernel copied after all
// (IORING_NOTIF_USAGE_ZC_COPIED): ownZCCopied counts those.
//
// # Not registered buffers
//
// IORING_RECVSEND_FIXED_BUF would spare each send the pinning of its pages
// (the buffer's pages pinned once, at IORING_REGISTER_BUFFERS2 or a sparse
// table's update). It is not used. A File's view cannot be registered:
// tried on Linux 6.18, registering a read-only shared mapping of a file
// fails with EFAULT (anonymous memory registers). The cache's memory
// bodies could be, but the core maps and unmaps them, so it would take a
// hook at load and at the last release (an io_uring_register each, and a
// table of slots kept in step with evictions); the pinned pages count
// against RLIMIT_MEMLOCK (8 MiB here, a few hundred 64 KiB bodies); and
// the gathered send these bodies go by (SENDMSG_ZC) takes registered
// buffers only in recent kernels (6.15). Left for when a real NIC shows
// the sends are worth it.

// zcReleased, when set (tests), is told of each File a notification
// gives back: whether it was still open until then, and whether this
// release closed it (the record held its last reference).
var zcReleased func(open, closed bool)

// IORING_SEND_ZC_REPORT_USAGE (Linux 6.2), in a zero-copy send's ioprio,
// and IORING_NOTIF_USAGE_ZC_COPIED, in its notification's res.
const (
	sendZCReportUsage  = 1 << 3
	notifUsageZCCopied = 1 << 31
)

// A record's memory, when its send is a SENDMSG_ZC: the msghdr, zcIovs
// iovecs, and the Conn's own bytes copied (zcLayout, sys_linux.go).
// Records are mapped zcRecsPerMap at a time, kept for reuse, and unmapped
// at the loop's end; a page holds two, and a keep-alive response's header
// fits many times over.
const (
	zcRecMem     = 2 << 10
	zcIovs       = 16
	zcRecsPerMap = 64
)

// zcSends are the loop's zero-copy sends whose notification has not come:
// --uring-send-zc's, and --uring-body=view-zc's (variant_view_linux.go).
type zcSends struct {
	size    int64  // Features.SendZC; 0: off (the view-zc ablation still sends through these records)
	report  uint16 // sendZCReportUsage, when the kernel takes it
	recs    []zcRec
	free    []uint32
	mems    [][]byte     // the records' memory, mapped zcRecsPerMap records at a time
	spare   [][]byte     // record memory not yet given to a record
	files   []*core.File // OutRefs' scratch
	pending []zcPending  // by conn slot
	shorts  int          // results of fewer bytes than asked (tests)
	views   views        // the carrier of a file body's part sent by SEND_ZC
	st      *core.Stats
	sys     loops.Sys
}

// zcPending counts, for the connection of generation gen in its slot,
// the zero-copy sends whose notification has not come.
type zcPending struct {
	gen uint32
	n   int32
}

// pendingOf is cn's count of zero-copy sends whose notification has not
// come.
func (z *zcSends) pendingOf(cn *conn) *zcPending {
	for int(cn.slot) >= len(z.pending) {
		z.pending = append(z.pending, zcPending{})
	}
	p := &z.pending[cn.slot]
	if p.gen != cn.gen {
		*p = zcPending{gen: cn.gen}
	}
	return p
}

// abortZC: a connection that closes with zero-copy sends whose
// notifications have not come, and bytes left unsent, is aborted
// (Sys.Abort): the notifications come at the close. A direct descriptor
// with no fd installed (--uring-fixed-files) has no fd for setsockopt:
// its notifications come when the kernel gives up on the unsent bytes
// instead, and the loop's drain waits for them to its deadline.
func (l *loop) abortZC(cn *conn) {
	if l.zc.pendingOf(cn).n == 0 || cn.c.Out().Len() == 0 {
		return
	}
	if fd := l.sock.fdOf(cn); fd >= 0 {
		l.sys.Abort(fd)
	}
}

// zeroCopy reports whether the loop sends anything zero-copy:
// --uring-send-zc, or --uring-body=view-zc.
func (b *Backend) zeroCopy() bool { return b.Body == BodyViewZC || b.Features.SendZC > 0 }

// sendZC is how a response starts with --uring-send-zc (bodies.send): a
// zero-copy send where it fits, else as by default.
func (l *loop) sendZC(cn *conn) (again bool) {
	if l.zc.send(l, cn, cn.c.Out()) {
		return false
	}
	return l.send(cn)
}

// zcRec is one zero-copy send, from its SQE to its last CQE.
type zcRec struct {
	gen        uint32 // changes each time the record is reused, as a conn slot's does
	slot, cgen uint32 // the connection that sent it
	as         op     // what its result is to the connection: opSend or opBodyOut
	waits      uint8  // its CQEs to come: the result, and the notification
	n          int64  // the bytes it asked to send
	files      []*core.File
	mem        []byte // zcRecMem bytes, for a SENDMSG_ZC; kept with the record
}

func (z *zcSends) init(cfg *Backend, st *core.Stats, sys loops.Sys) {
	*z = zcSends{size: cfg.Features.SendZC, st: st, sys: sys, views: views{st: st, zc: true}}
}

// send is where --uring-send-zc enters the loop (l.send): it queues the
// chain for Out zero-copy and reports true, or leaves it to the default.
func (z *zcSends) send(l *loop, cn *conn, o core.Out) bool {
	switch {
	case o.Vec != nil:
		return z.sendVec(l, cn, o)
	case o.N >= z.size && cn.body.via == nil:
		return z.sendView(l, cn, o)
	}
	return false
}

// sendVec queues one SENDMSG_ZC of Out.Vec, its bodies referenced and the
// rest copied into the record, if the bodies come to SendZC bytes; as
// much of Vec as zcIovs iovecs and the record's memory take.
func (z *zcSends) sendVec(l *loop, cn *conn, o core.Out) bool {
	bodies, files := cn.c.OutRefs(z.files[:0])
	z.files = files
	var n int64
	for i, v := range o.Vec {
		if bodies&(1<<i) != 0 {
			n += int64(len(v))
		}
	}
	if n < z.size {
		return false
	}
	idx := z.take(l, true)
	if idx < 0 {
		return false // no memory for a record: as the default
	}
	r := &z.recs[idx]
	msg, iov, data := zcLayout(r.mem)
	k, refs := 0, int64(0) // iovecs, and the bodies' bytes among them
	for i, v := range o.Vec {
		if k == len(iov) {
			break
		}
		if bodies&(1<<i) != 0 {
			iov[k].Base, iov[k].Len = &v[0], uint64(len(v))
			refs += int64(len(v))
			k++
			continue
		}
		c := copy(data, v)
		if c == 0 {
			break
		}
		iov[k].Base, iov[k].Len = &data[0], uint64(c)
		data = data[c:]
		k++
		if c < len(v) {
			break // the record is full: the rest goes with the next send
		}
	}
	if refs < z.size {
		z.put(idx) // the record filled before the bodies: as the default
		return false
	}
	msg.Iov, msg.Iovlen = &iov[0], uint64(k)
	flags := uint32(unix.MSG_NOSIGNAL)
	if o.N > 0 {
		flags |= unix.MSG_MORE // a file part follows, in a chain of its own
	}
	e := l.sqe()
	e.PrepareSendMsg(cn.fd, msg, flags) // io_uring_prep_sendmsg_zc(3): the SENDMSG's fields
	e.OpCode = giouring.OpSendMsgZC
	z.queue(l, e, idx, opSendZC, opSend, cn, files)
	for _, v := range iov[:k] {
		z.recs[idx].n += int64(v.Len)
	}
	cn.chain = 1
	return true
}

// sendView queues [SEND of Out.Mem] → [SEND_ZC of the next part from the
// File's view], if the part is in the page cache (views.viewable); as
// views.queue does for --uring-body=view-zc, through z.views.
func (z *zcSends) sendView(l *loop, cn *conn, o core.Out) bool {
	k := min(o.N, viewSend)
	if !z.views.viewable(l, cn, k) {
		return false
	}
	var mem uint32
	if len(o.Mem) > 0 {
		mem = 1
	}
	l.reserve(mem + 1)
	if mem > 0 {
		// Not with IOSQE_CQE_SKIP_SUCCESS: failed, it would end the
		// SEND_ZC behind it without its result, but not without its
		// notification (skipsend_linux.go).
		e := l.sqe()
		// As send does: a Mem lent from the core's mapped slab needs no pin.
		heap := o.Mem
		if o.Mapped {
			heap = nil
		}
		cn.vec.pins.cover(cn, heap)
		e.PrepareSend(cn.fd, addrOf(o.Mem), uint32(len(o.Mem)), unix.MSG_NOSIGNAL|unix.MSG_MORE|unix.MSG_WAITALL) // io_uring_prep_send(3)
		e.Flags = giouring.SqeIOLink
		l.queue(e, opSend, cn)
	}
	cn.body.via, cn.body.asked = &z.views, int32(k)
	z.st.Own[ownBodyViews]++
	z.views.queue(l, cn, o.File.Fd(), o.Off, o.N)
	cn.chain = int32(mem + 1)
	return true
}

// sendFromView queues one SEND_ZC of view, n bytes of the body being left,
// as opBodyOut to cn, holding f until its notification.
func (z *zcSends) sendFromView(l *loop, cn *conn, f *core.File, view []byte, n int64) {
	idx := z.take(l, false)
	e := l.sqe()
	// io_uring_prep_send_zc(3). giouring's PrepareSendZC passes the
	// address of the slice header, not of its bytes (the bodies came out
	// garbled): the SQE is a SEND's with the opcode changed, the same
	// fields.
	e.PrepareSend(cn.fd, addrOf(view), uint32(len(view)), bodySendFlags(int64(len(view)) < n))
	e.OpCode = giouring.OpSendZC
	z.files = append(z.files[:0], f)
	z.queue(l, e, idx, opBodyOutZC, opBodyOut, cn, z.files)
	z.recs[idx].n = int64(len(view))
}

// queue finishes a zero-copy send's SQE e, for record idx: its user_data
// names the record; the record knows cn and holds files. The send counts
// in flight for cn until its result; its notification, for the loop.
func (z *zcSends) queue(l *loop, e *giouring.SubmissionQueueEntry, idx int, o, as op, cn *conn, files []*core.File) {
	e.IoPrio |= z.report
	r := &z.recs[idx]
	r.slot, r.cgen, r.as, r.waits, r.n = cn.slot, cn.gen, as, 2, 0
	for _, f := range files {
		l.core.HoldFile(f)
	}
	r.files = append(r.files[:0], files...)
	cn.inflight++
	z.pendingOf(cn).n++
	l.queueAs(e, o, r.gen, uint32(idx))
	l.inflight++ // the notification
	z.st.Own[ownZCSends]++
	z.st.Own[ownZCPending]++
	z.st.Own[ownZCHeld] += int64(len(files))
}

// setOps sets the handler of the zero-copy sends' ops: complete, then,
// for a result, the connection's handler of the op it stands for.
func (z *zcSends) setOps(t *opTable) {
	h := func(l *loop, _ op, gen, idx uint32, res int32, flags uint32) {
		if o, cgen, slot, f, ok := z.complete(l, gen, idx, res, flags); ok {
			l.completeConn(o, cgen, slot, res, f)
		}
	}
	t.loop[opSendZC], t.loop[opBodyOutZC] = h, h
}

// complete takes a zero-copy send's CQE (reap → the op table). A notification
// gives the record's Files back; ok is false, and nothing else happens. A
// result is handed on as the op, generation and slot of what it is to its
// connection, without F_MORE (it is the last CQE the connection waits
// for).
func (z *zcSends) complete(l *loop, gen, idx uint32, res int32, flags uint32) (o op, cgen, slot, f uint32, ok bool) {
	if int(idx) >= len(z.recs) || z.recs[idx].gen != gen || z.recs[idx].waits == 0 {
		return 0, 0, 0, 0, false // a bug: dropped, as complete drops a stale conn's
	}
	r := &z.recs[idx]
	if flags&giouring.CQEFNotif != 0 {
		if uint32(res)&notifUsageZCCopied != 0 {
			z.st.Own[ownZCCopied]++
		}
		z.done(l, int(idx))
		return 0, 0, 0, 0, false
	}
	o, cgen, slot = r.as, r.cgen, r.slot
	if res >= 0 && int64(res) < r.n {
		z.shorts++
	}
	if flags&giouring.CQEFMore == 0 {
		z.done(l, int(idx)) // no notification will come
	}
	r.waits--
	if r.waits == 0 {
		z.put(int(idx))
	}
	return o, cgen, slot, flags &^ giouring.CQEFMore, true
}

// done: the notification of record idx came, or will not: its Files go
// back, and the record once its result has come too.
func (z *zcSends) done(l *loop, idx int) {
	r := &z.recs[idx]
	for i, f := range r.files {
		open := f.Fd() >= 0
		l.core.ReleaseFile(f)
		if zcReleased != nil {
			zcReleased(open, open && f.Fd() < 0)
		}
		r.files[i] = nil
	}
	z.st.Own[ownZCHeld] -= int64(len(r.files))
	z.st.Own[ownZCPending]--
	if p := &z.pending[r.slot]; p.gen == r.cgen && p.n > 0 {
		p.n--
	}
	r.files = r.files[:0]
	l.inflight--
	if r.waits--; r.waits == 0 {
		z.put(idx)
	}
}

// take returns a free record's index, with memory when mem; -1 when none
// can be mapped.
func (z *zcSends) take(l *loop, mem bool) int {
	var idx int
	if n := len(z.free); n > 0 {
		idx = int(z.free[n-1])
		z.free = z.free[:n-1]
	} else {
		idx = len(z.recs)
		z.recs = append(z.recs, zcRec{})
	}
	r := &z.recs[idx]
	if mem && r.mem == nil {
		if len(z.spare) == 0 {
			m, err := z.sys.Mmap(zcRecMem * zcRecsPerMap)
			if err != nil {
				z.put(idx)
				return -1
			}
			z.mems = append(z.mems, m)
			for i := range zcRecsPerMap {
				z.spare = append(z.spare, m[i*zcRecMem:(i+1)*zcRecMem:(i+1)*zcRecMem])
			}
		}
		r.mem = z.spare[len(z.spare)-1]
		z.spare = z.spare[:len(z.spare)-1]
	}
	return idx
}

// put frees record idx for reuse, under a new generation.
func (z *zcSends) put(idx int) {
	r := &z.recs[idx]
	r.gen = (r.gen + 1) & genMask
	r.waits = 0
	z.free = append(z.free, uint32(idx))
}

// close unmaps the records' memory; nothing may be in flight.
func (z *zcSends) close() {
	for _, m := range z.mems {
		z.sys.Munmap(m)
	}
	z.mems, z.spare = nil, nil
	for i := range z.recs {
		z.recs[i].mem = nil
	}
}

// reportsUsage reports whether this kernel takes
// IORING_SEND_ZC_REPORT_USAGE (Linux 6.2): a SEND_ZC with it on fd -1
// fails with EBADF where it does (the flags are checked when the SQE is
// prepared, the fd when it is issued), EINVAL where it does not. Run on
// a fresh ring, at setup.
func (r *ring) reportsUsage() bool {
	e := r.GetSQE()
	if e == nil {
		return false
	}
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareSend(-1, 0, 0, 0)
	e.OpCode = giouring.OpSendZC
	e.IoPrio = sendZCReportUsage
	cqe, err := r.waitOne() // uncounted: setup
	if err != nil {
		return false
	}
	if cqe.flags&giouring.CQEFMore != 0 {
		r.waitOne() // its notification; uncounted: setup
	}
	return cqe.res == -int32(unix.EBADF)
}
