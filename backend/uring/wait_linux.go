package uring

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// The waits of the --uring-wait ablations and of Backend.RawSubmit, which
// chooseWait sets at Setup beside the default's (waitRaw, loop_linux.go):
// what a pass does before it waits (waitFirst) and how it waits (waitVia).

// spinFor is how long WaitSpin watches the rings (spin); the default
// wait's constants are waitRaw's (loop_linux.go).
const spinFor = 20 * time.Microsecond

// sqTaskrun is IORING_SQ_TASKRUN in the SQ ring's flags.
const sqTaskrun = 1 << 2

// setupExtra is what the wait mode adds to the ring's setup flags.
func (w Wait) setupExtra() uint32 {
	if w == WaitSpin {
		return giouring.SetupTaskrunFlag
	}
	return 0
}

// spin watches the rings for up to spinFor after a submit. It reports
// whether completions are ready to reap (after one raw enter to run the
// deferred work, if that was what appeared).
func (l *loop) spin() bool {
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if l.ring.CQReady() > 0 {
			return true
		}
		if atomic.LoadUint32(l.ring.v.sq.flags)&sqTaskrun != 0 {
			_, errno := l.ring.enter(0, 0, getEvents, nil, false)
			if errno != 0 && errno != unix.EINTR && errno != unix.EAGAIN && errno != unix.EBUSY {
				l.fatal(os.NewSyscallError("io_uring_enter", errno))
			}
			return true
		}
		if i&63 == 63 && time.Now().After(deadline) {
			return false
		}
	}
}

// chooseWait sets, once at Setup, what a pass does before it waits
// (waitFirst: true ends the pass without a wait) and how it waits
// (waitVia), by Backend.Wait and RawSubmit, and --uring-sqpoll.
func (l *loop) chooseWait() {
	l.waitFirst, l.waitVia = nil, (*loop).waitRaw
	l.yielder.batch = 1
	if l.cfg.Wait == WaitBatch && l.ring.v.features&featMinTimeout != 0 {
		l.yielder.batch = batchOf
	}
	switch {
	case l.ring.sqpoll && l.cfg.RawSubmit:
		l.waitFirst = (*loop).pollPassRaw // sqpoll_linux.go
	case l.ring.sqpoll:
		l.waitFirst = (*loop).pollPass
	case l.cfg.Wait == WaitSpin:
		l.waitFirst = (*loop).spinFirst
	case l.cfg.RawSubmit:
		l.waitFirst = (*loop).rawSubmitFirst
	}
	if l.cfg.Wait == WaitBlock || l.cfg.Wait == WaitSpin {
		l.waitVia = (*loop).waitBlock
	}
}

// rawSubmitFirst is Backend.RawSubmit's: queued SQEs go in through a raw,
// non-blocking enter that also runs the completions deferred to this
// thread (DEFER_TASKRUN), and the pass waits only when that yields no
// CQE.
func (l *loop) rawSubmitFirst() bool {
	if l.ring.v.flushSQ() == 0 {
		return false
	}
	l.submit()
	return l.err != nil || l.ring.CQReady() > 0
}

// spinFirst is WaitSpin's: a raw submit, then spin.
func (l *loop) spinFirst() bool { return l.rawSubmitFirst() || l.spin() }

// waitBlock is WaitBlock's and WaitSpin's wait: one io_uring_enter
// through Syscall6 submits n SQEs and sleeps.
func (l *loop) waitBlock(n uint32) (int, unix.Errno) {
	return l.ring.enter(n, 1, getEvents, &l.wait, true)
}
