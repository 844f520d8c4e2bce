package uring

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Accepting: each loop arms a multishot accept on each of its own
// SO_REUSEPORT listeners, pauses it after the process runs out of fds, and
// cancels it to stop.

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
			l.sys.Close(fd)
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
			l.closeListener(ln)
		case !ln.cancelled:
			l.cancelLoopOp(pack(opAccept, 0, uint32(i)))
			ln.cancelled = true
		}
	}
}
