package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// The generator is one thread with one epoll set, as wrk2 is: the
// connections' sockets and a timerfd armed for the next intended send
// time. Go's own timers would not do: while the process is idle the
// runtime sleeps in epoll_wait with a millisecond timeout, so a send
// would leave up to a millisecond late, more than a whole response
// takes on loopback; a timerfd in the same epoll set wakes the loop when
// the kernel's timer fires.
//
// Request i of the run is due at start + i/rate. Whichever connection is
// idle first takes the next due request (pipelining is not used: one
// request in flight per connection). When every connection is waiting
// for the server, due requests queue, and each is sent as soon as a
// connection is free; its latency counts from when it was due. That is
// the correction for coordinated omission: a server that stalls is
// charged for every request the schedule wanted to send meanwhile, not
// only for the one that was in flight.

// run is one connection. A request in flight has busy set.
type run struct {
	fd       int
	busy     bool
	due      time.Duration // the request in flight: its intended send time, since start
	sent     time.Duration // and when it left
	idleFrom time.Duration // when the connection was last free to send
	buf      []byte        // bytes read and not yet consumed, buf[:n]
	n        int
	body     int  // body bytes still to come; -1 while reading the header
	close    bool // the response in flight said Connection: close
}

// generate runs the schedule of cfg against its server and returns what
// it measured. It locks the calling goroutine to its thread for the run.
func generate(cfg config) (result, error) {
	if err := cfg.check(); err != nil {
		return result{}, err
	}
	ap, err := netip.ParseAddrPort(cfg.addr)
	if err != nil {
		return result{}, fmt.Errorf("-addr %q: want ip:port: %v", cfg.addr, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A thread's timer slack (50 µs by default) delays its sleeps' ends;
	// the epoll_wait timeout is only the drain's, but keep every wake exact.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)

	g := &gen{cfg: cfg, addr: ap, req: []byte("GET " + cfg.path + " HTTP/1.1\r\nHost: " + cfg.addr + "\r\n\r\n")}
	defer g.closeAll()
	if g.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return result{}, os.NewSyscallError("epoll_create1", err)
	}
	if g.timer, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		return result{}, os.NewSyscallError("timerfd_create", err)
	}
	if err := g.watch(g.timer, timerTag); err != nil {
		return result{}, err
	}
	g.conns = make([]*run, cfg.conns)
	for i := range g.conns {
		g.conns[i] = &run{fd: -1, buf: make([]byte, 64<<10), body: -1}
		if err := g.connect(i); err != nil {
			return result{}, err
		}
	}
	return g.loop()
}

const timerTag = -1 // the epoll tag of the timerfd; a connection's is its index

type gen struct {
	cfg   config
	addr  netip.AddrPort
	req   []byte
	ep    int
	timer int
	conns []*run
	idle  []int // indexes of the connections free to send
	start time.Time
	res   result
}

func (g *gen) watch(fd, tag int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(tag)}
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(g.ep, unix.EPOLL_CTL_ADD, fd, &ev))
}

// connect opens connection i (blocking: on loopback it completes at
// once), then makes it non-blocking and watches it.
func (g *gen) connect(i int) error {
	c := g.conns[i]
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	sa := &unix.SockaddrInet4{Port: int(g.addr.Port()), Addr: g.addr.Addr().As4()}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return fmt.Errorf("connect %s: %w", g.addr, err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return os.NewSyscallError("fcntl", err)
	}
	c.fd, c.busy, c.n, c.body, c.close = fd, false, 0, -1, false
	if err := g.watch(fd, i); err != nil {
		unix.Close(fd)
		c.fd = -1
		return err
	}
	g.idle = append(g.idle, i)
	if !g.start.IsZero() {
		c.idleFrom = time.Since(g.start)
	}
	return nil
}

// reconnect replaces connection i after an error or a Connection: close.
func (g *gen) reconnect(i int) error {
	c := g.conns[i]
	unix.Close(c.fd) // closing removes it from the epoll set
	c.fd = -1
	return g.connect(i)
}

func (g *gen) closeAll() {
	for _, c := range g.conns {
		if c != nil && c.fd >= 0 {
			unix.Close(c.fd)
		}
	}
	for _, fd := range []int{g.timer, g.ep} {
		if fd > 0 {
			unix.Close(fd)
		}
	}
}

// due is when request i is to be sent, since start.
func (g *gen) due(i int64) time.Duration {
	return time.Duration(i * int64(time.Second) / int64(g.cfg.rate))
}

func (g *gen) loop() (result, error) {
	total := int64(float64(g.cfg.rate) * g.cfg.duration.Seconds())
	end := g.cfg.duration
	stop := end + g.cfg.drain
	var (
		next   int64              // the next request of the schedule to send
		armed  time.Duration = -1 // what the timerfd is set for
		events [128]unix.EpollEvent
		ru0    unix.Rusage
		tick   [8]byte // the timerfd's expiration count, read to clear it
	)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	g.start = time.Now()
	for {
		now := time.Since(g.start)
		// Send every due request that an idle connection can take. A
		// request due before the end is sent after it too, in the drain,
		// if the generator or the server was behind.
		for now < stop && next < total && len(g.idle) > 0 && g.due(next) <= now {
			i := g.idle[len(g.idle)-1]
			g.idle = g.idle[:len(g.idle)-1]
			if err := g.send(i, g.due(next), now); err != nil {
				return g.res, err
			}
			next++
			now = time.Since(g.start)
		}
		if now >= stop || next == total && len(g.idle) == len(g.conns) {
			break
		}
		// Wake for the next due request when a connection could take it;
		// a busy connection's response wakes the loop anyway.
		if next < total && len(g.idle) > 0 && g.due(next) != armed {
			armed = g.due(next)
			wait := unix.NsecToTimespec(int64(max(armed-now, 1)))
			if err := unix.TimerfdSettime(g.timer, 0, &unix.ItimerSpec{Value: wait}, nil); err != nil {
				return g.res, os.NewSyscallError("timerfd_settime", err)
			}
		}
		ms := int((stop - now + time.Millisecond - 1) / time.Millisecond)
		n, err := unix.EpollWait(g.ep, events[:], ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return g.res, os.NewSyscallError("epoll_wait", err)
		}
		for _, ev := range events[:n] {
			if ev.Fd == timerTag {
				unix.Read(g.timer, tick[:]) // clears its readiness
				armed = -1
				continue
			}
			if err := g.receive(int(ev.Fd)); err != nil {
				return g.res, err
			}
		}
	}
	var ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	g.res.cpu = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	g.res.offered = total
	g.res.unsent = total - next
	g.res.unfinished = int64(len(g.conns) - len(g.idle))
	g.res.duration = end
	return g.res, nil
}

// send writes request due on idle connection i. A failed write counts
// as an error, and the connection is replaced.
func (g *gen) send(i int, due, now time.Duration) error {
	c := g.conns[i]
	// The generator's own delay: from when the request could have left
	// (due, or later when no connection was free) to when it did.
	g.res.lag.record(now - max(due, c.idleFrom))
	n, err := unix.Write(c.fd, g.req)
	if err != nil || n != len(g.req) {
		g.res.errors++
		return g.reconnect(i)
	}
	c.busy, c.due, c.sent = true, due, now
	return nil
}

// receive reads what connection i has and, when its response is
// complete, records it and frees the connection. One read per wake-up:
// epoll is level-triggered, and a small response is one read.
func (g *gen) receive(i int) error {
	c := g.conns[i]
	if c.fd < 0 {
		return nil
	}
	k, err := unix.Read(c.fd, c.buf[c.n:])
	if err == unix.EAGAIN || err == unix.EINTR {
		return nil
	}
	if err != nil || k == 0 || !c.busy {
		// Closed, reset, or bytes nobody asked for.
		if c.busy {
			g.res.errors++
		}
		g.dropIdle(i)
		return g.reconnect(i)
	}
	c.n += k
	if c.body < 0 {
		h := bytes.Index(c.buf[:c.n], []byte("\r\n\r\n"))
		if h < 0 {
			if c.n == len(c.buf) {
				return g.fail(i) // a header larger than the buffer
			}
			return nil
		}
		status, length, closing, ok := parseHead(c.buf[:h])
		if !ok {
			return g.fail(i)
		}
		if status >= 400 {
			g.res.non2xx++
		}
		c.body, c.close = length, closing
		c.n = copy(c.buf, c.buf[h+4:c.n])
	}
	// Body bytes are counted and dropped.
	take := min(c.body, c.n)
	c.body -= take
	c.n = copy(c.buf, c.buf[take:c.n])
	if c.body > 0 {
		return nil
	}
	if c.n != 0 {
		return g.fail(i) // more than one response to one request
	}
	now := time.Since(g.start)
	g.res.latency.record(now - c.due)
	g.res.service.record(now - c.sent)
	if now <= g.cfg.duration {
		g.res.done++
	}
	c.busy, c.body = false, -1
	if c.close {
		return g.reconnect(i)
	}
	c.idleFrom = now
	g.idle = append(g.idle, i)
	return nil
}

// fail counts the request in flight on connection i as an error and
// replaces the connection.
func (g *gen) fail(i int) error {
	g.res.errors++
	g.conns[i].busy = false
	return g.reconnect(i)
}

// dropIdle takes connection i off the idle list, if it is there.
func (g *gen) dropIdle(i int) {
	for k, j := range g.idle {
		if j == i {
			g.idle = append(g.idle[:k], g.idle[k+1:]...)
			return
		}
	}
}

// parseHead reads a response header (without its final CRLF CRLF): the
// status code, Content-Length and whether it says Connection: close.
// A response without Content-Length cannot be framed here (the servers
// under test send one for every file), so it is not ok.
func parseHead(h []byte) (status, length int, closing, ok bool) {
	line, rest, _ := bytes.Cut(h, []byte("\r\n"))
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, 0, false, false
	}
	status, ok = atoi(line[9:12])
	if !ok {
		return 0, 0, false, false
	}
	length = -1
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, ok = atoi(value); !ok {
				return 0, 0, false, false
			}
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	return status, length, closing, length >= 0
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
