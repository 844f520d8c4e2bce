package uring

import (
	"os"
	"sync/atomic"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// --uring-sqpoll (Features.SQPoll): a kernel thread, pinned to one CPU,
// takes the SQEs from the ring as the loop publishes them, so that
// submitting costs no system call while it is awake, and the completions
// of what it submitted are posted without the loop entering the kernel.
// After sqPollIdle without work it sleeps, and the next enter wakes it
// (IORING_SQ_NEED_WAKEUP, IORING_ENTER_SQ_WAKEUP). The thread runs the
// completion work the loop's thread runs with DEFER_TASKRUN, which
// SQPOLL excludes, as it excludes COOP_TASKRUN and TASKRUN_FLAG.
//
// The loop meets it at three places: submit hands the SQEs over
// (handOver, as ring.submitVia, chosen at setup), the ring's enter adds
// the wake-up flag and counts the SQEs the thread took (sqWake, sqNew),
// and a pass that finds completions ready after handing over does not
// wait for them (pollPass, as the loop's waitFirst, chosen at setup).

// sqPollSetupFlags are tried in order, as setupFlags are: a kernel that
// refuses SINGLE_ISSUER (6.0; with SQPOLL the poll thread is the issuer)
// or SUBMIT_ALL gets the next set.
var sqPollSetupFlags = []uint32{
	giouring.SetupSubmitAll | giouring.SetupSingleIssuer | giouring.SetupSQPoll | giouring.SetupSQAff,
	giouring.SetupSubmitAll | giouring.SetupSQPoll | giouring.SetupSQAff,
	giouring.SetupSQPoll | giouring.SetupSQAff,
}

const (
	// sqPollIdle is how long, in ms, the poll thread spins without work
	// before it sleeps (sq_thread_idle): the kernel's default.
	sqPollIdle = 1000
	// sqNeedWakeup is IORING_SQ_NEED_WAKEUP in the SQ ring's flags;
	// enterSQWakeup and enterSQWait are IORING_ENTER_SQ_WAKEUP and
	// IORING_ENTER_SQ_WAIT.
	sqNeedWakeup  = 1 << 0
	enterSQWakeup = 1 << 1
	enterSQWait   = 1 << 2
)

// sqWake is the enter flag that wakes the poll thread if it sleeps.
func (r *ring) sqWake() uint32 {
	if atomic.LoadUint32(r.v.sq.flags)&sqNeedWakeup != 0 {
		return enterSQWakeup
	}
	return 0
}

// sqNew publishes the queued SQEs and returns how many were queued since
// the last call: the SQEs counter counts each once, though the poll
// thread, not an enter, takes them.
func (r *ring) sqNew() uint32 {
	r.v.flushSQ()
	n := r.v.sq.sqeTail - r.sqCounted
	r.sqCounted = r.v.sq.sqeTail
	return n
}

// handOver is submit with SQPOLL: it publishes the queued SQEs, which the
// poll thread takes by itself, and enters only to wake the thread, or to
// wait (IORING_ENTER_SQ_WAIT) until it has left room for want more SQEs:
// a linked chain must be published whole. The SQEs are counted at the
// next enter (ring.enter).
func (l *loop) handOver(want uint32) {
	l.bufs.publish()
	l.ring.v.flushSQ()
	for l.err == nil {
		var flags uint32
		switch {
		case l.ring.SQSpaceLeft() < want:
			flags = enterSQWait
		case l.ring.sqWake() == 0:
			return
		}
		_, errno := l.ring.enter(0, 0, flags, nil, flags != 0) // enter adds the wake-up
		switch errno {
		case 0, unix.EINTR, unix.EAGAIN, unix.EBUSY:
		default:
			l.fatal(os.NewSyscallError("io_uring_enter", errno))
		}
		if flags == 0 {
			return // woken
		}
	}
}

// pollPassRaw is pollPass with Backend.RawSubmit, whose raw submit
// follows (rawSubmitFirst).
func (l *loop) pollPassRaw() bool { return l.pollPass() || l.rawSubmitFirst() }

// pollPass ends a pass with SQPOLL before its wait: the SQEs are handed
// over, and if completions are ready the loop reaps them without
// entering the kernel.
func (l *loop) pollPass() bool {
	l.handOver(0)
	return l.ring.CQReady() > 0
}
