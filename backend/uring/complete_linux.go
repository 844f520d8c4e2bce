package uring

import "github.com/pawelgaczynski/giouring"

// A CQE goes to the handler of the op in its user_data (reap): the
// loop's own ops to theirs, a connection's to completeConn, which finds
// the connection and hands it to the op's connection handler. The tables
// are the loop's, set at Setup: a feature that adds ops, or changes what
// one's CQE does, sets its entries then (skipSends, skipsend_linux.go;
// directSockets.setOps, fixedfd_linux.go; zcSends.setOps,
// sendzc_linux.go), so that reap tests none.
type opTable struct {
	loop [numOps]opHandler   // by op: what takes its CQE
	conn [numOps]connHandler // by op, for completeConn: what takes a connection's CQE
}

// opHandler takes a CQE of op o, whose user_data named gen and slot.
type opHandler func(l *loop, o op, gen, slot uint32, res int32, flags uint32)

// connHandler takes a CQE of connection cn.
type connHandler func(l *loop, cn *conn, res int32, flags uint32)

// defaultOps are the ops of the default path.
var defaultOps = opTable{
	loop: [numOps]opHandler{
		opAccept: func(l *loop, _ op, _, slot uint32, res int32, flags uint32) {
			l.onAccept(int(slot), res, l.ended(flags))
		},
		opWake:       func(l *loop, _ op, _, _ uint32, res int32, flags uint32) { l.ended(flags); l.woken(res) },
		opCancelLoop: func(l *loop, _ op, _, _ uint32, _ int32, flags uint32) { l.ended(flags) },
		opFile: func(l *loop, _ op, gen, slot uint32, res int32, flags uint32) {
			l.ended(flags)
			l.files.complete(gen, slot, res)
		},
	},
	conn: [numOps]connHandler{
		opRecv:         (*loop).onRecv,
		opSend:         (*loop).onSend,
		opBodyIn:       (*loop).onBodyIn,
		opBodyOut:      (*loop).onBodyOut,
		opBodyPoll:     (*loop).onBodyPoll,
		opCancel:       func(_ *loop, cn *conn, _ int32, _ uint32) { cn.armd &^= armRecvCancel },
		opStdoutRead:   (*loop).onStdoutRead,
		opResetPoll:    (*loop).onResetPoll,
		opClose:        ignoreCQE,
		opStdoutCancel: ignoreCQE,
		opResetCancel:  ignoreCQE,
	},
}

// newOpTable is the default table, every op that is not the loop's own
// a connection's (an op the loop never queues included: a bug, whose CQE
// completeConn drops).
func newOpTable() *opTable {
	t := defaultOps
	for o, h := range t.loop {
		if h == nil {
			t.loop[o] = (*loop).completeConn
		}
		if t.conn[o] == nil {
			t.conn[o] = ignoreCQE
		}
	}
	return &t
}

func ignoreCQE(*loop, *conn, int32, uint32) {}

// ended reports whether a CQE is its request's last (no
// IORING_CQE_F_MORE), which then no longer counts in flight.
func (l *loop) ended(flags uint32) bool {
	final := flags&giouring.CQEFMore == 0
	if final {
		l.inflight--
	}
	return final
}
