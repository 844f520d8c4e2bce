package uring

import (
	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// sockets is what kind of socket the loop's connections are, chosen once
// at Setup: by default the process's fds (plainSockets), with
// --uring-fixed-files the ring's direct descriptors (directSockets,
// fixedfd_linux.go). Each place where the two differ asks it; the default
// path meets no test of the flag.
type sockets interface {
	// prepAccept prepares e as listener fd's accept (its multishot one,
	// or with Backend.OneShot a one-shot one).
	prepAccept(l *loop, e *giouring.SubmissionQueueEntry, fd int)
	// admit makes a connection of accepted socket fd (admit, accept_linux.go).
	admit(l *loop, fd int)
	// closeAccepted closes an accepted socket that is not a connection.
	closeAccepted(l *loop, fd int)
	// pending counts the accepted sockets admit took that are not yet
	// connections.
	pending() int
	// takeQueued accepts, at the shutdown, the connections queued on ln
	// since its accept ended (takeQueued, accept_linux.go).
	takeQueued(l *loop, ln *listener)
	// acceptHint says more about an accept's errno, or "".
	acceptHint(errno unix.Errno) string
	// opened readies what a new connection's socket needs, before it is
	// driven.
	opened(cn *conn)
	// sysFd is the fd the system calls on cn's socket take (sendfile,
	// getsockopt); wait: none yet, and a CQE will drive cn when it comes.
	// An fd below 0 without wait means none can be had.
	sysFd(l *loop, cn *conn) (fd int, wait bool)
	// fdOf is that fd if cn has one, -1 if not, asking for none.
	fdOf(cn *conn) int
	// shutdown is shutdown(2) of cn's socket (shutdown, conn_linux.go).
	shutdown(l *loop, cn *conn, how int)
	// closeWaits reports whether cn's close must wait for a request in
	// flight that looks its socket up late (close, conn_linux.go).
	closeWaits(cn *conn) bool
	// prepClose prepares e as the close of cn's socket.
	prepClose(l *loop, e *giouring.SubmissionQueueEntry, cn *conn)
	// closeLeft closes what of cn's socket the loop must after the ring
	// failed (Teardown).
	closeLeft(l *loop, cn *conn)
}

// plainSockets are connections as the process's fds: conn.fd is the fd
// every SQE and system call takes.
type plainSockets struct{}

func (plainSockets) prepAccept(l *loop, e *giouring.SubmissionQueueEntry, fd int) {
	// io_uring_prep_multishot_accept(3), or io_uring_prep_accept(3) with
	// Backend.OneShot: acceptPrio says which.
	e.PrepareAccept(fd, 0, 0, unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
	e.IoPrio |= l.acceptPrio
}

func (plainSockets) admit(l *loop, fd int) {
	remote, local := l.sys.Addrs(l.srv, fd)
	l.newConn(fd, remote, local)
}

func (plainSockets) closeAccepted(l *loop, fd int) { l.sys.Close(fd) }

func (plainSockets) pending() int { return 0 }

func (plainSockets) takeQueued(l *loop, ln *listener) { l.acceptQueued(ln) }

func (plainSockets) acceptHint(unix.Errno) string { return "" }

func (plainSockets) opened(*conn) {}

func (plainSockets) sysFd(_ *loop, cn *conn) (int, bool) { return cn.fd, false }

func (plainSockets) fdOf(cn *conn) int { return cn.fd }

func (plainSockets) shutdown(l *loop, cn *conn, how int) { l.sys.Shutdown(cn.fd, how) }

func (plainSockets) closeWaits(*conn) bool { return false }

func (plainSockets) prepClose(_ *loop, e *giouring.SubmissionQueueEntry, cn *conn) {
	e.PrepareClose(cn.fd) // io_uring_prep_close(3)
}

func (plainSockets) closeLeft(l *loop, cn *conn) { l.sys.Close(cn.fd) }
