package uring

import (
	"github.com/pawelgaczynski/giouring"

	"github.com/twinloop/twinloop/core"
)

// --uring-skip-send (Features.SkipSend): IOSQE_CQE_SKIP_SUCCESS (Linux
// 5.17) on the sends whose success needs no completion.
//
// A send's CQE does three things for the loop: it says how many bytes went
// (Conn.Sent), it says the kernel is done with the memory, and it drives
// the connection on. Only one kind of send can do without it: a chain's
// header, [send Mem] with body steps linked behind it (send,
// body_linux.go). It carries MSG_WAITALL, which io_uring resumes until the
// whole length is out or the send fails, so its success means exactly
// len(Mem) bytes (the iovecs' sum for a SENDMSG), and the next step's CQE
// both proves that success (a linked step starts only after it) and
// drives the connection. The others cannot skip:
//
//   - a send that ends its chain (a response from memory, the header
//     before a sendfile, a chunk's or a view's body send): its CQE is what
//     drives the connection, and what frees its memory; without it the
//     loop could queue the next response's send while this one still
//     waits for room in the socket, and io_uring does not order two sends
//     on one socket that are not linked;
//   - a send without MSG_WAITALL (a response from memory): it may come up
//     short, and only its CQE says how short;
//   - a splice or a SEND_ZC (whose notification is a CQE of its own);
//   - nor a header with a SEND_ZC linked behind it: when it fails, the
//     kernel ends the SEND_ZC without its result but still posts its
//     notification, and the record that waits for both
//     (sendzc_linux.go) would wait for ever.
//
// The skipped header is not counted in flight. On failure (an error, or
// bytes short of the whole: MSG_WAITALL's partial count) its CQE does come
// (opSendSkipped), and the kernel then ends the steps linked behind it
// without a CQE of theirs (REQ_F_SKIP_LINK_CQES: io_uring/io_uring.h,
// req_set_fail), so the loop takes those off its counts itself.

// sqeCQESkipSuccess is IOSQE_CQE_SKIP_SUCCESS.
const sqeCQESkipSuccess = 1 << 6

// skipped is a chain's header sent with IOSQE_CQE_SKIP_SUCCESS.
type skipped struct {
	n    int64  // its bytes, reported to Sent at the next step's CQE
	tail uint32 // the steps linked behind it, each counted in flight
}

// faultSkipped, when set (tests), is asked at each skipped header: true
// points the SEND at an address it cannot read, so that it fails
// (EFAULT) as a reset connection's would.
var faultSkipped func() bool

// linkSkipped is bodies.linkHeader with --uring-skip-send: the header
// goes with no CQE on success (queueSkipped), but before a SEND_ZC.
func (l *loop) linkSkipped(e *giouring.SubmissionQueueEntry, cn *conn, o core.Out, tail uint32) uint32 {
	if cn.body.zcStep() {
		return l.linkHeader(e, cn, o, tail)
	}
	l.queueSkipped(e, cn, o.Mem, o.Vec, tail)
	return 0
}

// zcStep reports whether the chain's body step is a SEND_ZC
// (--uring-body=view-zc): a header skipped before it could fail and end
// it without its result but not without its notification, which would
// find its record still waiting for the result (sendzc_linux.go).
func (b *fileBody) zcStep() bool {
	v, ok := b.via.(*views)
	return ok && v.zc
}

// queueSkipped queues the chain's header SEND e, of mem (or, for a
// SENDMSG, vec), linked to tail steps, with no CQE on success.
func (l *loop) queueSkipped(e *giouring.SubmissionQueueEntry, cn *conn, mem []byte, vec [][]byte, tail uint32) {
	n := int64(len(mem))
	if vec != nil {
		n = 0
		for _, v := range vec {
			n += int64(len(v))
		}
	}
	if faultSkipped != nil && faultSkipped() {
		e.Addr = 8
	}
	e.Flags = giouring.SqeIOLink | sqeCQESkipSuccess | l.sockFlags[opSendSkipped] // not queued: queueAs's flag too
	e.UserData = pack(opSendSkipped, cn.gen, cn.slot)
	cn.skip = skipped{n: n, tail: tail}
	l.stats.Own[ownSendsSkipped]++
}

// skipSends sets the handlers --uring-skip-send adds: a skipped header's
// failure, and before each step that may follow a skipped header,
// sentSkipped.
func (t *opTable) skipSends() {
	t.conn[opSendSkipped] = (*loop).onSendSkipped
	for _, o := range [...]op{opBodyIn, opBodyOut, opBodyPoll} {
		h := t.conn[o]
		t.conn[o] = func(l *loop, cn *conn, res int32, flags uint32) {
			if cn.skip.tail > 0 {
				l.sentSkipped(cn) // the header went whole
			}
			h(l, cn, res, flags)
		}
	}
}

// sentSkipped runs at the first CQE of a step behind a skipped header,
// which therefore went whole: Sent hears of its bytes before the step's.
func (l *loop) sentSkipped(cn *conn) {
	n := cn.skip.n
	cn.skip = skipped{}
	cn.vec.sent()
	if cn.life < lifeClosing {
		cn.c.Sent(n)
	}
}

// onSendSkipped: the skipped header failed, or went short. Its steps are
// ended without CQEs: they come off the counts here (complete took one
// off for this CQE, which was never counted), and onSend then ends the
// chain as for a failed header.
func (l *loop) onSendSkipped(cn *conn, res int32, _ uint32) {
	extra := int(cn.skip.tail) - 1
	cn.skip = skipped{}
	cn.inflight -= int32(extra)
	l.inflight -= extra
	cn.chain -= int32(extra)
	l.onSend(cn, res, 0)
}
