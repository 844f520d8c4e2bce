package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// The operations the benchmarks time (kentry_linux_test.go), each set up
// once and then made once per call, so that a test can make each once and
// check what it did. The system calls themselves are in sys_linux.go.

// pin locks the calling goroutine to its thread and the thread to the
// first CPU it may run on (CPU 0 under make kentry's taskset), so that a
// benchmark's calls all run on one CPU, as a loop of the server does.
// unpin gives the thread its CPUs back and unlocks it.
func pin() (unpin func(), err error) {
	runtime.LockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		runtime.UnlockOSThread()
		return nil, os.NewSyscallError("sched_getaffinity", err)
	}
	for cpu := 0; cpu < len(was)*64; cpu++ {
		if !was.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			runtime.UnlockOSThread()
			return nil, os.NewSyscallError("sched_setaffinity", err)
		}
		return func() {
			unix.SchedSetaffinity(0, &was)
			runtime.UnlockOSThread()
		}, nil
	}
	runtime.UnlockOSThread()
	return nil, errors.New("no CPU in the thread's affinity mask")
}

// pair is two connected stream sockets, blocking (a read waits for what
// the other end wrote, with 5 s guards on reads and writes so that a
// fault fails rather than hangs). For TCP, a is the client's end and b the accepted one, with
// TCP_NODELAY on both, as the server sets on its connections.
type pair struct{ a, b int }

func (p pair) Close() {
	unix.Close(p.a)
	unix.Close(p.b)
}

// unixPair is an AF_UNIX socketpair.
func unixPair() (pair, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return pair{-1, -1}, os.NewSyscallError("socketpair", err)
	}
	p := pair{fds[0], fds[1]}
	return p, p.guard()
}

// tcpPair is a TCP connection over 127.0.0.1, the study's traffic.
func tcpPair() (p pair, err error) {
	p = pair{-1, -1}
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return p, os.NewSyscallError("socket", err)
	}
	defer unix.Close(l)
	if err = unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return p, os.NewSyscallError("bind", err)
	}
	if err = unix.Listen(l, 1); err != nil {
		return p, os.NewSyscallError("listen", err)
	}
	sa, err := unix.Getsockname(l)
	if err != nil {
		return p, os.NewSyscallError("getsockname", err)
	}
	if p.a, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return p, os.NewSyscallError("socket", err)
	}
	if err = unix.Connect(p.a, sa); err != nil {
		p.Close()
		return p, os.NewSyscallError("connect", err)
	}
	if p.b, _, err = unix.Accept4(l, unix.SOCK_CLOEXEC); err != nil {
		p.Close()
		return p, os.NewSyscallError("accept4", err)
	}
	for _, fd := range []int{p.a, p.b} {
		if err = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
			p.Close()
			return p, os.NewSyscallError("setsockopt", err)
		}
	}
	return p, p.guard()
}

// deep gives p room for batch segments of size bytes in flight: a's
// send buffer and b's receive buffer (the kernel doubles what is asked),
// so that the writes of a batch do not wait for its reads.
func (p pair) deep(batch int) error {
	for _, o := range [][2]int{{p.a, unix.SO_SNDBUF}, {p.b, unix.SO_RCVBUF}} {
		if err := unix.SetsockoptInt(o[0], unix.SOL_SOCKET, o[1], 4*batch*size); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

func (p pair) guard() error {
	tv := unix.Timeval{Sec: 5}
	for _, fd := range []int{p.a, p.b} {
		for _, o := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, o, &tv); err != nil {
				p.Close()
				return os.NewSyscallError("setsockopt", err)
			}
		}
	}
	return nil
}

// writeRead writes w on p.a and reads len(w) bytes on p.b into r: one
// write(2) and, on loopback, one read(2) (more if the bytes arrive in
// parts). It returns how many bytes it read.
func (p pair) writeRead(w, r []byte) (int, error) {
	if n, e := write(p.a, w); e != 0 || n != len(w) {
		return 0, fmt.Errorf("write: %d of %d bytes: %v", n, len(w), e)
	}
	return p.drain(r[:len(w)])
}

// drain reads len(r) bytes on p.b into r.
func (p pair) drain(r []byte) (int, error) {
	got := 0
	for got < len(r) {
		n, e := read(p.b, r[got:])
		if e == unix.EINTR {
			continue
		}
		if e != 0 || n == 0 {
			return got, fmt.Errorf("read: %d of %d bytes: %v", got, len(r), e)
		}
		got += n
	}
	return got, nil
}

// idleEpoll is an epoll fd with one idle socket registered (edge
// triggered for input, as the epoll backend registers its connections),
// for epoll_wait(2) with a zero timeout: a loop's poll that finds nothing.
type idleEpoll struct {
	fd     int
	conn   pair
	events []unix.EpollEvent
}

func newIdleEpoll() (*idleEpoll, error) {
	conn, err := tcpPair()
	if err != nil {
		return nil, err
	}
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		conn.Close()
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(conn.b)}
	if err = unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, conn.b, &ev); err != nil {
		conn.Close()
		unix.Close(fd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return &idleEpoll{fd: fd, conn: conn, events: make([]unix.EpollEvent, 64)}, nil
}

// wait is one epoll_wait(2) with a zero timeout; it returns the number of
// events, 0 while the socket stays idle.
func (e *idleEpoll) wait() (int, error) {
	n, errno := epollWait(e.fd, e.events)
	if errno != 0 {
		return 0, os.NewSyscallError("epoll_wait", errno)
	}
	return n, nil
}

func (e *idleEpoll) Close() {
	unix.Close(e.fd)
	e.conn.Close()
}

// ringFlags are the io_uring backend's (backend/uring/ring_linux.go):
// one issuer, task work run only when it enters.
const ringFlags = giouring.SetupSubmitAll | giouring.SetupSingleIssuer | giouring.SetupDeferTaskrun

// ring is an io_uring instance set up as the backend's, on the calling
// thread (SINGLE_ISSUER: only that thread may enter it).
type ring struct {
	r    *giouring.Ring
	v    *ringView
	cqes []*giouring.CompletionQueueEvent
}

// errNoRing says the kernel or sandbox refuses io_uring; the benchmarks
// skip on it.
var errNoRing = errors.New("io_uring unavailable")

func newRing() (*ring, error) {
	r := giouring.NewRing()
	if err := r.QueueInit(8, ringFlags); err != nil {
		msg := ""
		if b, e := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); e == nil {
			msg = fmt.Sprintf(" (kernel.io_uring_disabled = %s)", string(b[:max(len(b)-1, 0)]))
		}
		return nil, fmt.Errorf("%w: io_uring_setup: %v%s", errNoRing, err, msg)
	}
	v := viewOf(r)
	if !v.check(r, ringFlags) {
		r.QueueExit()
		return nil, errors.New("giouring.Ring's layout is not what sys_linux.go mirrors")
	}
	return &ring{r: r, v: v, cqes: make([]*giouring.CompletionQueueEvent, 1)}, nil
}

// enterEmpty is io_uring_enter(2) with nothing to submit and nothing to
// wait for; it returns the kernel's answer, 0 SQEs taken.
func (g *ring) enterEmpty() (int, error) {
	n, errno := enter(g.r.RingFd(), 0, 0)
	if errno != 0 {
		return 0, os.NewSyscallError("io_uring_enter", errno)
	}
	return n, nil
}

// nop submits one IORING_OP_NOP carrying data and reaps its CQE in the
// same enter (min_complete 1): the ring's round trip without any work. It
// returns the CQE's user_data and result.
func (g *ring) nop(data uint64) (uint64, int32, error) {
	sqe := g.r.GetSQE()
	if sqe == nil {
		return 0, 0, errors.New("SQ full")
	}
	sqe.PrepareNop() // io_uring_prep_nop(3)
	sqe.UserData = data
	// One enter submits and reaps. Another only if a signal (Go's
	// preemption, URING-NOTES.md) cut the first short: EINTR, or the SQE
	// taken but the wait for its CQE interrupted.
	for first := true; first || g.r.CQReady() == 0; first = false {
		_, errno := enter(g.r.RingFd(), g.v.flushSQ(), 1)
		if errno != 0 && errno != unix.EINTR {
			return 0, 0, os.NewSyscallError("io_uring_enter", errno)
		}
	}
	// PeekBatchCQE walks the slice it is given: pass it only what is ready.
	if n := g.r.PeekBatchCQE(g.cqes[:min(g.r.CQReady(), 1)]); n != 1 {
		return 0, 0, errors.New("the NOP's CQE did not arrive")
	}
	cqe := g.cqes[0]
	g.r.CQAdvance(1)
	return cqe.UserData, cqe.Res, nil
}

func (g *ring) Close() { g.r.QueueExit() }

// size is the study's page: the 1.5 KB body at c=50 keep-alive.
const size = 1500

// pageFile is a file of size bytes in dir (byte i is i mod 256), read once so that it is in the
// page cache, open for sendfile.
func pageFile(dir string) (*os.File, error) {
	name := filepath.Join(dir, "page.html")
	page := make([]byte, size)
	for i := range page {
		page[i] = byte(i)
	}
	if err := os.WriteFile(name, page, 0o644); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.ReadAt(make([]byte, size), 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sendfileRead sends the whole of file in (size bytes, from offset 0) on
// p.a with one sendfile(2) and reads it on p.b into r. It returns the
// bytes sendfile sent.
func (p pair) sendfileRead(in int, r []byte) (int, error) {
	var off int64
	n, e := sendfile(p.a, in, &off, size)
	if e != 0 || n != size {
		return n, fmt.Errorf("sendfile: %d of %d bytes: %v", n, size, e)
	}
	if _, err := p.drain(r[:size]); err != nil {
		return n, err
	}
	return n, nil
}
