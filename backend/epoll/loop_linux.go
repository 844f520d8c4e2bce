package epoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// Backend is the epoll backend. The zero value is ready to use.
type Backend struct {
	// LevelTriggered registers connections level-triggered, for EPOLLIN
	// only, and adds EPOLLOUT with epoll_ctl while a write waits, as the
	// classic epoll servers do (--epoll-trigger=level); EPOLLIN is taken
	// out while no input is wanted (after EOF), which would otherwise be
	// reported on every pass. It exists to show
	// what edge triggering saves: one or two epoll_ctl per blocked write
	// and the reads that drain to EAGAIN.
	LevelTriggered bool
	// Cork sends a header whose file body follows with TCP_CORK set
	// around the two, cleared when the body's last byte is sent
	// (--epoll-cork=on), instead of the default's MSG_MORE on the header.
	// It exists to show what MSG_MORE saves: two setsockopt per response,
	// and the push that clearing the cork does (results/STUDY.md, "TCP_CORK
	// against MSG_MORE").
	Cork bool
}

// New returns the epoll backend.
func New() *Backend { return &Backend{} }

// Name is the --backend value.
func (*Backend) Name() string { return "epoll" }

// Probe checks that epoll can be created here.
func (*Backend) Probe() error {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC) // uncounted: Probe runs before any loop
	if err != nil {
		return fmt.Errorf("epoll_create1: %w: %w", err, errors.ErrUnsupported)
	}
	unix.Close(fd) // uncounted: Probe
	return nil
}

// Serve runs one loop per listener set until ctx is cancelled.
func (b *Backend) Serve(ctx context.Context, srv *core.Server, ls *core.Listeners) error {
	all := make([]loops.Loop, len(ls.FDs))
	for i := range all {
		all[i] = &loop{srv: srv, id: i, listeners: ls.FDs[i], deferred: ls.Deferred, wakefd: -1, epfd: -1, level: b.LevelTriggered, cork: b.Cork}
	}
	return loops.Serve(ctx, all)
}

// Event data (epoll_event.data, 64 bits):
//
//	 63       62          32 31           0
//	+---------+-------------+--------------+
//	| pipeBit | generation  |   fd (slot)  |
//	+---------+-------------+--------------+
//
// The generation has 31 bits (genMask) and changes with every accepted
// connection, so an event for a closed fd that was reused in the same pass
// is recognised and dropped. Generation 0 marks listeners and the wake-up
// eventfd. A CGI script's output pipe is registered with its connection's
// slot and generation, and pipeBit set.
const (
	pipeBit = 1 << 31
	genMask = pipeBit - 1
	evConn  = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET
	// A pipe is always edge-triggered, --epoll-trigger=level too: level
	// would report it again on every pass while backpressure leaves
	// output in it.
	evPipe = unix.EPOLLIN | unix.EPOLLET
	// Level-triggered mode: EPOLLIN while input is wanted, EPOLLOUT only
	// while a write waits (watch).
	evLevel = unix.EPOLLIN | unix.EPOLLRDHUP
	// readBufSize is the loop's one read buffer, shared by all its
	// connections: the core copies only what it must keep.
	readBufSize = 64 << 10
)

// conn is one accepted socket.
type conn struct {
	fd      int
	gen     uint32
	c       *core.Conn
	levelEv uint32 // level-triggered mode: the events registered
	full    bool   // level-triggered mode: a write found the socket full, and Out is not all sent since

	pipe      int  // the CGI pipe registered with epoll, -1 none
	pipeReady bool // an edge came and the pipe was not read to EAGAIN since
	inReady   bool // an EPOLLIN edge came and no read has emptied the socket since
	// empty: a read said EAGAIN, or came back short, and no EPOLLIN edge
	// came since, so the next read can only say EAGAIN (edge-triggered
	// mode). With --no-defer-accept a new connection starts so, since its
	// request has seldom come: the EPOLLOUT that its ADD reports then
	// reads nothing. rdhup: an event said EPOLLRDHUP, so a FIN may wait
	// behind the data, and a short read no longer proves the socket empty.
	empty, rdhup bool
	corked       bool // --epoll-cork: TCP_CORK is set until the body's last byte

	// body is the file body's state: its read-ahead or chunk on a
	// helper, the range found resident (loops.Bodies).
	body loops.Body
}

// loop is one event loop; every field is owned by its thread, but the
// Lifecycle's Stop and Waker, which other goroutines use to interrupt it.
type loop struct {
	srv       *core.Server
	id        int
	core      *core.Loop
	stats     *core.Stats
	sys       loops.Sys // makes and counts the loop's system calls
	epfd      int
	wakefd    int // waker's eventfd, -1 none
	listeners []int
	deferred  bool // the listeners have TCP_DEFER_ACCEPT (core.Listeners.Deferred)

	conns   []*conn // indexed by fd
	nconns  int
	gen     uint32
	buf     []byte
	iov     []unix.Iovec // writev's room, cleared after each call
	events  []unix.EpollEvent
	accepts loops.Accepts // what accept4's errors do

	level bool  // Backend.LevelTriggered
	cork  bool  // Backend.Cork
	sends sends // plainSends, or corkSends with cork

	bodies *loops.Bodies // sends file bodies, off the disk

	// Last: other goroutines write its Waker's lock (Stop, core.Loop.Post),
	// which had better not share a cache line with what each pass reads.
	loops.Lifecycle
}

// Setup runs on the loop's locked thread (loops.Loop).
func (l *loop) Setup() error {
	l.core = l.srv.NewLoop(l.id)
	l.stats = &l.core.Stats
	l.stats.OwnCounters = counters[:]
	l.sys = loops.NewSys(l.stats)
	l.sends = plainSends{l.sys}
	if l.cork {
		l.sends = corkSends{l.sys}
	}
	l.accepts = loops.Accepts{Loop: l.id, Log: logOut}
	l.bodies = loops.NewBodies(l.srv, l.core, l.sys)
	l.buf = make([]byte, readBufSize)
	l.events = make([]unix.EpollEvent, 256)
	var err error
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil { // uncounted: setup, as the eventfd
		return os.NewSyscallError("epoll_create1", err)
	}
	if l.wakefd, err = l.Waker.Open(unix.EFD_NONBLOCK); err != nil {
		return err
	}
	if err := l.ctl(unix.EPOLL_CTL_ADD, l.wakefd, unix.EPOLLIN, 0); err != nil {
		return err
	}
	l.core.SetWaker(l.Waker.Wake) // to run what CGI goroutines and file-system helpers post (core.Loop.Post)
	for _, fd := range l.listeners {
		if err := l.ctl(unix.EPOLL_CTL_ADD, fd, unix.EPOLLIN|unix.EPOLLET, 0); err != nil {
			return err
		}
	}
	return nil
}

// ctl is epoll_ctl with our event data layout.
func (l *loop) ctl(op, fd int, events uint32, gen uint32) error {
	return l.ctlAs(op, fd, events, fd, gen)
}

// ctlAs registers fd with the event data of slot and gen.
func (l *loop) ctlAs(op, fd int, events uint32, slot int, gen uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(slot), Pad: int32(gen)}
	if err := l.sys.EpollCtl(l.epfd, op, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Run is the event loop (loops.Loop); Teardown follows it. It returns
// nil once shut down, or epoll_wait's error, which ends the process
// (loops.Serve).
func (l *loop) Run() error {
	for {
		// A pass first polls without sleeping (raw, cheap); only when
		// nothing is ready does it block, through the runtime.
		n, errno := l.sys.EpollWait(l.epfd, l.events, 0, false)
		if errno == 0 && n == 0 {
			n, errno = l.sys.EpollWait(l.epfd, l.events, l.waitMillis(), true)
		}
		errno = loops.WaitErrno(l.id, errno)
		if errno != 0 && errno != unix.EINTR {
			return os.NewSyscallError("epoll_wait", errno)
		}
		now := time.Now()
		if l.core.Tick(now) {
			l.everySecond(now)
		}
		for i := 0; i < n; i++ {
			ev := &l.events[i]
			fd, gen := int(ev.Fd), uint32(ev.Pad)
			if gen == 0 {
				if fd == l.wakefd {
					l.woken()
				} else if !l.Stopping() {
					l.accept(fd)
				}
				continue
			}
			cn := l.conn(fd, gen&genMask)
			switch {
			case cn == nil:
			case gen&pipeBit != 0:
				cn.pipeReady = true
				l.drive(cn, 0)
			default:
				l.drive(cn, ev.Events)
			}
		}
		if !l.Stopping() && l.Resume(now) {
			l.resumeAccept()
		}
		if l.Stopping() && (l.nconns == 0 || now.After(l.Deadline())) {
			return nil
		}
	}
}

// conn returns the live connection in slot fd with generation gen, or nil.
func (l *loop) conn(fd int, gen uint32) *conn {
	if fd < len(l.conns) && l.conns[fd] != nil && l.conns[fd].gen == gen {
		return l.conns[fd]
	}
	return nil
}

// woken handles the wake-up eventfd: the shutdown, and what CGI
// goroutines posted.
func (l *loop) woken() {
	var b [8]byte
	l.sys.Read(l.wakefd, b[:]) // resets the counter; EAGAIN if another wake-up took it
	l.beginStop()
	for _, c := range l.core.RunPosted() {
		if cn := l.conns[c.Handle]; cn != nil && cn.c == c {
			l.drive(cn, 0)
		}
	}
}

// waitMillis is how long epoll_wait may sleep (Lifecycle.Timeout), in
// whole milliseconds, at least one.
func (l *loop) waitMillis() int {
	return max(int(l.Timeout(time.Now())/time.Millisecond), 1)
}

// everySecond applies the timeouts. Scanning every connection once a second
// costs less than one timer per connection would.
func (l *loop) everySecond(now time.Time) {
	if l.deferred && l.srv.Retiring() {
		// New connections now start empty, as with --no-defer-accept.
		l.deferred = false
		for _, fd := range l.listeners {
			l.sys.Undefer(fd)
		}
	}
	for _, cn := range l.conns {
		if cn == nil {
			continue
		}
		// A connection whose read-ahead runs (cn.body.Waiting) is held to
		// --fs-timeout by the core (core.Conn.BodyWait): the disk, not
		// the peer, is slow.
		switch cn.c.CheckTimeout() {
		case core.ActClose:
			l.close(cn)
		case core.ActWrite:
			l.drive(cn, 0)
		}
	}
}

// accept4 and logOut are variables so that a test can inject accept
// errors and read what the loop logs.
var (
	accept4           = rawAccept
	logOut  io.Writer = os.Stderr
)

// accept takes every queued connection: with an edge-triggered listener
// the ones left behind would wait for the next arrival.
func (l *loop) accept(lfd int) {
	for {
		fd, errno := l.acceptOne(lfd)
		switch l.accepts.Step(&l.Lifecycle, errno) {
		case loops.AcceptDone:
			return
		case loops.AcceptPause:
			l.pauseAccept()
			return
		case loops.AcceptAgain:
			continue
		}
		if l.nconns >= l.srv.Config.MaxConns {
			l.stats.Refused++
			l.sys.Close(fd)
			continue
		}
		l.stats.Accepts++
		l.gen = loops.NextGen(l.gen, genMask)
		for fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*conn, len(l.conns)+64)...)
		}
		remote, local := l.sys.Addrs(l.srv, fd)
		// With --no-defer-accept the request has seldom come yet: the
		// first read waits for the EPOLLIN that the ADD below reports
		// if it has.
		cn := &conn{fd: fd, gen: l.gen, c: l.core.NewConn(remote), pipe: -1, empty: !l.deferred && !l.level}
		cn.c.Handle, cn.c.Local = fd, local
		l.conns[fd] = cn
		l.nconns++
		if l.level {
			// Level-triggered mode toggles EPOLLOUT with MOD, so it
			// registers before the first write.
			cn.levelEv = evLevel
			if !l.register(cn, evLevel) {
				continue
			}
			l.drive(cn, 0)
			continue
		}
		// With deferred accept (the default) its data has arrived:
		// answer it now, and register with epoll only if the connection
		// stays open, so a Connection: close request is served with no
		// epoll_ctl at all. Bytes that arrive between the last read and
		// the ADD are not missed: ADD reports a socket that is already
		// readable (or writable).
		l.drive(cn, 0)
		if l.conns[fd] == cn {
			l.register(cn, evConn)
		}
	}
}

// register adds a new connection to the epoll set; on failure it closes
// the connection and reports false.
func (l *loop) register(cn *conn, ev uint32) bool {
	if err := l.ctl(unix.EPOLL_CTL_ADD, cn.fd, ev, cn.gen); err != nil {
		fmt.Fprintf(os.Stderr, "twinloop: loop %d: %v; connection closed\n", l.id, err)
		l.close(cn)
		return false
	}
	return true
}

// pauseAccept disarms the listeners while accepting is paused
// (loops.Accepts), until resumeAccept.
func (l *loop) pauseAccept() {
	for _, fd := range l.listeners {
		l.ctl(unix.EPOLL_CTL_MOD, fd, 0, 0)
	}
}

// resumeAccept re-arms the listeners once the pause is over; a MOD
// re-checks readiness, so a connection that waited in the backlog raises
// an event at once.
func (l *loop) resumeAccept() {
	for _, fd := range l.listeners {
		l.ctl(unix.EPOLL_CTL_MOD, fd, unix.EPOLLIN|unix.EPOLLET, 0)
	}
}

// drive moves a connection along until it must wait for the kernel.
// events is what epoll reported (0 when driven by a timeout).
func (l *loop) drive(cn *conn, events uint32) {
	// drained: a read came back short, so the socket was empty, and any
	// byte that arrives later raises a new edge. The read that would only
	// say EAGAIN is skipped: one read and one write per request instead of
	// two reads. Not when EPOLLRDHUP is set: a FIN may wait behind the data.
	drained := false
	if !l.note(cn, events) {
		return
	}
	for {
		in := l.watch(cn)
		if cn.pipeReady && in.PipeRead {
			l.readPipe(cn)
			continue
		}
		switch cn.c.Next() {
		case core.ActWrite:
			if !l.write(cn) {
				if l.level && l.conns[cn.fd] == cn && !cn.body.Waiting() {
					cn.full = true
					l.watch(cn)
				}
				return
			}
		case core.ActRead:
			if l.Stopping() && cn.c.Idle() {
				l.close(cn)
				return
			}
			if drained || !in.Read || cn.empty || !l.read(cn, events, &drained) {
				return
			}
		case core.ActLinger:
			l.sys.Shutdown(cn.fd, unix.SHUT_WR)
			cn.c.Linger()
		case core.ActClose:
			if cn.inReady {
				// Bytes came while the response went out, and were not
				// read: closing now would send a RST.
				cn.inReady = false
				cn.c.Unread()
				continue
			}
			l.close(cn)
			return
		}
	}
}

// note records what events say of cn's socket before drive runs it; it
// reports false when they closed the connection.
func (l *loop) note(cn *conn, events uint32) bool {
	if events&unix.EPOLLERR != 0 {
		// A reset (or another error): nothing more can be sent. It is
		// how a client that closed is told from one that only shut down
		// its write side (core.Interest.Reset); closing frees the Conn,
		// which kills a script still answering it. A read would not
		// tell: after the FIN none is made, and it would say 0.
		l.close(cn)
		return false
	}
	if events&unix.EPOLLIN != 0 {
		cn.inReady, cn.empty = true, false
	}
	if events&unix.EPOLLRDHUP != 0 {
		cn.rdhup = true
	}
	if cn.body.Waiting() && events&unix.EPOLLHUP != 0 {
		// Gone both ways while its read-ahead runs (a reset was closed
		// above): nothing can be sent, and the slot need not wait for
		// the disk to be freed.
		l.close(cn)
		return false
	}
	return true
}

// read is one read of cn's socket into its Conn, for drive, which reads
// again, if the Conn wants more, while read reports true; drained is
// drive's (a short read: the socket was empty).
func (l *loop) read(cn *conn, events uint32, drained *bool) bool {
	n, errno := l.sys.Read(cn.fd, l.buf)
	switch {
	case errno == unix.EAGAIN:
		cn.inReady, cn.empty = false, !l.level
		return false
	case errno == unix.EINTR:
		return true
	case errno != 0:
		l.close(cn)
		return false
	case n == 0:
		cn.c.EOF()
		return true
	}
	// Level-triggered: one read per event; epoll reports the
	// socket again if bytes are left.
	*drained = l.level || n < len(l.buf) && events&unix.EPOLLRDHUP == 0
	if n < len(l.buf) {
		cn.inReady = false // the socket was empty
		cn.empty = !l.level && !cn.rdhup
	}
	cn.c.Feed(l.buf[:n])
	return true
}

// watch brings the epoll set in line with what the connection waits for
// (core.Interest), and returns that. drive calls it after every step.
//
//   - The socket is added once (accept, register) with every event it can
//     want, edge-triggered, and leaves the set when it is closed. In
//     level-triggered mode EPOLLOUT is added while a write waits for room
//     (full) and Interest.Write holds, and taken out after.
//   - A script's pipe is added when Interest.Pipe names a new one; it was
//     closed by PipeEOF or FreeConn, which took it out of the set, and
//     readPipe forgets it when it calls PipeEOF, so that the next script's
//     pipe is added even when it has the same fd number.
func (l *loop) watch(cn *conn) core.Interest {
	in := cn.c.Interest()
	for in.Pipe != cn.pipe {
		cn.pipe, cn.pipeReady = in.Pipe, false
		// Bytes already in the pipe raise an event at once (ep_insert polls).
		if cn.pipe >= 0 && l.ctlAs(unix.EPOLL_CTL_ADD, cn.pipe, evPipe, cn.fd, cn.gen|pipeBit) != nil {
			cn.pipe = -1
			cn.c.PipeEOF() // cannot watch it: the script's answer ends here (502)
			in = cn.c.Interest()
		}
	}
	if l.level {
		// EPOLLIN only while Interest.Read: a socket that is readable
		// but not read (after EOF, while a half-closed client waits for
		// its script; with InBufMax unparsed) would be reported on every
		// pass, level-triggered: the loop spun in epoll_wait beside one
		// half-closed client (TestLevelDoesNotSpin).
		cn.full = cn.full && in.Write
		ev := uint32(0)
		if in.Read {
			ev = evLevel
		}
		if cn.full {
			ev |= unix.EPOLLOUT
		}
		if ev != cn.levelEv {
			cn.levelEv = ev
			l.ctl(unix.EPOLL_CTL_MOD, cn.fd, ev, cn.gen)
		}
	}
	return in
}

// readPipe reads the CGI pipe once. Edge-triggered: pipeReady stays set
// until a read says EAGAIN.
func (l *loop) readPipe(cn *conn) {
	n, errno := l.sys.Read(cn.pipe, l.buf)
	switch {
	case errno == unix.EAGAIN:
		cn.pipeReady = false
	case errno == unix.EINTR:
	case errno != 0 || n == 0:
		cn.pipe, cn.pipeReady = -1, false // PipeEOF closes it
		cn.c.PipeEOF()
	default:
		cn.c.FeedPipe(l.buf[:n])
	}
}

// sends sends a response's bytes on a connection, holding a header back
// while its body follows (more): plainSends by MSG_MORE, the default;
// corkSends (cork_linux.go) by TCP_CORK, the --epoll-cork ablation. Chosen
// once, at Setup.
type sends interface {
	bytes(cn *conn, p []byte, more bool) (int, unix.Errno)
	vec(cn *conn, iov []unix.Iovec, more bool) (int, unix.Errno)
	bodySent(cn *conn, last bool) // a file body's part went out, its last if last
}

// plainSends is sends by MSG_MORE.
type plainSends struct{ sys loops.Sys }

func (s plainSends) bytes(cn *conn, p []byte, more bool) (int, unix.Errno) {
	if more {
		return s.sys.SendMore(cn.fd, p)
	}
	return s.sys.Write(cn.fd, p)
}

func (s plainSends) vec(cn *conn, iov []unix.Iovec, more bool) (int, unix.Errno) {
	return s.sys.Writev(cn.fd, iov, more)
}

func (plainSends) bodySent(*conn, bool) {}

// sendFailed handles a send's errno for write, when it is one (failed):
// EINTR, try again at once (again); EAGAIN, wait for writability; any
// other error closes the connection.
func (l *loop) sendFailed(cn *conn, errno unix.Errno) (again, failed bool) {
	switch loops.SendStep(errno) {
	case loops.Sent:
		return false, false
	case loops.Again:
		return true, true
	case loops.Fail:
		l.close(cn)
	}
	return false, true
}

// write sends what the connection has to send; it reports false when the
// connection must wait for EPOLLOUT, or for a helper, or was closed.
func (l *loop) write(cn *conn) bool {
	if cn.body.Waiting() {
		return false // a read-ahead's done drives it again
	}
	o := cn.c.Out()
	if len(o.Mem) > 0 || o.Vec != nil {
		var n int
		var errno unix.Errno
		if o.N > 0 {
			cn.body.NewPart() // a new response or part: its range is probed anew
		}
		want := len(o.Mem)
		switch {
		case o.Vec != nil:
			// Headers and the bodies sent from the cache entry itself,
			// gathered: pipelined hits stay one call, as when their
			// bodies were copied into one buffer.
			l.iov = loops.Iovecs(l.iov, o.Vec)
			n, errno = l.sends.vec(cn, l.iov, o.N > 0)
			clear(l.iov)
			want = int(o.Len() - o.N)
		default:
			n, errno = l.sends.bytes(cn, o.Mem, o.N > 0)
		}
		if again, failed := l.sendFailed(cn, errno); failed {
			return again
		}
		cn.c.Sent(int64(n))
		// A short write means the socket buffer is full (the kernel has
		// set SOCK_NOSPACE): EPOLLOUT will come.
		return n == want
	}
	last, step := l.bodies.WriteFile(&cn.body, cn.c, cn.fd, o, func(p []byte, more bool) (int, unix.Errno) {
		return l.sends.bytes(cn, p, more)
	})
	switch step {
	case loops.Sent:
		l.sends.bodySent(cn, last)
		return true
	case loops.Again:
		return true
	case loops.Fail:
		l.close(cn)
	}
	return false
}

func (l *loop) close(cn *conn) {
	l.stats.Closes++
	cn.body.Drop()
	l.sys.Close(cn.fd) // also removes it from the epoll set
	l.conns[cn.fd] = nil
	l.nconns--
	l.core.FreeConn(cn.c)
}

// beginStop starts the shutdown once Stop asked for it: no more accepts,
// idle connections closed, the others get until the deadline to finish
// what they are sending.
func (l *loop) beginStop() {
	if !l.BeginStop(l.core, l.srv.Config.ShutdownTimeout) {
		return
	}
	// A connection in a listener's queue has its request there (deferred
	// accept) or on its way: the close of the listener would reset it
	// under its client. Accepted, it is served within the shutdown
	// (core.Conn.Idle keeps it until its first request is answered).
	if !l.Paused() {
		for _, fd := range l.listeners {
			l.accept(fd)
		}
	}
	for _, fd := range l.listeners {
		l.sys.Close(fd)
	}
	l.listeners = nil
	for _, cn := range l.conns {
		if cn != nil && cn.c.Idle() {
			l.close(cn)
		}
	}
}

// Teardown closes everything the loop opened (loops.Loop).
func (l *loop) Teardown() {
	for _, cn := range l.conns {
		if cn != nil {
			l.close(cn)
		}
	}
	if l.bodies != nil {
		l.bodies.Drain(l.wakefd)
	}
	for _, fd := range l.listeners {
		l.sys.Close(fd)
	}
	l.listeners = nil
	if l.core != nil {
		l.core.Close()
	}
	l.Waker.Close()
	l.wakefd = -1
	if l.epfd >= 0 {
		unix.Close(l.epfd) // uncounted: after core.Close published the last counts
		l.epfd = -1
	}
}
