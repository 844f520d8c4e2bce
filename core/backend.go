package core

import (
	"context"
	"net"
)

// Backend is an event-loop implementation that moves bytes between sockets
// and the core, chosen at run time by --backend as nginx chooses its event
// module. The contract, in the manner of runtime/netpoll.go:
//
//	Name() string
//		The --backend value ("epoll", "uring", "blocking").
//	Probe() error
//		Whether this kernel and sandbox can run the backend; the error wraps
//		errors.ErrUnsupported and names the cause in a line an operator can
//		act on (io_uring_disabled, EPERM from seccomp, a missing opcode).
//	Serve(ctx, srv, ls) error
//		Runs len(ls.FDs) loops and owns ls. Once ctx is cancelled: stops
//		accepting, calls Loop.Drain, lets responses in flight finish until
//		srv.Config.ShutdownTimeout, closes every fd it opened (listeners
//		too), returns nil. When a loop cannot start, or its wait fails, it
//		shuts the others down the same way and returns an error naming the
//		loop: no serving on degraded. The drain before (Server.Retire)
//		asks only that deferred accept be turned off (Server.Retiring):
//		the Conns' Next and CheckTimeout carry the rest.
//	Counters() []Counter
//		The counters only this backend keeps (Stats.Own), indexed as in
//		Own; nil when it keeps none. Its metrics and its keys in the
//		summary line are its own to name.
//
// Each loop:
//
//   - runs on its own goroutine locked to its OS thread, creates its epoll
//     fd or ring there, blocks only in epoll_wait or io_uring_enter, and
//     retries EINTR; the core's opens, stats, reads and listings do not
//     block it either (below); a body sent from a file (sendfile,
//     splice) is the backend's own to keep off the disk;
//   - accepts on its own SO_REUSEPORT listeners and gives each connection a
//     *Conn from Loop.NewConn, with Conn.Handle set to its own index of it
//     and, when Server.WantsAddrs, Conn.Remote and Conn.Local;
//   - after every call into a Conn (Feed, EOF, Sent, FeedPipe, PipeEOF,
//     CheckTimeout, and the Conns Loop.RunPosted returns) does what Next
//     says until it must wait, then watches what Conn.Interest names, and
//     only that, in one function (Interest; a script's pipe: cgi.go);
//   - closes a connection when Next says so, its half of closing:
//     ActLinger: shutdown(SHUT_WR), then Conn.Linger, then reads on (Feed
//     drops the bytes) until Next says ActClose (EOF) or CheckTimeout does
//     (LingerTimeout); ActClose: close(). Before acting on Next's ActClose
//     it calls Conn.Unread if it knows of input it has not read (epoll: an
//     edge with no read since; blocking: a MSG_PEEK), and asks Next again:
//     close() with unread input sends a RST, which destroys the response's
//     unsent tail. io_uring knows of none, and so needs none: a recv is
//     armed while a close is asked (WantRead), and what it takes from the
//     socket is fed before the close, or at least is out of the socket
//     (backend/uring's drive says why). No backend sees input that arrives
//     after its last look and before close(): a race with the peer that a
//     MSG_PEEK per close would narrow, not end. CheckTimeout's ActClose
//     drops the connection as it is;
//   - calls Loop.SetWaker before serving with a func that interrupts its
//     wait from any goroutine (a script's goroutines and the file-system
//     helpers Post to the loop), and Loop.RunPosted on its thread after
//     each wake-up, driving every Conn it returns;
//   - says before serving how its file-system operations run (fsop.go): a
//     cache miss, a re-stat, a listing and a script's lookup go to the
//     Server's helper goroutines (Loop.Offload: bounded as nginx's
//     thread_pool), which make their calls through Loop.SetFileCalls'
//     FileCalls (default DirectCalls; io_uring: its ring) and land through
//     Post; the loop first tries each miss itself with calls that fail
//     rather than wait (fsMode: the core's rule, not the backend's). A request
//     waiting for one is in Conn's file state: Next says ActRead (ActWrite
//     while earlier answers are queued), and its Conn comes back from
//     RunPosted once answered. A loop without a waker runs them inline;
//     what a Conn is told is the same either way. A backend may itself
//     Offload work of its own (epoll: a sendfile's read-ahead);
//   - calls Loop.Tick once per pass and, when it reports a new second,
//     Conn.CheckTimeout for every connection;
//   - names a connection by (slot, generation) in whatever the kernel hands
//     back, never by a Go pointer, so a late event for a reused fd is dropped;
//   - keeps memory the kernel uses after a call returns outside the Go heap
//     or pinned, owned by one side at a time;
//   - counts in its own Loop.Stats, plain increments, published by Tick;
//     the counters only it keeps go in Stats.Own, once its loop has set
//     Stats.OwnCounters to what Counters returns.
//
// The blocking baseline (backend/blocking) keeps all of this but the
// waiting: it blocks in accept, read or write, one connection at a time,
// and in its file-system calls, which it makes inline. So it watches no
// pipe and needs no waker: it refuses a Config with CGIDir, and
// backend.RunsCGI keeps --cgi-dir from it.
type Backend interface {
	Name() string
	Probe() error
	Serve(ctx context.Context, srv *Server, ls *Listeners) error
	Counters() []Counter
}

// Listeners are the bound, listening, non-blocking sockets, one set per loop.
// FDs[i] belongs to loop i; every set has one socket per address in Addrs,
// all bound with SO_REUSEPORT so the kernel spreads connections over loops.
type Listeners struct {
	FDs   [][]int
	Addrs []net.Addr
	// Deferred: the sockets have TCP_DEFER_ACCEPT (unless
	// --no-defer-accept), so a connection is accepted with its first bytes
	// there to read. Without it, a new connection's first read usually
	// finds nothing.
	Deferred bool
}
