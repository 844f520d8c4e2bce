package uring

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
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
	// ENOBUFS and is re-armed, without losing data.
	bufCount = 1024
	bufSize  = 4 << 10
	// chunkSize is one read + send of a file body that goes by chunk
	// (Backend.ReadBodies, or the pipe budget spent). doc.go: a 1 MiB
	// chunk did not help.
	chunkSize = 128 << 10
	// maxWorkers bounds the io_uring worker threads of the whole
	// process, split between the loops (IORING_REGISTER_IOWQ_MAX_WORKERS
	// per loop, bounded and unbounded alike): splices run on them, but
	// never wait for a client there (body_linux.go).
	maxWorkers = 16
)

const (
	// cqeBatch is how many CQEs one PeekBatchCQE takes.
	cqeBatch = 256
	// drainLimit bounds the wait for the last completions at teardown.
	drainLimit = 5 * time.Second
)

// op is what an SQE asked for; it is the top byte of its user_data.
type op uint8

const (
	opAccept     op = iota + 1 // multishot accept; slot: listener index
	opWake                     // read of the wake-up eventfd
	opCancelLoop               // cancel of an accept or of the wake read
	opRecv                     // a connection's multishot recv
	opSend                     // send of Out().Mem
	opBodyIn                   // read of a file chunk, or splice of it into a pipe
	opBodyOut                  // send of that chunk, or splice of the pipe to the socket
	opBodyPoll                 // poll for POLLOUT before a splice to a full socket
	opShutdown                 // shutdown(2) of a connection
	opCancel                   // cancel of a connection's recv
	opClose                    // close(2) of a connection
	opPipeRead                 // read of a CGI script's output pipe
	opPipeCancel               // cancel of that read
)

// user_data layout, as in liburing's echo-server example:
//
//	 63      56 55          32 31           0
//	+----------+--------------+--------------+
//	|    op    |  generation  |     slot     |
//	+----------+--------------+--------------+
//
// slot indexes l.conns (or l.listeners for opAccept). A slot's generation
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

// conn is one accepted socket. Its fields are owned by the loop's thread.
type conn struct {
	c    *core.Conn
	fd   int
	slot uint32
	gen  uint32
	live bool

	inflight int  // SQEs whose last CQE has not come; the slot is reused only at 0
	recv     bool // a multishot recv is armed
	recvStop bool // a cancel of it is in flight
	eof      bool // the peer sent FIN: no recv is armed again
	shutting int  // IORING_OP_SHUTDOWNs in flight (see close)

	// The send chain (body_linux.go): [send Mem] → [poll] → [body in → body out].
	chain      int            // its SQEs still in flight
	memSend    bool           // the Mem send has not completed
	pin        runtime.Pinner // pins Out().Mem while the kernel reads it
	bodyPipe   int32          // the pipe the body goes through (l.pipes), -1 none
	chunk      int32          // or the chunk (l.chunks), -1 none
	bodyLen    int32          // bytes asked of the body-in step
	pipeBytes  int64          // splice: body bytes in the pipe, not yet in the socket
	pollOut    bool           // splice: the socket was full; wait for POLLOUT first
	polled     bool           // a POLLOUT wait has just ended: the socket has room
	pipeActive bool           // its chain holds a pipe and waits for no client (l.pipesActive)
	waiting    bool           // in l.pipeWait
	lateBody   int64          // body bytes sent before the Mem send's CQE was seen

	closing     bool // no new operations; freed once inflight is 0
	closeQueued bool // the IORING_OP_CLOSE is queued

	// A CGI script's output (cgi_linux.go): one read at a time.
	pipe     int   // the Conn's pipe being read, -1 none
	pipeRead bool  // a read of it is in flight
	pipeBuf  int32 // that read's buffer in l.pipeBufs, -1 none
	cgiPages bool  // cgiPipePages of the budget are counted for pipe
}

type listener struct {
	fd        int
	armed     bool // a multishot accept is armed
	cancelled bool // a cancel of it is in flight
	closed    bool
}

// loop is one event loop; every field is owned by its thread, but stopReq
// and waker, which other goroutines use to interrupt it.
type loop struct {
	srv   *core.Server
	id    int
	core  *core.Loop
	stats *core.Stats

	ring     *ring
	bufs     *bufRing
	chunks   chunks
	pipes    *pipes      // nil with Backend.ReadBodies
	budget   *pipeBudget // shared by the server's loops
	pipeBufs pipeBufs    // CGI pipe reads land here
	misc     []byte      // mmap'd; misc[:8] receives the wake eventfd's counter

	listeners []listener
	conns     []*conn // by slot
	freeSlots []uint32
	nconns    int // connections whose fd is open
	inflight  int // SQEs whose last CQE has not come

	pipesActive int      // pipes held by chains that wait for no client
	pipeWait    []uint64 // connections waiting for one of them, oldest first

	cqes      []*giouring.CompletionQueueEvent
	batch     []cqeCopy
	wait      waitArg
	wakeArmed bool // the wake read is in flight
	wakeOff   bool // teardown: the wake read is cancelled, not re-armed
	cfg       Backend
	scratch   giouring.SubmissionQueueEntry // see sqe

	paused      bool // accepting is off until pausedUntil after EMFILE/ENFILE
	pausedUntil time.Time
	stopping    bool
	deadline    time.Time // stopping: in-flight responses get until then
	err         error     // the ring failed: the loop stops

	stopReq atomic.Bool // Serve's ctx is done: the next wake-up starts the shutdown
	waker   loops.Waker
	wakefd  int // waker's eventfd, -1 none
}

func newLoop(srv *core.Server, id int, fds []int, cfg Backend, budget *pipeBudget) *loop {
	l := &loop{srv: srv, id: id, wakefd: -1, cfg: cfg, budget: budget}
	for _, fd := range fds {
		l.listeners = append(l.listeners, listener{fd: fd})
	}
	return l
}

// sqEntries sizes the SQ so that the CQ, twice as large, has room for a
// completion from every connection the loop may hold. Beyond that the
// kernel's NODROP overflow list keeps completions until they are reaped.
func sqEntries(maxConns int) uint32 {
	n := uint32(256)
	for n < 32768 && int(n)*2 < maxConns {
		n *= 2
	}
	return n
}

// Setup runs on the loop's locked thread (loops.Loop): with SINGLE_ISSUER
// the ring belongs to the thread that creates it.
func (l *loop) Setup() error {
	l.core = l.srv.NewLoop(l.id)
	l.stats = &l.core.Stats
	l.cqes = make([]*giouring.CompletionQueueEvent, cqeBatch)
	l.batch = make([]cqeCopy, cqeBatch)
	var err error
	if l.ring, err = newRing(sqEntries(l.srv.Config.MaxConns), l.cfg.Wait.setupExtra()); err != nil {
		return err
	}
	if err = l.ring.checkOps(); err != nil {
		return err
	}
	if l.bufs, err = newBufRing(l.ring, l.cfg.bufCount, l.cfg.bufSize); err != nil {
		return err
	}
	if err = l.ring.maxWorkers(l.cfg.workers); err != nil {
		return err
	}
	if !l.cfg.ReadBodies {
		l.pipes = &pipes{budget: l.budget}
	}
	if l.misc, err = unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return os.NewSyscallError("mmap", err)
	}
	// A blocking eventfd: io_uring polls it; the writer never blocks.
	if l.wakefd, err = l.waker.Open(0); err != nil {
		return err
	}
	l.armWake()
	l.core.SetWaker(l.waker.Wake) // to run what CGI goroutines post (core.Loop.Post)
	for i := range l.listeners {
		l.armAccept(i)
	}
	return nil
}

// Stop asks the loop to start its shutdown, from Serve's goroutine.
func (l *loop) Stop() {
	l.stopReq.Store(true)
	l.waker.Wake()
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
		l.reap()
		now := time.Now()
		if l.core.Tick(now) {
			l.everySecond()
		}
		if l.stopping {
			if l.nconns == 0 && l.listenersClosed() || now.After(l.deadline) {
				return nil
			}
		} else {
			if l.paused && !now.Before(l.pausedUntil) {
				l.paused = false
			}
			for i := range l.listeners {
				l.armAccept(i)
			}
		}
		l.enterAndWait()
	}
	return l.err
}

// enterAndWait is the one kernel entry of a pass: it submits the queued
// SQEs and waits, with min_complete 1, for a completion or the next
// second. It goes through Syscall6, so that the runtime can give this
// thread's P to the GC or the shutdown goroutine while the loop sleeps.
// With Backend.RawSubmit, queued SQEs first go in through a raw,
// non-blocking enter that also runs the completions deferred to this
// thread (DEFER_TASKRUN), and the loop sleeps only when that yields no
// CQE. With Backend.SubmitEach every SQE went in as it was queued, and
// this only waits. Backend.Wait says how it sleeps (wait_linux.go). See
// doc.go for what each costs.
func (l *loop) enterAndWait() {
	if (l.cfg.RawSubmit || l.cfg.Wait == WaitSpin) && l.ring.v.flushSQ() > 0 {
		l.submit()
		if l.err != nil || l.ring.CQReady() > 0 {
			return
		}
	}
	if l.cfg.Wait == WaitSpin && l.spin() {
		return
	}
	l.bufs.publish()
	l.setTimeout()
	n := l.ring.v.flushSQ()
	got, errno := l.waitEnter(n)
	l.stats.Syscalls[core.SysUringEnter]++
	if loops.Fault != nil {
		if e := loops.Fault(l.id); e != 0 {
			errno = e
		}
	}
	switch errno {
	case 0:
		l.stats.SQEs += uint64(got)
	case unix.ETIME, unix.EINTR, unix.EBUSY, unix.EAGAIN:
		// Timeout, a signal (the runtime's preemption), or a CQ to reap
		// first: the next pass sorts it out.
	default:
		l.fatal(os.NewSyscallError("io_uring_enter", errno))
	}
}

// setTimeout wakes the loop at the next second, when timeouts are checked
// and the Date line changes, or earlier when accepting resumes or the
// shutdown deadline passes.
func (l *loop) setTimeout() {
	now := time.Now()
	d := time.Second - time.Duration(now.Nanosecond())
	if l.paused {
		d = min(d, l.pausedUntil.Sub(now))
	}
	if l.stopping {
		d = min(d, l.deadline.Sub(now))
	}
	l.wait.ts = unix.NsecToTimespec(int64(max(d, time.Millisecond)))
}

// reap handles every CQE that is ready. A batch is copied out of the ring
// and the ring advanced before the first handler runs, so that handlers
// may queue, and with a full SQ submit, SQEs while the kernel has the
// whole CQ to post into.
func (l *loop) reap() {
	for l.err == nil {
		ready := l.ring.CQReady()
		if ready == 0 {
			return
		}
		// giouring's PeekBatchCQE walks the whole slice it is given.
		n := l.ring.PeekBatchCQE(l.cqes[:min(int(ready), len(l.cqes))])
		for i, e := range l.cqes[:n] {
			l.batch[i] = cqeCopy{ud: e.UserData, res: e.Res, flags: e.Flags}
		}
		l.ring.CQAdvance(n)
		l.stats.CQEs += uint64(n)
		for _, e := range l.batch[:n] {
			l.complete(e.ud, e.res, e.flags)
		}
	}
}

// complete dispatches one CQE.
func (l *loop) complete(ud uint64, res int32, flags uint32) {
	o, gen, slot := unpack(ud)
	final := flags&giouring.CQEFMore == 0
	if final {
		l.inflight--
	}
	switch o {
	case opAccept:
		l.onAccept(int(slot), res, final)
		return
	case opWake:
		l.woken(res)
		return
	case opCancelLoop:
		return
	}
	var cn *conn
	if int(slot) < len(l.conns) {
		cn = l.conns[slot]
	}
	if cn == nil || !cn.live || cn.gen != gen {
		if flags&giouring.CQEFBuffer != 0 {
			l.bufs.recycle(uint16(flags >> giouring.CQEBufferShift))
		}
		return
	}
	if final {
		cn.inflight--
	}
	switch o {
	case opRecv:
		l.onRecv(cn, res, flags, final)
	case opSend:
		l.onSend(cn, res)
	case opBodyIn:
		l.onBodyIn(cn, res)
	case opBodyOut:
		l.onBodyOut(cn, res)
	case opBodyPoll:
		l.onBodyPoll(cn, res)
	case opCancel:
		cn.recvStop = false
	case opPipeRead:
		l.onPipeRead(cn, res)
	case opShutdown:
		cn.shutting--
	case opClose, opPipeCancel:
	}
	if cn.closing {
		l.finishClose(cn)
	} else {
		l.drive(cn)
	}
	l.servePipeWaiters()
}

// queue is the last step of preparing an SQE: it sets its user_data to o
// and cn's generation and slot (cn nil: one of the loop's own SQEs, the
// wake read or a cancel, generation and slot 0) and counts it in flight.
func (l *loop) queue(e *giouring.SubmissionQueueEntry, o op, cn *conn) {
	var gen, slot uint32
	if cn != nil {
		gen, slot = cn.gen, cn.slot
		cn.inflight++
	}
	l.queueAs(e, o, gen, slot)
}

// queueAs is queue with the generation and slot given: an accept's slot is
// its listener's index. With Backend.SubmitEach it submits the SQE at
// once, unless it links to the next one.
func (l *loop) queueAs(e *giouring.SubmissionQueueEntry, o op, gen, slot uint32) {
	e.UserData = pack(o, gen, slot)
	l.inflight++
	if l.cfg.SubmitEach && e.Flags&(giouring.SqeIOLink|giouring.SqeIOHardlink) == 0 {
		l.submit()
	}
}

// woken handles the wake read's completion: the shutdown, and what CGI
// goroutines posted. The read is re-armed first, so that a Post after
// RunPosted has taken the queue wakes the loop again.
func (l *loop) woken(res int32) {
	l.wakeArmed = false
	if res == -int32(unix.ECANCELED) || l.wakeOff {
		return
	}
	l.armWake()
	if l.stopReq.Load() {
		l.beginStop(time.Now())
	}
	for _, c := range l.core.RunPosted() {
		if cn := l.conns[c.Handle]; cn.live && cn.c == c {
			l.drive(cn)
		}
	}
}

func (l *loop) armWake() {
	e := l.sqe()
	e.PrepareRead(l.wakefd, addrOf(l.misc[:8]), 8, 0) // io_uring_prep_read(3)
	l.queue(e, opWake, nil)
	l.wakeArmed = true
}

// armAccept arms listener i's multishot accept (Linux 5.19), or with
// Backend.OneShot a one-shot one, unless it is armed, paused, or closed.
// The socket is accepted non-blocking: recv and send are polled by
// io_uring either way, but a splice runs on a worker thread, which a
// blocking socket would keep until the client reads (body_linux.go).
func (l *loop) armAccept(i int) {
	ln := &l.listeners[i]
	if ln.armed || ln.closed || l.paused || l.stopping {
		return
	}
	e := l.sqe()
	if l.cfg.OneShot {
		e.PrepareAccept(ln.fd, 0, 0, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK) // io_uring_prep_accept(3)
	} else {
		e.PrepareMultishotAccept(ln.fd, 0, 0, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK) // io_uring_prep_multishot_accept(3)
	}
	l.queueAs(e, opAccept, 0, uint32(i))
	ln.armed = true
}

// cancelLoopOp cancels the request with user_data ud (io_uring_prep_cancel64(3)).
func (l *loop) cancelLoopOp(ud uint64) {
	e := l.sqe()
	e.PrepareCancel64(ud, 0)
	l.queue(e, opCancelLoop, nil)
}

func (l *loop) onAccept(i int, res int32, final bool) {
	ln := &l.listeners[i]
	if final {
		ln.armed, ln.cancelled = false, false
	}
	if res >= 0 {
		fd := int(res)
		// Stopping too: a multishot accept goes on accepting until its
		// cancellation completes, and a connection it took is the
		// client's request, not to be reset (a --takeover replacement
		// lost such connections); it is served within the drain.
		switch {
		case l.nconns >= l.srv.Config.MaxConns:
			l.stats.Refused++
			l.stats.Syscalls[core.SysClose]++
			unix.Close(fd)
		default:
			l.newConn(fd)
		}
	} else {
		switch errno := unix.Errno(-res); errno {
		case unix.ECANCELED, unix.EINTR, unix.ECONNABORTED, unix.EAGAIN:
		default:
			l.pauseAccept(errno)
		}
	}
	if final && l.stopping && !ln.closed {
		l.closeListener(ln)
	}
	// An accept that ended (one-shot, or multishot without
	// IORING_CQE_F_MORE) is armed again by the next pass, unless accepting
	// is paused or stopped.
}

// pauseAccept stops accepting for 500 ms, as nginx does, after the
// process ran out of fds or memory (or accept failed in a way it does not
// know): the pending connection stays in the backlog, and accepting it
// again at once would spin.
func (l *loop) pauseAccept(errno unix.Errno) {
	if !l.paused {
		hint := ""
		switch errno {
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			hint = " (raise the fd limit with ulimit -n, or lower --max-conns)"
		}
		fmt.Fprintf(os.Stderr, "twinloop: loop %d: accept: %v; not accepting for 500ms%s\n", l.id, errno, hint)
	}
	l.paused = true
	l.pausedUntil = time.Now().Add(500 * time.Millisecond)
	for i := range l.listeners {
		if ln := &l.listeners[i]; ln.armed && !ln.cancelled {
			l.cancelLoopOp(pack(opAccept, 0, uint32(i)))
			ln.cancelled = true
		}
	}
}

func (l *loop) closeListener(ln *listener) {
	l.stats.Syscalls[core.SysClose]++
	unix.Close(ln.fd)
	ln.closed = true
}

func (l *loop) listenersClosed() bool {
	for i := range l.listeners {
		if !l.listeners[i].closed {
			return false
		}
	}
	return true
}

func (l *loop) newConn(fd int) {
	var cn *conn
	if n := len(l.freeSlots); n > 0 {
		cn = l.conns[l.freeSlots[n-1]]
		l.freeSlots = l.freeSlots[:n-1]
	} else {
		cn = &conn{slot: uint32(len(l.conns))}
		l.conns = append(l.conns, cn)
	}
	gen := (cn.gen + 1) & genMask
	if gen == 0 {
		gen = 1
	}
	*cn = conn{slot: cn.slot, gen: gen, fd: fd, live: true, bodyPipe: -1, chunk: -1, pipe: -1, pipeBuf: -1}
	remote, local := loops.Addrs(l.srv, fd)
	cn.c = l.core.NewConn(remote)
	cn.c.Handle, cn.c.Local = int(cn.slot), local
	l.nconns++
	l.stats.Accepts++
	l.drive(cn)
}

// drive moves a connection along until it waits for a completion.
func (l *loop) drive(cn *conn) {
	for !cn.closing {
		l.syncPipe(cn)
		switch cn.c.Next() {
		case core.ActWrite:
			if cn.chain == 0 && !cn.waiting {
				l.send(cn)
			}
			l.syncRecv(cn)
			return
		case core.ActRead:
			if l.stopping && cn.c.Idle() && cn.chain == 0 {
				l.close(cn)
				return
			}
			l.syncRecv(cn)
			return
		case core.ActLinger:
			l.shutdown(cn, unix.SHUT_WR)
			cn.c.Linger()
		case core.ActClose:
			l.close(cn)
			return
		}
	}
}

// syncRecv keeps a recv armed exactly while the Conn wants input: a
// multishot one, or with Backend.OneShot a one-shot one, armed again
// after each completion. Bytes that arrive before a cancel takes effect
// are fed anyway: the core accepts them.
func (l *loop) syncRecv(cn *conn) {
	want := cn.c.WantRead() && !cn.eof
	switch {
	case want && !cn.recv:
		e := l.sqe()
		if l.cfg.OneShot {
			e.PrepareRecv(cn.fd, 0, 0, 0) // io_uring_prep_recv(3)
		} else {
			// io_uring_prep_recv_multishot(3) (Linux 6.0): one SQE keeps
			// producing a CQE per arrival until it fails, ENOBUFS included.
			e.PrepareRecvMultishot(cn.fd, 0, 0, 0)
		}
		// Either takes a buffer from the ring (length 0: its size).
		e.Flags |= giouring.SqeBufferSelect // Prepare* cleared Flags and BufIG
		e.BufIG = bufGroup
		l.queue(e, opRecv, cn)
		cn.recv = true
	case !want:
		l.cancelRecv(cn)
	}
}

// cancelRecv cancels the armed recv, unless a cancel is on its way.
func (l *loop) cancelRecv(cn *conn) {
	if cn.recv && !cn.recvStop {
		e := l.sqe()
		e.PrepareCancel64(pack(opRecv, cn.gen, cn.slot), 0) // io_uring_prep_cancel64(3)
		l.queue(e, opCancel, cn)
		cn.recvStop = true
	}
}

func (l *loop) onRecv(cn *conn, res int32, flags uint32, final bool) {
	if final {
		cn.recv = false
	}
	if flags&giouring.CQEFBuffer != 0 {
		id := uint16(flags >> giouring.CQEBufferShift)
		if res > 0 && !cn.closing {
			cn.c.Feed(l.bufs.buf(id)[:res]) // Feed copies what it keeps
		}
		l.bufs.recycle(id)
	}
	switch {
	case res >= 0:
		if res == 0 {
			cn.eof = true
			cn.c.EOF()
		}
	case res == -int32(unix.ENOBUFS):
		// The buffer ring ran dry; the recv ended and drive arms it again.
		// The data waits in the socket.
	case res == -int32(unix.ECANCELED):
	default:
		l.close(cn) // ECONNRESET and the like
	}
}

// shutdown queues shutdown(2) of the connection (io_uring_prep_shutdown(3)).
func (l *loop) shutdown(cn *conn, how int) {
	e := l.sqe()
	e.PrepareShutdown(cn.fd, how)
	l.queue(e, opShutdown, cn)
	cn.shutting++
}

// close ends a connection. The socket is closed only once no request of
// the connection can still look its fd up: a request resolves its fd when
// it is issued, and a linked one is issued late, so closing under a chain
// could make its send reach whichever socket gets the fd number next.
//
//   - Nothing in flight: close now.
//   - Only the multishot recv in flight (the usual case): cancel it and
//     close, hard-linked in one submission; the recv holds its own
//     reference to the socket until its final CQE.
//   - A send chain in flight: shutdown(SHUT_RDWR) ends its sends (EPIPE)
//     and the recv (EOF); the close follows the last CQE.
//   - A shutdown in flight (the lingering close's SHUT_WR): the recv is
//     cancelled and the close follows the shutdown's CQE. IORING_OP_SHUTDOWN,
//     like IORING_OP_SPLICE, is always punted to an io_uring worker
//     (REQ_F_FORCE_ASYNC), which looks the fd up only when it runs: closed
//     under it, the fd number can go to the next accepted connection, and
//     the shutdown ends that one before its response (issue 10: 3 to 58 of
//     400 fresh connections lost after a 400, TestBadRequestThenFresh).
//
// The slot, its Conn and its pinned memory are released at the last CQE.
func (l *loop) close(cn *conn) {
	if cn.closing {
		return
	}
	cn.closing = true
	l.stats.Closes++
	if cn.pipeRead {
		// The core closes the pipe in FreeConn, which must wait for the
		// read's CQE.
		e := l.sqe()
		e.PrepareCancel64(pack(opPipeRead, cn.gen, cn.slot), 0)
		l.queue(e, opPipeCancel, cn)
	}
	if cn.chain > 0 {
		l.shutdown(cn, unix.SHUT_RDWR)
		return
	}
	if cn.shutting > 0 {
		l.cancelRecv(cn)
		return // finishClose closes once the shutdown has run
	}
	l.reserve(2)
	if cn.recv {
		e := l.sqe()
		e.PrepareCancel64(pack(opRecv, cn.gen, cn.slot), 0)
		e.Flags = giouring.SqeIOHardlink // the close runs even when the cancel finds nothing
		l.queue(e, opCancel, cn)
	}
	l.queueClose(cn)
}

func (l *loop) queueClose(cn *conn) {
	e := l.sqe()
	e.PrepareClose(cn.fd) // io_uring_prep_close(3)
	l.queue(e, opClose, cn)
	cn.closeQueued = true
}

func (l *loop) finishClose(cn *conn) {
	switch {
	case cn.inflight > 0:
	case !cn.closeQueued:
		l.queueClose(cn)
	default:
		l.free(cn)
	}
}

// free releases a closed connection's slot, once nothing of it is in flight.
func (l *loop) free(cn *conn) {
	cn.pin.Unpin()
	l.releaseCarrier(cn)
	l.setCGIPipe(cn, -1)
	l.core.FreeConn(cn.c)
	cn.c = nil
	cn.live = false
	l.freeSlots = append(l.freeSlots, cn.slot)
	l.nconns--
}

// everySecond applies the timeouts. Scanning every connection once a second
// costs about 1 µs per thousand connections, less than a timer each.
func (l *loop) everySecond() {
	l.trim()
	for _, cn := range l.conns {
		if !cn.live || cn.closing {
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

// beginStop starts the shutdown: no more accepts, idle connections closed,
// the others get until the deadline to finish what they are sending.
func (l *loop) beginStop(now time.Time) {
	if l.stopping {
		return
	}
	l.stopping = true
	l.deadline = now.Add(l.srv.Config.ShutdownTimeout)
	l.core.Drain()
	l.stopAccepting()
	for _, cn := range l.conns {
		if cn.live && !cn.closing && cn.chain == 0 && cn.c.Idle() {
			l.close(cn)
		}
	}
}

// stopAccepting cancels the armed accepts (a multishot accept holds the
// listener open) and closes the listeners that have none.
func (l *loop) stopAccepting() {
	for i := range l.listeners {
		ln := &l.listeners[i]
		switch {
		case ln.closed:
		case !ln.armed:
			l.closeListener(ln)
		case !ln.cancelled:
			l.cancelLoopOp(pack(opAccept, 0, uint32(i)))
			ln.cancelled = true
		}
	}
}

// Teardown ends every request, waits for the last CQE, then closes and
// unmaps everything the loop opened (loops.Loop). The locked goroutine
// returns only once the kernel is done with the loop's memory.
func (l *loop) Teardown() {
	drained := l.ring == nil
	if l.ring != nil && l.err == nil {
		l.stopping = true
		l.stopAccepting()
		l.wakeOff = true
		if l.wakeArmed {
			l.cancelLoopOp(pack(opWake, 0, 0))
		}
		for _, cn := range l.conns {
			if cn.live {
				l.close(cn)
			}
		}
		drained = l.drain()
	}
	for i := range l.listeners {
		if ln := &l.listeners[i]; !ln.closed {
			unix.Close(ln.fd)
			ln.closed = true
		}
	}
	for _, cn := range l.conns {
		if cn.live {
			// Only when the ring failed: close the fd, and leave the
			// Conn alone, since a send may still read its memory.
			cn.pin.Unpin()
			if !cn.closeQueued {
				unix.Close(cn.fd)
			}
			cn.live = false
		}
	}
	if l.core != nil {
		l.core.Close()
	}
	l.waker.Close()
	l.wakefd = -1
	if l.ring != nil {
		l.ring.QueueExit()
	}
	if !drained {
		// Requests may still be running in the kernel, which would write
		// into these buffers: leave them mapped. After a failure of the
		// ring, the process is ending anyway and its one line said why.
		if l.err == nil {
			fmt.Fprintf(os.Stderr, "twinloop: loop %d: %d io_uring requests did not complete; their buffers stay mapped\n", l.id, l.inflight)
		}
		return
	}
	if l.bufs != nil {
		l.bufs.unmap()
	}
	if l.pipes != nil {
		l.pipes.close()
	}
	l.chunks.close()
	l.pipeBufs.close()
	if l.misc != nil {
		unix.Munmap(l.misc)
	}
}

// drain reaps until every request has completed, or drainLimit passes.
func (l *loop) drain() bool {
	limit := time.Now().Add(drainLimit)
	for l.err == nil {
		l.reap()
		if l.inflight == 0 {
			return true
		}
		if time.Now().After(limit) {
			return false
		}
		l.enterAndWait()
	}
	return false
}
