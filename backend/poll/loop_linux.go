package poll

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// Backend is the poll backend. The zero value is ready to use.
type Backend struct{}

// New returns the poll backend.
func New() *Backend { return &Backend{} }

// Name is the --backend value.
func (*Backend) Name() string { return "poll" }

// Probe checks that ppoll can be called here (a seccomp filter may
// refuse it).
func (*Backend) Probe() error {
	if _, err := unix.Ppoll(nil, &unix.Timespec{}, nil); err != nil { // uncounted: Probe runs before any loop
		return fmt.Errorf("ppoll: %w: %w", err, errors.ErrUnsupported)
	}
	return nil
}

// Serve runs one loop per listener set until ctx is cancelled.
func (b *Backend) Serve(ctx context.Context, srv *core.Server, ls *core.Listeners) error {
	all := make([]loops.Loop, len(ls.FDs))
	for i := range all {
		all[i] = &loop{srv: srv, id: i, listeners: ls.FDs[i], deferred: ls.Deferred, wakefd: -1}
	}
	return loops.Serve(ctx, all)
}

const (
	// readBufSize is the loop's one read buffer, shared by all its
	// connections: the core copies only what it must keep.
	readBufSize = 64 << 10
)

// kind says what a pollfd is.
type kind uint8

const (
	kindWake kind = iota
	kindListener
	kindConn // a connection's socket
	kindPipe // a connection's CGI script's stdout
)

// entry is what the pollfd at the same index is: pfds and ents are kept
// in step, and a conn knows the indexes of its entries (conn.at,
// conn.pipeAt), so removing one swaps the last in, and fixes the index
// of the one that moved.
type entry struct {
	kind kind
	cn   *conn // kindConn and kindPipe
}

// conn is one accepted socket.
type conn struct {
	fd int
	c  *core.Conn
	at int // its socket's index in pfds

	pipe   int // the CGI pipe watched, -1 none
	pipeAt int // its index in pfds, -1 none
	// inReady: POLLIN came and no read has emptied the socket since, so
	// closing now might leave input unread (core.Conn.Unread).
	inReady bool
	// full: a write found the socket full and Out is not all sent since:
	// POLLOUT is asked for only then.
	full bool
	body loops.Body // the file body's read-ahead or chunk (loops.Bodies)
}

// loop is one event loop; every field is owned by its thread, but the
// Lifecycle's Stop and Waker, which other goroutines use to interrupt it.
type loop struct {
	srv       *core.Server
	id        int
	core      *core.Loop
	stats     *core.Stats
	sys       loops.Sys // makes and counts the loop's system calls
	wakefd    int       // waker's eventfd, -1 none
	listeners []int
	deferred  bool // the listeners have TCP_DEFER_ACCEPT (core.Listeners.Deferred)

	pfds   []unix.PollFd // what ppoll watches: wake-up, listeners, then connections
	ents   []entry       // what each of pfds is
	conns  []*conn       // indexed by fd
	nconns int
	buf    []byte
	iov    []unix.Iovec // writev's room, cleared after each call

	accepts loops.Accepts // what accept4's errors do
	bodies  *loops.Bodies // sends file bodies, off the disk

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
	l.accepts = loops.Accepts{Loop: l.id, Log: os.Stderr}
	l.bodies = loops.NewBodies(l.srv, l.core, l.sys)
	l.buf = make([]byte, readBufSize)
	var err error
	if l.wakefd, err = l.Waker.Open(unix.EFD_NONBLOCK); err != nil {
		return err
	}
	l.add(l.wakefd, unix.POLLIN, entry{kind: kindWake})
	l.core.SetWaker(l.Waker.Wake) // to run what CGI goroutines and file-system helpers post (core.Loop.Post)
	for _, fd := range l.listeners {
		l.add(fd, unix.POLLIN, entry{kind: kindListener})
	}
	return nil
}

// add appends fd to the pollfd array and returns its index.
func (l *loop) add(fd int, events int16, e entry) int {
	l.pfds = append(l.pfds, unix.PollFd{Fd: int32(fd), Events: events})
	l.ents = append(l.ents, e)
	return len(l.pfds) - 1
}

// remove takes the pollfd at i out: the last one moves into its place,
// and its connection learns its new index.
func (l *loop) remove(i int) {
	last := len(l.pfds) - 1
	if i != last {
		l.pfds[i], l.ents[i] = l.pfds[last], l.ents[last]
		switch e := l.ents[i]; e.kind {
		case kindConn:
			e.cn.at = i
		case kindPipe:
			e.cn.pipeAt = i
		}
	}
	l.pfds, l.ents = l.pfds[:last], l.ents[:last]
}

// Run is the event loop (loops.Loop); Teardown follows it. It returns
// nil once shut down, or ppoll's error, which ends the process
// (loops.Serve).
func (l *loop) Run() error {
	for {
		// A pass first polls without sleeping (raw, cheap), as epoll's
		// loop does; only when nothing is ready does it block, through
		// the runtime. Each ppoll walks every fd of the loop: the cost
		// this backend is here to show (doc.go).
		n, errno := l.sys.PollWait(l.pfds, 0, false)
		if errno == 0 && n == 0 {
			n, errno = l.sys.PollWait(l.pfds, l.waitMillis(), true)
		}
		errno = loops.WaitErrno(l.id, errno)
		if errno != 0 && errno != unix.EINTR {
			return os.NewSyscallError("ppoll", errno)
		}
		now := time.Now()
		if l.core.Tick(now) {
			l.everySecond(now)
		}
		if n > 0 {
			l.dispatch()
		}
		if !l.Stopping() && l.Resume(now) {
			l.armListeners(unix.POLLIN)
		}
		if l.Stopping() && (l.nconns == 0 || now.After(l.Deadline())) {
			return nil
		}
	}
}

// dispatch handles what ppoll reported, in one walk of the array. Each
// revents is cleared once handled; handling one may remove entries (a
// closed connection, a finished pipe), which moves the last one into a
// removed one's place: when that happens at the index being handled, the
// entry now there is handled next. One moved below it waits for the next
// pass, which reports it again: poll is level-triggered.
func (l *loop) dispatch() {
	for i := 0; i < len(l.pfds); i++ {
		re := l.pfds[i].Revents
		if re == 0 {
			continue
		}
		l.pfds[i].Revents = 0
		e := l.ents[i]
		switch e.kind {
		case kindWake:
			l.woken()
		case kindListener:
			if !l.Stopping() {
				l.accept(int(l.pfds[i].Fd))
			}
		case kindConn:
			l.drive(e.cn, re)
		case kindPipe:
			l.drivePipe(e.cn)
		}
		if i < len(l.ents) && l.ents[i] != e {
			i-- // the last entry moved here
		}
	}
}

// woken handles the wake-up eventfd: the shutdown, and what CGI
// goroutines and file-system helpers posted.
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

// waitMillis is how long ppoll may sleep (Lifecycle.Timeout), in whole
// milliseconds, at least one.
func (l *loop) waitMillis() int {
	return max(int(l.Timeout(time.Now())/time.Millisecond), 1)
}

// everySecond applies the timeouts, as epoll's loop does.
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
		switch cn.c.CheckTimeout() { // a read-ahead is held to --fs-timeout by the core (core.Conn.BodyWait)
		case core.ActClose:
			l.close(cn)
		case core.ActWrite:
			l.drive(cn, 0)
		}
	}
}

// accept takes every queued connection (a level-triggered listener would
// report the rest again, one ppoll later).
func (l *loop) accept(lfd int) {
	for {
		fd, errno := l.sys.Accept(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch l.accepts.Step(&l.Lifecycle, errno) {
		case loops.AcceptDone:
			return
		case loops.AcceptPause:
			l.armListeners(0)
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
		for fd >= len(l.conns) {
			l.conns = append(l.conns, make([]*conn, len(l.conns)+64)...)
		}
		remote, local := l.sys.Addrs(l.srv, fd)
		cn := &conn{fd: fd, c: l.core.NewConn(remote), pipe: -1, pipeAt: -1}
		cn.c.Handle, cn.c.Local = fd, local
		cn.at = l.add(fd, 0, entry{kind: kindConn, cn: cn})
		l.conns[fd] = cn
		l.nconns++
		// With deferred accept (the default) its request has arrived:
		// answer it now, not a ppoll later. Without, it has seldom come,
		// and the first read waits for POLLIN.
		var ev int16
		if l.deferred {
			ev = unix.POLLIN
		}
		l.drive(cn, ev)
	}
}

// armListeners sets what ppoll watches on the listeners: POLLIN, or
// nothing while accepting is paused (loops.Accepts).
func (l *loop) armListeners(ev int16) {
	for i, e := range l.ents {
		if e.kind == kindListener {
			l.pfds[i].Events = ev
		}
	}
}

// drive moves a connection along until it must wait for the kernel.
// revents is what ppoll reported for its socket (0 when driven by a
// timeout or a post). Level-triggered: one read per event; ppoll reports
// the socket again if bytes are left.
func (l *loop) drive(cn *conn, revents int16) {
	if revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
		// A reset (or another error): nothing more can be sent. It is
		// how a client that closed is told from one that only shut down
		// its write side (core.Interest.Reset). POLLNVAL, an fd closed
		// under its pollfd, would be a bug here; closing keeps ppoll from
		// reporting it on every pass.
		l.close(cn)
		return
	}
	if revents&unix.POLLHUP != 0 && (cn.body.Waiting() || !cn.c.Interest().Read) {
		// Gone both ways: nothing can be sent, and ppoll would report
		// the hang-up on every pass to a connection that reads no more.
		l.close(cn)
		return
	}
	canRead := revents&(unix.POLLIN|unix.POLLHUP) != 0
	if canRead {
		cn.inReady = true
	}
	for {
		in := l.watch(cn)
		switch cn.c.Next() {
		case core.ActWrite:
			if !l.write(cn) {
				if l.conns[cn.fd] == cn && !cn.body.Waiting() {
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
			if !canRead || !in.Read {
				return
			}
			canRead = false
			n, errno := l.sys.Read(cn.fd, l.buf)
			switch {
			case errno == unix.EAGAIN:
				cn.inReady = false
				return
			case errno == unix.EINTR:
				canRead = true
				continue
			case errno != 0:
				l.close(cn)
				return
			case n == 0:
				cn.inReady = false
				cn.c.EOF()
				continue
			}
			if n < len(l.buf) {
				cn.inReady = false // the socket was empty
			}
			cn.c.Feed(l.buf[:n])
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

// drivePipe reads a connection's CGI pipe once (ppoll said it is
// readable, or hung up), then drives the connection.
func (l *loop) drivePipe(cn *conn) {
	n, errno := l.sys.Read(cn.pipe, l.buf)
	switch {
	case errno == unix.EAGAIN, errno == unix.EINTR:
	case errno != 0 || n == 0:
		l.forgetPipe(cn) // PipeEOF closes it
		cn.c.PipeEOF()
	default:
		cn.c.FeedPipe(l.buf[:n])
	}
	l.drive(cn, 0)
}

// watch brings the connection's pollfds in line with what it waits for
// (core.Interest), and returns that. drive calls it after every step.
//
//   - The socket asks for POLLIN while Interest.Read, and POLLOUT only
//     while a write found it full and bytes are unsent (full). POLLERR
//     and POLLHUP are reported whatever it asks (drive).
//   - A script's pipe gets a pollfd when Interest.Pipe names a new one,
//     and loses it at PipeEOF (the core closes the pipe). It is watched
//     only while Interest.PipeRead: its fd is negated otherwise, which
//     ppoll skips, since a pipe whose script has exited would report
//     POLLHUP on every pass while backpressure leaves its output unread.
func (l *loop) watch(cn *conn) core.Interest {
	in := cn.c.Interest()
	if in.Pipe != cn.pipe {
		l.forgetPipe(cn)
		if in.Pipe >= 0 {
			cn.pipe = in.Pipe
			cn.pipeAt = l.add(in.Pipe, unix.POLLIN, entry{kind: kindPipe, cn: cn})
		}
	}
	if cn.pipeAt >= 0 {
		fd := int32(cn.pipe)
		if !in.PipeRead {
			fd = -1
		}
		l.pfds[cn.pipeAt].Fd = fd
	}
	cn.full = cn.full && in.Write
	var ev int16
	if in.Read {
		ev = unix.POLLIN
	}
	if cn.full {
		ev |= unix.POLLOUT
	}
	l.pfds[cn.at].Events = ev
	return in
}

// forgetPipe takes the connection's pipe out of the pollfd array.
func (l *loop) forgetPipe(cn *conn) {
	if cn.pipeAt >= 0 {
		l.remove(cn.pipeAt)
	}
	cn.pipe, cn.pipeAt = -1, -1
}

// write sends what the connection has to send; it reports false when the
// connection must wait for POLLOUT, or for a helper, or was closed.
func (l *loop) write(cn *conn) bool {
	if cn.body.Waiting() {
		return false // a read-ahead's done drives it again
	}
	o := cn.c.Out()
	if len(o.Mem) > 0 || o.Vec != nil {
		if o.N > 0 {
			cn.body.NewPart() // a new response or part: its range is probed anew
		}
		var n int
		var errno unix.Errno
		want := len(o.Mem)
		if o.Vec != nil {
			// Headers and the bodies sent from the cache entry itself,
			// gathered in one call, as on epoll.
			l.iov = loops.Iovecs(l.iov, o.Vec)
			n, errno = l.sys.Writev(cn.fd, l.iov, o.N > 0)
			clear(l.iov)
			want = int(o.Len() - o.N)
		} else {
			n, errno = l.sendBytes(cn, o.Mem, o.N > 0)
		}
		if again, failed := l.sendFailed(cn, errno); failed {
			return again
		}
		cn.c.Sent(int64(n))
		return n == want // short: the socket is full
	}
	_, step := l.bodies.WriteFile(&cn.body, cn.c, cn.fd, o, func(p []byte, more bool) (int, unix.Errno) {
		return l.sendBytes(cn, p, more)
	})
	switch step {
	case loops.Sent, loops.Again:
		return true
	case loops.Fail:
		l.close(cn)
	}
	return false
}

// sendBytes sends p, with MSG_MORE when more of the response follows it.
func (l *loop) sendBytes(cn *conn, p []byte, more bool) (int, unix.Errno) {
	if more {
		return l.sys.SendMore(cn.fd, p)
	}
	return l.sys.Write(cn.fd, p)
}

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

func (l *loop) close(cn *conn) {
	l.stats.Closes++
	cn.body.Drop()
	l.forgetPipe(cn) // the core closes the pipe (FreeConn)
	l.remove(cn.at)
	l.sys.Close(cn.fd)
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
	// (core.Conn.Idle keeps it until its first request is answered), as
	// epoll's beginStop does.
	if !l.Paused() {
		for _, fd := range l.listeners {
			l.accept(fd)
		}
	}
	for i, e := range l.ents {
		if e.kind == kindListener {
			l.pfds[i].Fd = -1 // ppoll skips it
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
}
