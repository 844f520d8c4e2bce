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
// and returns nil; it returns an error only when a loop could not start.
//
// Whatever the kernel hands back names a connection by (slot, generation),
// never by a Go pointer, so a late event for a closed, reused fd is dropped.
// Memory the kernel reads or writes after a call returns is outside the Go
// heap or pinned, and owned by one side at a time. Counters are plain
// increments on the loop's own Stats, published once per tick.
type Backend interface {
	Name() string
	Probe() error
	Serve(ctx context.Context, srv *Server, ls *Listeners) error
}

// Listeners are the bound, listening, non-blocking sockets, one set per loop.
// FDs[i] belongs to loop i; every set has one socket per address in Addrs,
// all bound with SO_REUSEPORT so the kernel spreads connections over loops.
type Listeners struct {
	FDs   [][]int
	Addrs []net.Addr
}
