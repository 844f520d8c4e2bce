package uring

import (
	"errors"
	"os"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// Default sizes (Backend's fields may set others, for tests). A loop's
// fixed memory is about bufCount*bufSize (recv buffers, touched as used)
// plus the SQ/CQ rings; pipes and chunks for file bodies are made when
// bodies need them (body_linux.go).
const (
	// bufCount recv buffers of bufSize bytes back the multishot recvs of
	// all the loop's connections. A buffer is held only from its CQE to the
	// end of the Feed call, so the ring runs dry only when more than
	// bufCount recvs complete between two passes; then a recv ends with
	// ENOBUFS and is re-armed, without losing data. 2 KiB holds a
	// usual request head (nginx reads one into 1 KiB first); a longer
	// one comes in several CQEs, the Conn keeping the start (Feed). With
	// 4 KiB buffers, at 10,000 keep-alive connections the ring was a large
	// share of the loop's memory (results/2026-12-01_c10k-accept).
	bufCount = 1024
	bufSize  = 2 << 10
	// With --uring-buf-inc a request takes only its bytes of a buffer,
	// so buffers can be fewer and larger for the same memory: a long
	// request head or a body arrives in fewer CQEs.
	incBufCount = 128
	incBufSize  = 16 << 10
	// chunkSize is one read + send of a file body that goes by chunk
	// (--uring-body=read, and cold parts).
	chunkSize = 128 << 10
	// maxWorkers bounds the io_uring worker threads of the whole
	// process, split between the loops (IORING_REGISTER_IOWQ_MAX_WORKERS
	// per loop, bounded and unbounded alike): splices run on them, but
	// never wait for a client there (body_linux.go).
	maxWorkers = 16
)

// cqeBatch is how many CQEs one PeekBatchCQE takes.
const cqeBatch = 256

// op is what an SQE asked for; it is the top byte of its user_data.
type op uint8

const (
	opAccept       op = iota + 1 // multishot accept; slot: listener index
	opWake                       // read of the wake-up eventfd
	opCancelLoop                 // cancel of an accept or of the wake read
	opRecv                       // a connection's multishot recv
	opSend                       // send of Out().Mem, or SENDMSG of Out().Vec
	opBodyIn                     // read of a file chunk, or splice of it into a pipe
	opBodyOut                    // send of that chunk, or splice of the pipe to the socket
	opBodyPoll                   // poll for POLLOUT before a splice to a full socket
	opCancel                     // cancel of a connection's recv
	opClose                      // close(2) of a connection
	opStdoutRead                 // read of a CGI script's output pipe
	opStdoutCancel               // cancel of that read
	opResetPoll                  // multishot poll for POLLERR after the peer's FIN while a script answers (core.Interest.Reset)
	opResetCancel                // cancel of that poll
	opFile                       // a core.FileCalls call (file_linux.go); slot: its fileReq
	opBodyOutZC                  // opBodyOut by IORING_OP_SEND_ZC; slot: its zcRec (sendzc_linux.go)
	opSendSkipped                // opSend with IOSQE_CQE_SKIP_SUCCESS, which completes only on failure (skipsend_linux.go)
	opSendZC                     // opSend by IORING_OP_SENDMSG_ZC; slot: its zcRec (sendzc_linux.go)
	opShutdown                   // IORING_OP_SHUTDOWN of a direct descriptor (fixedfd_linux.go)
	opFdInstall                  // IORING_OP_FIXED_FD_INSTALL of a connection's fd for system calls (fixedfd_linux.go)
	opAddrs                      // the same, for an accepted socket's addresses, closed once read; slot: its direct descriptor
	opCloseDirect                // close of a direct descriptor no connection holds; loop's own
	numOps
)

// user_data layout, as in liburing's echo-server example:
//
//	 63      56 55          32 31           0
//	+----------+--------------+--------------+
//	|    op    |  generation  |     slot     |
//	+----------+--------------+--------------+
//
// slot indexes l.conns (or l.listeners for opAccept, l.zc.recs for a
// zero-copy send, whose record knows its connection). A slot's generation
// changes each time it is given to a new connection, and a slot is reused
// only after the last CQE of its previous connection, so a CQE whose
// generation differs from its slot's is a bug; it is dropped, not applied.
const genMask = 1<<24 - 1

func pack(o op, gen, slot uint32) uint64 {
	return uint64(o)<<56 | uint64(gen&genMask)<<32 | uint64(slot)
}

func unpack(ud uint64) (o op, gen, slot uint32) {
	return op(ud >> 56), uint32(ud>>32) & genMask, uint32(ud)
}

// loop is one event loop; every field is owned by its thread, but the
// Lifecycle's Stop and Waker, which other goroutines use to interrupt it.
type loop struct {
	srv   *core.Server
	id    int
	core  *core.Loop
	stats *core.Stats
	sys   loops.Sys // makes and counts the loop's system calls; ring.enter counts io_uring_enter
	pass  uint64    // passes of Run: a reap, then an enter that waits or catches up (and one per full SQ)

	undeferred bool // TCP_DEFER_ACCEPT is off on the listeners (core.Server.Retiring)

	ring       *ring
	bufs       *bufRing
	recv       recvBufs        // how a recv's buffers are fed and given back: bufs, or its spans (bufspan_linux.go)
	bodies     bodies          // file bodies' carriers: pipes and chunks (body_linux.go)
	zc         zcSends         // zero-copy sends until their notification (sendzc_linux.go)
	res        loops.Residency // which parts of a body are in the page cache
	budget     *pipeBudget     // shared by the server's loops
	stdoutBufs stdoutBufs      // CGI pipe reads land here
	files      *fileCalls      // the core's file-system calls, through the ring

	listeners []listener
	accepted  fdQueue // accepted sockets a pass has yet to admit
	conns     []*conn // by slot
	freeSlots []uint32
	nconns    int // connections whose fd is open
	// closesQueued counts the IORING_OP_CLOSEs queued whose CQE has not
	// come (admit); free takes each off.
	closesQueued int
	inflight     int // SQEs whose last CQE has not come

	ops *opTable // what takes each op's CQE (complete_linux.go)
	// queued, when set (Backend.SubmitEach: submitEach), is told of each
	// SQE queueAs finished; by default it is nil, and the SQE waits for
	// the pass's enter.
	queued  func(l *loop, e *giouring.SubmissionQueueEntry)
	cqes    []*giouring.CompletionQueueEvent
	batch   []cqeCopy
	wait    waitArg
	catch   waitArg // catchUp's: a zero timeout
	yielder yielder // waitRaw, catchUp: when to lend the P (yield)
	// waitFirst and waitVia are what a pass does before it waits (nil:
	// nothing), and how it waits (chooseWait, wait_linux.go).
	waitFirst func(l *loop) bool
	waitVia   func(l *loop, n uint32) (int, unix.Errno)
	cfg       Backend
	// What a recv's and an accept's SQE add to their ioprio: multishot
	// (but with Backend.OneShot), and IORING_RECVSEND_BUNDLE with
	// --uring-recv-bundle.
	recvPrio, acceptPrio uint16
	scratch              giouring.SubmissionQueueEntry // see sqe

	// sock is what kind of socket the connections are (socket_linux.go);
	// with direct descriptors (--uring-fixed-files) sockFlags marks the
	// SQEs of the ops on a socket IOSQE_FIXED_FILE (fixedfd_linux.go), and
	// is all zeros otherwise.
	sock      sockets
	sockFlags [numOps]uint8

	err  error    // the ring failed: the loop stops
	wake wakeRead // the read of the Waker's eventfd

	// Last: other goroutines write its Waker's lock (Stop, core.Loop.Post),
	// which had better not share a cache line with what each pass reads.
	loops.Lifecycle
}

func newLoop(srv *core.Server, id int, fds []int, cfg Backend, budget *pipeBudget) *loop {
	l := &loop{srv: srv, id: id, wake: wakeRead{fd: -1}, cfg: cfg, budget: budget, ops: newOpTable()}
	if cfg.SubmitEach {
		l.queued = (*loop).submitEach
	}
	for _, fd := range fds {
		l.listeners = append(l.listeners, listener{fd: fd})
	}
	return l
}

// ringEntries sizes the CQ for the completions one pass may find ready,
// a slot per connection the loop may hold up to maxCQ, and the SQ to half
// of that, up to maxSQ. Beyond the CQ the kernel's NODROP overflow list
// keeps completions until they are reaped (counted: cq_overflows); when
// the SQ is full, sqe submits. The kernel goes round both rings, so each
// is resident in full: sized by the default --max-conns alone they were
// 65,536 CQEs and 4,096 SQEs, 1.3 MB of every loop, while at 10,000
// keep-alive connections no pass found more than about 8,000 CQEs ready
// (cq_ready_peak; results/2026-12-02_b966187_c10k-rss). An SQ as large as
// half the CQ was once 32,768 SQEs (results/2026-12-01_c10k-accept).
func ringEntries(maxConns int) (sq, cq uint32) {
	n := uint32(256)
	for n < maxCQ/2 && int(n)*2 < maxConns {
		n *= 2
	}
	return min(n, maxSQ), 2 * n
}

// maxCQ bounds the CQ: a pass that finds more completions than this
// reaps the rest from the kernel's overflow list. maxSQ bounds the SQ:
// more SQEs than this in one pass cost one more io_uring_enter per maxSQ.
const (
	maxCQ = 16384
	maxSQ = 1024
)

// Setup runs on the loop's locked thread (loops.Loop): with SINGLE_ISSUER
// the ring belongs to the thread that creates it.
func (l *loop) Setup() error {
	l.core = l.srv.NewLoop(l.id)
	l.stats = &l.core.Stats
	l.stats.OwnCounters = counters[:]
	l.sys = loops.NewSys(l.stats)
	l.res = loops.NewResidency(l.sys)
	l.cqes = make([]*giouring.CompletionQueueEvent, cqeBatch)
	l.batch = make([]cqeCopy, cqeBatch)
	var err error
	sq, cq := ringEntries(l.srv.Config.MaxConns)
	if l.cfg.Features != (Features{}) {
		if err = l.cfg.checkFeatures(); err != nil {
			return err
		}
	}
	if l.ring, err = newRing(sq, cq, l.cfg.Wait.setupExtra(), l.cfg.Features); err != nil {
		return err
	}
	l.ring.st = l.stats
	l.chooseWait()
	if err = l.ring.checkOps(l.cfg.Body == BodyViewZC, l.cfg.Features); err != nil {
		return err
	}
	if l.cfg.zeroCopy() {
		l.zc.init(&l.cfg, l.stats, l.sys)
		l.zc.setOps(l.ops)
		if l.ring.reportsUsage() {
			l.zc.report = sendZCReportUsage
		}
	}
	l.sock = plainSockets{}
	if l.cfg.Features.SkipSend {
		l.ops.skipSends()
	}
	if l.cfg.Features.FixedFiles {
		if err = l.setUpDirect(); err != nil {
			return err
		}
	}
	if l.cfg.Features.WaitRegion {
		l.ring.useWaitRegion(&l.wait, &l.catch)
	}
	if l.bufs, err = newBufRing(l.ring, l.cfg.bufCount, l.cfg.bufSize, l.cfg.Features); err != nil {
		return err
	}
	l.recv = l.bufs.use()
	l.stats.Own[ownRecvBufBytes] = int64(l.cfg.bufCount * l.cfg.bufSize)
	if !l.cfg.OneShot {
		l.recvPrio, l.acceptPrio = giouring.RecvMultishot, giouring.AcceptMultishot
	}
	if l.cfg.Features.Bundle {
		l.recvPrio |= recvSendBundle
	}
	if err = l.ring.maxWorkers(l.cfg.workers); err != nil {
		return err
	}
	l.bodies.init(&l.cfg, l.budget, l.stats, l)
	if l.wake.buf, err = unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil { // uncounted: setup
		return os.NewSyscallError("mmap", err)
	}
	// A blocking eventfd: io_uring polls it; the writer never blocks.
	if l.wake.fd, err = l.Waker.Open(0); err != nil {
		return err
	}
	l.armWake()
	l.core.SetWaker(l.Waker.Wake) // to run what CGI goroutines post (core.Loop.Post)
	if l.files, err = newFileCalls(l); err != nil {
		return err
	}
	l.core.SetFileCalls(l.files)
	if l.cfg.onSetup != nil {
		l.cfg.onSetup(l)
	}
	for i := range l.listeners {
		l.armAccept(i)
	}
	return nil
}

// fatal records the ring's failure: Run returns it, and the process ends
// (loops.Serve).
func (l *loop) fatal(err error) {
	if l.err == nil {
		l.err = err
	}
}

// Run is the event loop (loops.Loop); Teardown follows it. It returns nil
// once shut down, or the error that stopped the ring.
func (l *loop) Run() error {
	for l.err == nil {
		l.pass++
		// The clock is set before the completions are handled and
		// sockets admitted, which stamp the Conns with it (a new one's
		// header timeout counts from it): set after, a socket accepted
		// on waking from a second's sleep was stamped with the time
		// before it, and closed unanswered by the everySecond below
		// with a 1 s --header-timeout (TestTrickledHeadTimesOut).
		// The timeouts are applied after, to what the CQEs brought.
		now := time.Now()
		second := l.core.Tick(now)
		l.reap()
		if len(l.bodies.pipes.wait) > 0 {
			l.servePipeWaiters() // splice_linux.go: bodies in line for a pipe the CQEs gave back
		}
		if len(l.accepted.fds) > 0 {
			l.admit() // accept_linux.go: sockets the accepts queued
		}
		if second {
			l.everySecond()
		}
		if l.Stopping() {
			if l.nconns == 0 && l.accepted.len() == 0 && l.sock.pending() == 0 && l.listenersClosed() || now.After(l.Deadline()) {
				return nil
			}
		} else {
			l.Resume(now)
			for i := range l.listeners {
				if !l.listeners[i].armed {
					l.armAccept(i) // one that ended, or was paused
				}
			}
		}
		l.enterAndWait()
	}
	return l.err
}

// enterAndWait is the one kernel entry of a pass: it submits the queued
// SQEs and waits for a completion or the next second. Backend.Wait says
// how it sleeps (waitVia, chosen at Setup: chooseWait): by default
// waitRaw, a raw enter after lending the P to any goroutine waiting for
// one (yield), then Syscall6, through which the runtime can give this
// thread's P away while the loop sleeps long. With Backend.RawSubmit,
// WaitSpin or --uring-sqpoll, waitFirst may end the pass first
// (wait_linux.go). With Backend.SubmitEach every SQE went in as it was
// queued, and this only waits. results/uring-doc-tables.md measured each.
// While accepted sockets can be admitted it only catches up (catchUp,
// accept_linux.go).
func (l *loop) enterAndWait() {
	if len(l.accepted.fds) > 0 && l.admitting() {
		// Sockets wait to be admitted: go on with the next pass without
		// waiting. While closes hold admission back (admit) the loop
		// waits as usual: their CQEs wake it.
		l.catchUp()
		return
	}
	if l.waitFirst != nil && l.waitFirst(l) {
		return // completions came without a wait
	}
	l.bufs.publish()
	// Wake at the next second or when accepting resumes
	// (Lifecycle.Timeout), or earlier when the shutdown deadline passes.
	now := time.Now()
	d := l.Timeout(now)
	if l.Stopping() {
		d = min(d, l.Deadline().Sub(now))
	}
	l.wait.ts = unix.NsecToTimespec(int64(max(d, time.Millisecond)))
	n := l.ring.v.flushSQ()
	_, errno := l.waitVia(l, n)
	if errno = loops.WaitErrno(l.id, errno); errno != 0 && errno != unix.ETIME {
		l.enterFailed(errno)
	}
}

// How a pass waits by default (waitRaw, yield; Wait says what each
// --uring-wait mode does).
const (
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

// enterFailed ends the loop if a pass's enter failed in a way the next
// pass cannot sort out. Its callers pass it neither 0 (submitted:
// ring.enter counted it and the SQEs) nor ETIME (the wait timed out).
func (l *loop) enterFailed(errno unix.Errno) {
	switch errno {
	case unix.EINTR, unix.EBUSY, unix.EAGAIN:
		// A signal (the runtime's preemption), or a CQ to reap first:
		// the next pass sorts it out.
	default:
		l.fatal(os.NewSyscallError("io_uring_enter", errno))
	}
}

// reap handles every CQE that is ready. A batch is copied out of the ring
// and the ring advanced before the first handler runs, so that handlers
// may queue, and with a full SQ submit, SQEs while the kernel has the
// whole CQ to post into.
func (l *loop) reap() {
	if l.ring.CQHasOverflow() {
		l.stats.Own[ownCQOverflows]++ // the CQ was full: see ringEntries
	}
	for l.err == nil {
		ready := l.ring.CQReady()
		if ready == 0 {
			return
		}
		if r := int64(ready); r > l.stats.Own[ownCQReadyPeak] {
			l.stats.Own[ownCQReadyPeak] = r // ringEntries
		}
		// giouring's PeekBatchCQE walks the whole slice it is given.
		n := l.ring.PeekBatchCQE(l.cqes[:min(int(ready), len(l.cqes))])
		for i, e := range l.cqes[:n] {
			l.batch[i] = cqeCopy{ud: e.UserData, res: e.Res, flags: e.Flags}
		}
		l.ring.CQAdvance(n)
		l.stats.Own[ownCQEs] += int64(n)
		for _, e := range l.batch[:n] {
			// The CQE goes to its op's handler (complete_linux.go);
			// the op, generation and slot are unpack's.
			o := op(e.ud >> 56)
			l.ops.loop[o](l, o, uint32(e.ud>>32)&genMask, uint32(e.ud), e.res, e.flags)
		}
	}
}

// sqe returns a zeroed SQE, submitting what is queued when the SQ is full.
// giouring's Prepare* leave rw_flags, addr3 and the padding as the
// previous user of the slot left them, hence the zeroing. Should the
// kernel take nothing (it never does with NODROP on Linux 5.19 and later),
// the loop stops rather than spin, and the caller fills a scratch SQE.
func (l *loop) sqe() *giouring.SubmissionQueueEntry {
	for range 3 {
		if e := l.ring.GetSQE(); e != nil {
			*e = giouring.SubmissionQueueEntry{}
			return e
		}
		l.submit()
	}
	l.fatal(errors.New("io_uring: the submission queue stays full"))
	l.scratch = giouring.SubmissionQueueEntry{}
	return &l.scratch
}

// reserve makes room for n SQEs that must reach the kernel in the same
// submission (a linked chain).
func (l *loop) reserve(n uint32) {
	if l.ring.SQSpaceLeft() < n {
		l.ring.submitVia(l, n)
	}
}

// submit hands the queued SQEs to the kernel without waiting
// (ring.submitVia).
func (l *loop) submit() { l.ring.submitVia(l, 1) }

// enterSubmit is submit by io_uring_enter: the queued SQEs go in, which
// leaves the whole SQ free.
func (l *loop) enterSubmit(uint32) {
	l.bufs.publish()
	for {
		n := l.ring.v.flushSQ()
		if n == 0 {
			return
		}
		got, errno := l.ring.enter(n, 0, getEvents, nil, false)
		switch errno {
		case 0:
			if uint32(got) == n {
				return
			}
		case unix.EINTR:
		case unix.EBUSY, unix.EAGAIN:
			// The CQ overflowed or the kernel is short of memory: the
			// caller must reap before more can go in. The SQEs stay
			// queued and go with the next enter.
			return
		default:
			l.fatal(os.NewSyscallError("io_uring_enter", errno))
			return
		}
	}
}

// queue is the last step of preparing an SQE: it sets its user_data to o
// and cn's generation and slot (cn nil: one of the loop's own SQEs, the
// wake read or a cancel, generation and slot 0) and counts it in flight.
func (l *loop) queue(e *giouring.SubmissionQueueEntry, o op, cn *conn) {
	e.UserData = uint64(o) << 56 // pack's layout
	if cn != nil {
		e.UserData |= uint64(cn.gen)<<32 | uint64(cn.slot)
		cn.inflight++
	}
	e.Flags |= l.sockFlags[o]
	l.inflight++
	if l.queued != nil {
		l.queued(l, e)
	}
}

// queueAs is queue with the generation and slot given: an accept's slot is
// its listener's index. Both mark, with --uring-fixed-files, an SQE on a
// socket IOSQE_FIXED_FILE (sockFlags), and tell queued, which with
// Backend.SubmitEach submits the SQE at once (submiteach_linux.go).
func (l *loop) queueAs(e *giouring.SubmissionQueueEntry, o op, gen, slot uint32) {
	e.UserData = pack(o, gen, slot)
	e.Flags |= l.sockFlags[o]
	l.inflight++
	if l.queued != nil {
		l.queued(l, e)
	}
}

// everySecond applies the timeouts. Scanning every connection once a second
// costs less than a timer each.
func (l *loop) everySecond() {
	l.bodies.trim()
	if !l.undeferred && l.srv.Retiring() {
		l.undeferred = true
		for i := range l.listeners {
			if ln := &l.listeners[i]; !ln.closed {
				l.sys.Undefer(ln.fd)
			}
		}
	}
	for _, cn := range l.conns {
		if cn.life != lifeOpen {
			continue
		}
		switch cn.c.CheckTimeout() {
		case core.ActClose:
			l.close(cn)
		case core.ActWrite:
			l.drive(cn)
		}
	}
}
