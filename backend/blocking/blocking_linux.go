package blocking

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

const (
	// tick is how long a blocking call may wait before the loop looks at
	// the clock (timeouts, the Date line, counters, a shutdown request).
	tick = time.Second
	// bufSize is the one read buffer; the core copies what it must keep.
	bufSize = 64 << 10
	// sendfileChunk bounds one sendfile call, so that a write timeout is
	// looked at between chunks.
	sendfileChunk = 1 << 20
)

// tickTimeval is tick as SO_RCVTIMEO/SO_SNDTIMEO take it: every socket
// the loop serves gets it (setsockopt only reads it).
var tickTimeval = unix.NsecToTimeval(int64(tick))

// Backend is the blocking backend. The zero value is ready to use.
type Backend struct{}

// New returns the blocking backend.
func New() *Backend { return &Backend{} }

// Name is the --backend value.
func (*Backend) Name() string { return "blocking" }

// Probe always succeeds: blocking sockets are everywhere.
func (*Backend) Probe() error { return nil }

// Counters is nil: the blocking backend keeps only the core's counters.
func (*Backend) Counters() []core.Counter { return nil }

// Serve serves every listener of ls from one thread, one connection at a
// time, until ctx is cancelled. It runs no CGI scripts (see Setup).
func (b *Backend) Serve(ctx context.Context, srv *core.Server, ls *core.Listeners) error {
	l := &loop{srv: srv}
	for _, set := range ls.FDs {
		l.listeners = append(l.listeners, set...)
	}
	return loops.Serve(ctx, []loops.Loop{l})
}

// loop is the one thread. Its fields are owned by that thread, but mu,
// closed and stopReq, which Stop uses.
type loop struct {
	srv       *core.Server
	core      *core.Loop
	stats     *core.Stats
	sys       loops.Sys // makes and counts the loop's system calls
	listeners []int
	pollfds   []unix.PollFd
	buf       []byte
	early     []int // connections accepted by Setup (see there), served first

	stopping bool
	deadline time.Time // stopping: the connection being served gets until then
	checked  time.Time // the last time waited applied the timeouts

	part       part // the body part read from a file that is not local (part_linux.go)
	undeferred bool // TCP_DEFER_ACCEPT is off on the listeners (tick)

	stopReq atomic.Bool
	mu      sync.Mutex // guards closed against Stop's shutdown of the listeners
	closed  bool       // the listeners are closed
}

// Setup makes the listeners blocking with a one-second timeout, which the
// accepted sockets inherit (loops.Loop).
func (l *loop) Setup() error {
	l.core = l.srv.NewLoop(0)
	l.stats = &l.core.Stats
	l.sys = loops.NewSys(l.stats)
	if l.srv.Config.CGIDir != "" {
		// A loop blocked in the socket's read cannot watch a script's
		// pipe too (core.Backend).
		return fmt.Errorf("backend blocking runs no CGI scripts (--cgi-dir): use --backend=epoll or --backend=uring: %w", errors.ErrUnsupported)
	}
	l.buf = make([]byte, bufSize)
	for _, fd := range l.listeners {
		if err := l.sys.SetTimeouts(fd, &tickTimeval); err != nil {
			return os.NewSyscallError("setsockopt SO_RCVTIMEO/SO_SNDTIMEO", err)
		}
		l.pollfds = append(l.pollfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	// A connection inherits the listener's options when its handshake
	// completes, so those already queued (the server was listening before
	// this loop started) have no timeout, and a read of one that sends
	// nothing would block for good. Take them now, while the listeners
	// are still non-blocking, and give them the timeouts by hand; every
	// later connection inherits them.
	for _, fd := range l.listeners {
		for {
			cfd, errno := l.sys.Accept(fd, unix.SOCK_CLOEXEC)
			if errno != 0 {
				break // EAGAIN: the queue is empty
			}
			l.stats.Accepts++
			l.early = append(l.early, cfd)
			if err := l.sys.SetTimeouts(cfd, &tickTimeval); err != nil {
				return os.NewSyscallError("setsockopt SO_RCVTIMEO/SO_SNDTIMEO", err)
			}
		}
	}
	if len(l.listeners) == 1 {
		// One listener: accept4 itself blocks on it.
		if err := l.sys.SetBlocking(l.listeners[0]); err != nil {
			return os.NewSyscallError("fcntl", err)
		}
	}
	return nil
}

// Stop asks the loop to stop, from any goroutine. Shutting the listeners
// down wakes a blocked accept or poll at once; a connection being served
// sees the request within a second, at its next timeout. After a drain
// (core.Server.Retire) the listeners are left open, to wake the accept
// within a second: shutting one down resets the connections queued on
// it, whose clients, told nothing, have sent their requests; Run serves
// them first (serveQueued).
func (l *loop) Stop() {
	l.stopReq.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && !l.srv.Retiring() {
		for _, fd := range l.listeners {
			unix.Shutdown(fd, unix.SHUT_RD) // uncounted: Stop runs on another goroutine
		}
	}
}

// Run accepts and serves connections one at a time (loops.Loop).
func (l *loop) Run() error {
	for !l.stopReq.Load() {
		if len(l.early) > 0 {
			fd := l.early[0]
			l.early = l.early[1:]
			l.serve(fd)
			continue
		}
		fd, err := l.accept()
		l.tick()
		if loops.Fault != nil {
			if e := loops.Fault(0); e != 0 && err == nil {
				if fd >= 0 {
					l.sys.Close(fd)
				}
				fd, err = -1, os.NewSyscallError("accept4", e)
			}
		}
		if err != nil {
			return err
		}
		if fd >= 0 {
			l.serve(fd)
		}
	}
	if l.srv.Retiring() {
		l.serveQueued()
	}
	return nil
}

// serveQueued serves, at the shutdown after a drain, the connections
// queued on the listeners, one at a time as ever, until none is left or
// the shutdown's deadline passed: each is answered with Connection:
// close. What connects after the last accept is reset by the close.
func (l *loop) serveQueued() {
	for _, lfd := range l.listeners {
		if l.sys.SetNonblock(lfd) != nil {
			continue
		}
		for !l.stopping || time.Now().Before(l.deadline) {
			fd, errno := l.sys.Accept(lfd, unix.SOCK_CLOEXEC)
			if errno == unix.EINTR || errno == unix.ECONNABORTED {
				continue
			}
			if errno != 0 {
				break // EAGAIN: none left
			}
			l.stats.Accepts++
			l.serve(fd) // blocking (no SOCK_NONBLOCK), with the listener's timeouts (Setup)
		}
	}
}

// tick sets the core's clock; it reports true once a second. Then, once
// the server is retiring, it turns TCP_DEFER_ACCEPT off on the listeners
// (core.Server.Retiring).
func (l *loop) tick() bool {
	if !l.core.Tick(time.Now()) {
		return false
	}
	if !l.undeferred && l.srv.Retiring() {
		l.undeferred = true
		for _, fd := range l.listeners {
			l.sys.Undefer(fd)
		}
	}
	return true
}

// accept returns the next connection, or -1 when a second passed, a
// signal came or a client gave up first.
func (l *loop) accept() (int, error) {
	lfd := l.listeners[0]
	if len(l.listeners) > 1 {
		n, err := l.sys.Poll(l.pollfds, int(tick/time.Millisecond))
		if err != nil && err != unix.EINTR {
			return -1, os.NewSyscallError("poll", err)
		}
		lfd = -1
		for _, p := range l.pollfds {
			if p.Revents != 0 {
				lfd = int(p.Fd)
				break
			}
		}
		if n <= 0 || lfd < 0 {
			return -1, nil
		}
	}
	// No SOCK_NONBLOCK: the connection is blocking whatever the listener
	// is. No address either (loops.Sys.Accept). Through the runtime: the
	// call blocks.
	fd, errno := l.sys.AcceptBlocking(lfd, unix.SOCK_CLOEXEC)
	switch errno {
	case 0:
	case unix.EAGAIN, unix.EINTR, unix.ECONNABORTED:
		return -1, nil
	case unix.EINVAL:
		if l.stopReq.Load() {
			return -1, nil // Stop shut the listener down
		}
		return -1, os.NewSyscallError("accept4", errno)
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
		// The connection stays in the backlog; do not spin on it.
		fmt.Fprintf(os.Stderr, "twinloop: blocking: accept4: %v; not accepting for 500ms (raise the fd limit with ulimit -n)\n", errno)
		time.Sleep(500 * time.Millisecond)
		return -1, nil
	default:
		return -1, os.NewSyscallError("accept4", errno)
	}
	l.stats.Accepts++
	// A connection that moved over from another server's listener when
	// that one closed (--takeover, tcp_migrate_req) was made by it and
	// carries its options: an epoll or io_uring server's give no timeout,
	// and a read of one that sends nothing would block the one thread for
	// good. One getsockopt per connection finds those.
	if !l.sys.HasTimeout(fd) {
		if err := l.sys.SetTimeouts(fd, &tickTimeval); err != nil {
			l.sys.Close(fd) // it cannot be served without them
			return -1, nil
		}
	}
	return fd, nil
}

// serve runs one connection to its end.
func (l *loop) serve(fd int) {
	remote, local := l.sys.Addrs(l.srv, fd)
	c := l.core.NewConn(remote)
	c.Handle, c.Local = fd, local
	defer func() {
		l.part = part{}
		l.stats.Closes++
		l.sys.Close(fd)
		l.core.FreeConn(c)
	}()
	peeked := false // Peek was asked once: a second close is final
	for {
		if l.stopReq.Load() && !l.stopping {
			l.stopping = true
			l.deadline = time.Now().Add(l.srv.Config.ShutdownTimeout)
			l.core.Drain()
		}
		switch c.Next() {
		case core.ActWrite:
			if !l.write(fd, c) {
				return
			}
		case core.ActRead:
			if l.stopping && c.Idle() || !c.Interest().Read {
				// Read is false only behind a CGI script, which this
				// backend does not run.
				return
			}
			n, errno := l.sys.ReadBlocking(fd, l.buf)
			l.tick()
			switch {
			case errno == unix.EAGAIN:
				if !l.waited(c) {
					return
				}
			case errno == unix.EINTR:
			case errno != 0:
				return
			case n == 0:
				c.EOF()
			default:
				c.Feed(l.buf[:n])
				// A client that trickles (a byte every 0.9 s) never lets
				// a read wait out SO_RCVTIMEO, so the timeouts are applied
				// after reads too, once a second, while the connection
				// waits for input: its head is held to --header-timeout
				// from its first byte, as on the event loops, and its
				// linger to its own timeout. Not with a response queued:
				// its write timeout counts from the last progress, which
				// the first write makes.
				if c.Next() == core.ActRead && l.core.Now().Sub(l.checked) >= tick && !l.waited(c) {
					return
				}
			}
		case core.ActLinger:
			l.sys.Shutdown(fd, unix.SHUT_WR)
			c.Linger()
		case core.ActClose:
			if !peeked && l.sys.Peek(fd) {
				// A close() with unread input sends a RST, which would
				// throw away the response's unsent tail: linger instead.
				peeked = true
				c.Unread()
				continue
			}
			return
		}
	}
}

// waited handles a blocking call that made no progress for a second, or
// a second of reads that did: it applies the connection's timeouts and the
// shutdown deadline, and reports whether to go on.
func (l *loop) waited(c *core.Conn) bool {
	l.checked = l.core.Now()
	if l.stopping && time.Now().After(l.deadline) {
		return false
	}
	return c.CheckTimeout() != core.ActClose
}

// write sends some of what c has to send; it reports false when the
// connection is to be closed.
func (l *loop) write(fd int, c *core.Conn) bool {
	o := c.Out()
	var n int
	var err unix.Errno
	switch {
	case len(o.Mem) > 0:
		n, err = l.sys.WriteBlocking(fd, o.Mem)
	case len(o.Body) > 0:
		// A body referenced from the cache (core.Out.Body): a write of
		// its own. This backend is the baseline, one thread per
		// connection; it gathers nothing.
		n, err = l.sys.WriteBlocking(fd, o.Body)
	case !o.File.Local():
		return l.writePart(fd, c, o)
	default:
		off := o.Off
		n, err = l.sys.Sendfile(fd, o.File.Fd(), &off, int(min(o.N, sendfileChunk)))
		if err == 0 && n == 0 {
			return false // the file shrank: only closing tells the client
		}
	}
	l.tick()
	switch {
	case err == unix.EAGAIN && n <= 0:
		return l.waited(c)
	case err == unix.EINTR && n <= 0:
		return true
	case err != 0 && n <= 0:
		return false
	}
	c.Sent(int64(n))
	return true
}

// Teardown closes the listeners (loops.Loop); serve closed the last
// connection.
func (l *loop) Teardown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		for _, fd := range l.listeners {
			l.sys.Close(fd)
		}
		l.closed = true
	}
	for _, fd := range l.early { // taken by Setup, never served
		l.sys.Close(fd)
	}
	l.early = nil
	if l.core != nil {
		l.core.Close()
	}
}
