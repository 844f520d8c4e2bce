package uring

import (
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
)

const (
	spinFor   = 20 * time.Microsecond
	rawFor    = 200 * time.Microsecond
	batchOf   = 16
	batchWait = 50 // µs
	// featMinTimeout is IORING_FEAT_MIN_TIMEOUT.
	featMinTimeout = 1 << 15
	// yieldEvery is the longest a loop that waits raw keeps its P from
	// the scheduler when no goroutine is seen waiting for one: the timers
	// of goroutines that last ran on this P run only when it schedules.
	yieldEvery = 2 * time.Millisecond
	// runnableMetric counts the goroutines waiting for a P, runningMetric
	// the Ps running Go code (a raw wait's included), gomaxprocsMetric the
	// Ps (Go 1.26).
	runnableMetric   = "/sched/goroutines/runnable:goroutines"
	runningMetric    = "/sched/goroutines/running:goroutines"
	gomaxprocsMetric = "/sched/gomaxprocs:threads"
)

// yielder is a loop's state for lending its P before a raw wait (yield),
// and for WaitBatch's choice of batch.
type yielder struct {
	sample [3]metrics.Sample // runnableMetric, runningMetric, gomaxprocsMetric
	last   time.Time         // the last yield
	n      uint64            // yields so far
	cqes   int64             // Stats.Own[ownCQEs] at the previous wait
	// batch is how many completions a wait asks for after a busy pass
	// (waitRaw): batchOf with WaitBatch on a kernel with
	// IORING_FEAT_MIN_TIMEOUT (chooseWait), else 1.
	batch uint32
}

// yield runs before every raw wait (WaitRaw, WaitBatch) and catch-up
// enter (catchUp). A raw wait holds
// the thread's P, which the scheduler cannot take, so goroutines that are
// runnable (a CGI script's goroutine just started, a reaped script, the
// signal handler, a /metrics request that sysmon found in the netpoller)
// would wait for the loop when every P runs Go code: with GOMAXPROCS 1, or
// --loops as many as Ps. So when the scheduler counts a runnable goroutine
// and no P is idle or in a syscall (where the scheduler would run it
// anyway), or yieldEvery has passed, the loop yields its P
// (runtime.Gosched: on a locked thread that hands the P to another thread,
// which runs what is waiting and then gives it back) and waits raw only
// after that. Reading the counts (runtime/metrics: a lock and a look at
// each P's run queue) costs a small part of a yield (results/STUDY.md).
func (l *loop) yield() {
	y := &l.yielder
	if y.sample[0].Name == "" {
		y.sample[0].Name, y.sample[1].Name, y.sample[2].Name = runnableMetric, runningMetric, gomaxprocsMetric
	}
	metrics.Read(y.sample[:])
	waiting := y.sample[0].Value.Kind() == metrics.KindUint64 && y.sample[0].Value.Uint64() > 0 &&
		y.sample[1].Value.Kind() == metrics.KindUint64 && y.sample[1].Value.Uint64() >= y.sample[2].Value.Uint64()
	if now := time.Now(); waiting || now.Sub(y.last) >= yieldEvery {
		y.n++
		runtime.Gosched()
		y.last = time.Now()
	}
}

// sqTaskrun is IORING_SQ_TASKRUN in the SQ ring's flags.
const sqTaskrun = 1 << 2

// setupExtra is what the wait mode adds to the ring's setup flags.
func (w Wait) setupExtra() uint32 {
	if w == WaitSpin {
		return giouring.SetupTaskrunFlag
	}
	return 0
}

// catchUpOf is how much deferred work one catch-up enter runs. Since Linux
// 6.13 an enter runs at most max(20, min_complete) items of a
// DEFER_TASKRUN ring's deferred work (a poll's wake-up that completes a
// recv, an accept or a send, a linked SQE's issue): a pass that admits
// 128 connections makes more than 20.
const catchUpOf = 512

// catchUp ends a pass that leaves sockets it may admit: it submits
// the queued SQEs and runs up to catchUpOf items of the kernel's deferred
// work, without waiting (its timeout is zero). It lends the P first, as
// a raw wait does (yield): a loop that catches up pass after pass never
// waits, and the core's helpers (a miss's file load) would otherwise not
// run until it did: with GOMAXPROCS 1, Connection: close requests piled
// up behind a 64 KiB file's first load (results/2026-12-01_c10k-admit).
func (l *loop) catchUp() {
	l.yield()
	l.bufs.publish()
	_, errno := l.ring.enter(l.ring.v.flushSQ(), catchUpOf, getEvents, &l.catch, false)
	if errno = loops.WaitErrno(l.id, errno); errno != 0 && errno != unix.ETIME {
		l.enterFailed(errno)
	}
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

// waitRaw is the wait of WaitBatch (the default) and WaitRaw: it submits
// n SQEs and waits for the completions it asks for or the timeout in
// l.wait. It yields the P if other goroutines need it (yield), waits raw
// for at most rawFor, then, if nothing came, through Syscall6 for the
// rest. It asks for one completion, or with WaitBatch, when at least
// batchOf/2 CQEs came since the previous wait, for batchOf, settling for
// one after batchWait: a loop that gets a few completions at a time (a
// light load, CGI scripts) is not kept waiting batchWait for each.
func (l *loop) waitRaw(n uint32) (int, unix.Errno) {
	y := &l.yielder
	want := uint32(1)
	l.wait.arg.minWaitUsec = 0
	if y.batch > 1 && l.stats.Own[ownCQEs]-y.cqes >= int64(y.batch/2) {
		want, l.wait.arg.minWaitUsec = y.batch, batchWait
	}
	y.cqes = l.stats.Own[ownCQEs]
	l.yield()
	full := l.wait.ts
	if d := time.Duration(full.Nano()); d > rawFor {
		l.wait.ts = unix.NsecToTimespec(int64(rawFor))
	}
	got, errno := l.ring.enter(n, want, getEvents, &l.wait, false)
	l.wait.ts = full
	if errno != unix.ETIME || l.ring.CQReady() > 0 {
		return got, errno
	}
	return l.ring.enter(l.ring.v.flushSQ(), want, getEvents, &l.wait, true)
}

// waitBlock is WaitBlock's and WaitSpin's wait: one io_uring_enter
// through Syscall6 submits n SQEs and sleeps.
func (l *loop) waitBlock(n uint32) (int, unix.Errno) {
	return l.ring.enter(n, 1, getEvents, &l.wait, true)
}
