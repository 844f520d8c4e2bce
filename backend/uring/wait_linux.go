package uring

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

const (
	spinFor   = 20 * time.Microsecond
	rawFor    = 200 * time.Microsecond
	batchOf   = 16
	batchWait = 50 // µs
	// featMinTimeout is IORING_FEAT_MIN_TIMEOUT.
	featMinTimeout = 1 << 15
)

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
			_, errno := l.uringEnter(0, 0, nil, false)
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

// waitEnter submits n SQEs and waits for completions or the timeout in
// l.wait. WaitRaw and WaitBatch wait raw first, for at most rawFor, then,
// if nothing came, through Syscall6 for the rest; WaitBatch asks for
// batchOf completions and settles for one after batchWait.
func (l *loop) waitEnter(n uint32) (int, unix.Errno) {
	want := uint32(1)
	if l.cfg.Wait == WaitBatch && l.ring.v.features&featMinTimeout != 0 {
		want, l.wait.arg.minWaitUsec = batchOf, batchWait
	}
	if l.cfg.Wait == WaitRaw || l.cfg.Wait == WaitBatch {
		full := l.wait.ts
		if d := time.Duration(full.Nano()); d > rawFor {
			l.wait.ts = unix.NsecToTimespec(int64(rawFor))
		}
		got, errno := l.uringEnter(n, want, &l.wait, false)
		l.wait.ts = full
		if errno != unix.ETIME || l.ring.CQReady() > 0 {
			return got, errno
		}
		n = l.ring.v.flushSQ()
	}
	return l.uringEnter(n, want, &l.wait, true)
}
