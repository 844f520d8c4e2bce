package core

import (
	"context"
	"net"
)

// Backend is an event-loop implementation that moves bytes between sockets
// and the core. Backends are chosen at run time by --backend, as nginx chooses
// its event module. The contract, in the manner of runtime/netpoll.go:
//
// Name() is the --backend value ("epoll", "uring").
//
// Probe() reports whether this kernel and sandbox can run the backend. Its
// error wraps errors.ErrUnsupported and names the cause (io_uring_disabled,
// EPERM from seccomp, a missing opcode) in one line an operator can act on.
//
// Serve(ctx, srv, ls) runs len(ls.FDs) loops and owns ls from then on. Each
// loop runs on its own goroutine locked to its OS thread, creates its epoll fd
// or ring on that thread, blocks only in epoll_wait or io_uring_enter and
// retries EINTR. A loop accepts on its own SO_REUSEPORT listeners, gives every
// connection a *Conn from its *Loop, and moves what Conn.Out says. When ctx is
// cancelled, Serve stops accepting, lets responses in flight finish until
// srv.Config.ShutdownTimeout, closes every fd it opened (listeners included)
// and returns nil. It returns an error when a loop could not start, or when
// a loop failed while serving (its epoll_wait or ring): then it shuts the
// other loops down the same way, fails fast rather than serve on degraded,
// and its error names the loop, so the process can exit non-zero.
//
// A loop reads while Conn.WantRead, which stays true once a connection is
// to close (Feed drops that input), so that none waits unread when it
// closes: close() with unread input sends a RST, which destroys the
// response's unsent tail. A loop that knows of input it has not read
// (epoll: an edge with no read since; blocking: a MSG_PEEK) calls
// Conn.Unread before it acts on ActClose, and asks Next again: a close
// that was asked for then becomes ActLinger.
//
// Whatever the kernel hands back names a connection by (slot, generation),
// never by a Go pointer, so a late event for a closed, reused fd is dropped.
// Memory the kernel reads or writes after a call returns is outside the Go
// heap or pinned, and owned by one side at a time. Counters are plain
// increments on the loop's own Stats, published once per tick.
//
// A backend that also runs CGI scripts says so with CGICapable.
type Backend interface {
	Name() string
	Probe() error
	Serve(ctx context.Context, srv *Server, ls *Listeners) error
}

// CGICapable is a Backend that can serve Config.CGIDir. CGI adds to each
// loop one more kind of fd to watch, a pipe, and one kind of wake-up, a
// mailbox; a script's process is the core's business (its goroutines
// fork, feed stdin, kill and reap), never the loop's:
//
// SupportsCGI() reports true. Serve is not given a Config with CGIDir
// unless it does (cmd/server and the tests check).
//
// Before serving, a loop calls Loop.SetWaker(wake), where wake interrupts
// its wait from any goroutine (epoll: write its eventfd; io_uring: a read
// armed on an eventfd, or IORING_OP_MSG_RING). After a wake-up the loop
// calls Loop.RunPosted on its thread and drives every Conn it returns, as
// after an event of its own; it finds them by Conn.Handle, which it sets
// after NewConn to its own index of the connection (fd or slot).
//
// When Server.WantsAddrs, the loop fills Conn.Remote and Conn.Local
// (getpeername, getsockname) after NewConn.
//
// Conn.Pipe is the read end of a running script's stdout (non-blocking,
// close-on-exec), or -1. After every call into a Conn (Feed, EOF, Sent,
// FeedPipe, PipeEOF, CheckTimeout, a RunPosted drive) Pipe may have gone
// from -1 to an fd: the loop starts watching it (epoll: EPOLL_CTL_ADD,
// edge-triggered, whatever --epoll-trigger says; io_uring: a read into a
// buffer it owns, one at a time, which the kernel completes when the pipe
// has data, non-blocking or not: backend/uring's TestPipeReadWaits).
// While Conn.WantPipe it reads the pipe and hands the bytes to
// Conn.FeedPipe; on end of file or a read error it calls Conn.PipeEOF.
// When WantPipe is false (the response has OutBufMax bytes unsent) it
// stops reading; after Sent it asks again, since no new event comes for
// bytes already in the pipe. The loop never closes the pipe: PipeEOF and
// Loop.FreeConn do, so neither may be called while a read of it is in
// flight (io_uring: cancel the read and wait for its CQE first, as for the
// socket). After PipeEOF, Pipe may name a new pipe, possibly with the same
// fd number, for the next pipelined request.
type CGICapable interface {
	Backend
	SupportsCGI() bool
}

// SupportsCGI reports whether b can serve CGI scripts (see CGICapable).
func SupportsCGI(b Backend) bool {
	cb, ok := b.(CGICapable)
	return ok && cb.SupportsCGI()
}

// Listeners are the bound, listening, non-blocking sockets, one set per loop.
// FDs[i] belongs to loop i; every set has one socket per address in Addrs,
// all bound with SO_REUSEPORT so the kernel spreads connections over loops.
type Listeners struct {
	FDs   [][]int
	Addrs []net.Addr
}
