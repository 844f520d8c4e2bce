package uring

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
)

// Accepting: each loop arms a multishot accept on each of its own
// SO_REUSEPORT listeners, pauses it after the process runs out of fds, and
// cancels it to stop. An accepted socket waits in the loop's queue until a
// pass admits it (admit).

// admitPerPass is how many accepted sockets one pass of the loop turns
// into connections. A multishot accept takes the listener's whole backlog
// at once: at 10,000 Connection: close clients it took nearly all of them
// in one pass, each with its Conn and buffers, while epoll serves each
// deferred socket as it accepts it and held a few
// (results/2026-12-01_c10k-admit). Admitted a batch per pass, a socket
// costs its fd in the queue until its turn, and the loop holds the Conns
// of a few passes. The bound is per pass, not on connections in some
// state, so clients that send nothing or never read hold back no one.
const admitPerPass = 128

// admitClosing: see admit.
const admitClosing = 256

// admitting reports whether a pass would admit a socket now: one waits,
// and fewer than admitClosing closes are in the kernel's hands.
func (l *loop) admitting() bool {
	return l.accepted.len() > 0 && l.closesQueued < admitClosing
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

type listener struct {
	fd        int
	armed     bool // a multishot accept is armed
	cancelled bool // a cancel of it is in flight
	closed    bool
}

// armAccept arms listener i's multishot accept (Linux 5.19), or with
// Backend.OneShot a one-shot one, unless it is armed, paused, or closed.
// The socket is accepted non-blocking: recv and send are polled by
// io_uring either way, but a splice runs on a worker thread, which a
// blocking socket would keep until the client reads (body_linux.go).
// With --uring-fixed-files the socket goes into the ring's table of
// direct descriptors instead (fixedfd_linux.go), and "fd" below is its
// slot there.
func (l *loop) armAccept(i int) {
	ln := &l.listeners[i]
	if ln.armed || ln.closed || !l.Accepting() {
		return
	}
	e := l.sqe()
	l.sock.prepAccept(l, e, ln.fd)
	l.queueAs(e, opAccept, 0, uint32(i))
	ln.armed = true
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
		case l.nconns+l.accepted.len()+l.sock.pending() >= l.srv.Config.MaxConns:
			l.stats.Refused++
			l.closeAccepted(fd)
		default:
			l.accepted.push(fd)
		}
	} else {
		switch errno := unix.Errno(-res); errno {
		case unix.ECANCELED, unix.EINTR, unix.ECONNABORTED, unix.EAGAIN:
		default:
			l.pauseAccept(errno)
		}
	}
	if final && l.Stopping() && !ln.closed {
		l.takeQueued(ln)
		l.closeListener(ln)
	}
	// An accept that ended (one-shot, or multishot without
	// IORING_CQE_F_MORE) is armed again by the next pass, unless accepting
	// is paused or stopped.
}

// admit makes connections of the oldest admitPerPass accepted sockets
// (with --uring-fixed-files and core.Server.WantsAddrs, asks for their
// addresses first: readAddrs, fixedfd_linux.go), and none while
// admitClosing IORING_OP_CLOSEs are queued or in flight:
// the loop admits no faster than the kernel ends connections. Only a
// close that is queued counts: by then no send chain or file read of its
// connection is in flight (queueClose); a recv or CGI-stdout cancel may
// be, which the kernel ends without waiting for a client. So neither a
// client nor the disk can hold it up, where a closing connection whose
// chain still reads its file from a slow disk could. It counts until the
// connection is freed, once all of that has come back.
func (l *loop) admit() {
	for range admitPerPass {
		if !l.admitting() {
			break
		}
		fd, _ := l.accepted.pop()
		l.sock.admit(l, fd)
	}
	l.stats.Own[ownAcceptQueued] = int64(l.accepted.len())
}

// dropAccepted closes the sockets that wait for admission: Teardown.
func (l *loop) dropAccepted() {
	for fd, ok := l.accepted.pop(); ok; fd, ok = l.accepted.pop() {
		l.closeAccepted(fd)
	}
	l.stats.Own[ownAcceptQueued] = 0
}

// closeAccepted closes an accepted socket that is not a connection.
func (l *loop) closeAccepted(fd int) { l.sock.closeAccepted(l, fd) }

// fdQueue is a FIFO of accepted sockets. Empty, it holds no fds
// (len(fds) == 0: pop resets it as it takes the last), which is what the
// loop looks at each pass.
type fdQueue struct {
	fds  []int32
	head int
}

func (q *fdQueue) len() int { return len(q.fds) - q.head }

func (q *fdQueue) push(fd int) {
	if q.head > 0 && q.head >= len(q.fds)/2 {
		// Slide the waiting half down instead of growing.
		q.fds = q.fds[:copy(q.fds, q.fds[q.head:])]
		q.head = 0
	}
	q.fds = append(q.fds, int32(fd))
}

func (q *fdQueue) pop() (int, bool) {
	if q.head == len(q.fds) {
		q.fds, q.head = q.fds[:0], 0
		return 0, false
	}
	fd := q.fds[q.head]
	if q.head++; q.head == len(q.fds) {
		q.fds, q.head = q.fds[:0], 0
	}
	return int(fd), true
}

// pauseAccept stops accepting for loops.PauseFor after the process ran
// out of fds or memory (or accept failed in a way it does not know), and
// cancels the armed accepts.
func (l *loop) pauseAccept(errno unix.Errno) {
	if l.Pause(time.Now()) {
		hint := l.sock.acceptHint(errno)
		switch {
		case hint != "":
		case errno == unix.EMFILE, errno == unix.ENFILE, errno == unix.ENOBUFS, errno == unix.ENOMEM:
			hint = " (raise the fd limit with ulimit -n, or lower --max-conns)"
		}
		fmt.Fprintf(os.Stderr, "twinloop: loop %d: accept: %v; not accepting for %v%s\n", l.id, errno, loops.PauseFor, hint)
	}
	for i := range l.listeners {
		if ln := &l.listeners[i]; ln.armed && !ln.cancelled {
			l.cancelLoopOp(pack(opAccept, 0, uint32(i)))
			ln.cancelled = true
		}
	}
}

// takeQueued accepts, at the shutdown, the connections queued on ln
// since its accept ended: closing it would reset them under clients
// that have sent their requests (a --drain-delay's last ones); they are
// served within the shutdown, as those the accept took. Not while
// accepting is paused (the process is out of fds), nor with
// --uring-fixed-files, whose connections are direct descriptors
// accepted through the ring (sockets.takeQueued).
func (l *loop) takeQueued(ln *listener) {
	if !l.Paused() {
		l.sock.takeQueued(l, ln)
	}
}

// acceptQueued is takeQueued's accept(2) of the sockets queued on ln.
func (l *loop) acceptQueued(ln *listener) {
	for l.nconns+l.accepted.len() < l.srv.Config.MaxConns {
		fd, errno := l.sys.Accept(ln.fd, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
		switch errno {
		case 0:
			l.accepted.push(fd)
		case unix.EINTR, unix.ECONNABORTED:
		default:
			return // EAGAIN: the queue is empty
		}
	}
}

func (l *loop) closeListener(ln *listener) {
	l.sys.Close(ln.fd)
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

// stopAccepting cancels the armed accepts (a multishot accept holds the
// listener open) and closes the listeners that have none.
func (l *loop) stopAccepting() {
	for i := range l.listeners {
		ln := &l.listeners[i]
		switch {
		case ln.closed:
		case !ln.armed:
			l.takeQueued(ln)
			l.closeListener(ln)
		case !ln.cancelled:
			l.cancelLoopOp(pack(opAccept, 0, uint32(i)))
			ln.cancelled = true
		}
	}
}
