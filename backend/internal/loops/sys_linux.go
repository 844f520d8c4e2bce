package loops

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
)

// Sys makes the system calls of one loop's thread and counts each in the
// loop's core.Stats: once per call, whatever the call returns, EINTR and
// EAGAIN too. Counting here, and nowhere else, is what lets the counters
// agree with strace call for call (make syscalls: labrun -strace): a call site
// cannot forget to count, and TestSyscallsCountedInWrappers fails when
// one counts by hand or calls the kernel past these wrappers. Calls
// outside a loop's counters on purpose (Probe, the listeners' setup,
// Teardown, the Waker, which other goroutines write) are marked where they
// are made.
//
// The calls that cannot block (a non-blocking fd, a flag that says so) go
// through RawSyscall: no entersyscall/exitsyscall, which would cost more
// than the call. Those that may sleep (the …Blocking ones, a blocking
// epoll_wait, sendfile from a file not in the page cache) go through
// Syscall, so that the runtime can hand the thread's P to other
// goroutines meanwhile. unsafe is confined to this file: each call passes
// a Go slice's address to the kernel for the duration of that call.
//
// A count is one add on the loop's own Stats. Close, Shutdown, EpollCtl
// and a few more are inlined; Read, Write, SendMore and Sendfile are just
// over the inliner's budget (go build -gcflags=-m=2 says by how much), so
// each costs one call frame more than the raw calls epoll made before it
// counted here: within noise at c=50 keep-alive (results/syscount,
// results/design-pass).
type Sys struct{ st *core.Stats }

// NewSys counts into st, which only the loop's thread writes.
func NewSys(st *core.Stats) Sys { return Sys{st} }

// Read is read(2) on a non-blocking fd.
func (s Sys) Read(fd int, p []byte) (int, unix.Errno) {
	s.st.Syscalls[core.SysRead]++
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

// Write is write(2) on a non-blocking fd.
func (s Sys) Write(fd int, p []byte) (int, unix.Errno) {
	s.st.Syscalls[core.SysWrite]++
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

// SendMore is send(2) with MSG_MORE on a non-blocking socket: the bytes
// wait for what follows (a sendfile body) to fill a segment.
func (s Sys) SendMore(fd int, p []byte) (int, unix.Errno) {
	s.st.Syscalls[core.SysSendto]++
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		unix.MSG_MORE|unix.MSG_NOSIGNAL, 0, 0)
	return int(r), e
}

// Writev is writev(2) on a non-blocking socket, or sendmsg(2) with
// MSG_MORE when more is set (a file body follows, as with SendMore).
// The bytes iov points to stay valid and unmoved for the call.
func (s Sys) Writev(fd int, iov []unix.Iovec, more bool) (int, unix.Errno) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(iov)))
	if !more {
		s.st.Syscalls[core.SysWritev]++
		r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), p, uintptr(len(iov)))
		return int(r), e
	}
	s.st.Syscalls[core.SysSendmsg]++
	msg := unix.Msghdr{Iov: unsafe.SliceData(iov), Iovlen: uint64(len(iov))}
	r, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_MORE|unix.MSG_NOSIGNAL)
	return int(r), e
}

// Cork sets or clears TCP_CORK on a socket (epoll's --epoll-cork
// ablation): while set, the kernel sends only full segments.
func (s Sys) Cork(fd int, on bool) {
	s.st.Syscalls[core.SysSetsockopt]++
	v := int32(0)
	if on {
		v = 1
	}
	unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_CORK, uintptr(unsafe.Pointer(&v)), 4, 0)
}

// Abort sets SO_LINGER to on with a zero timeout on a socket: its close
// then resets the connection and frees what the socket has not sent
// (io_uring, a response cut short with zero-copy sends out).
func (s Sys) Abort(fd int) {
	s.st.Syscalls[core.SysSetsockopt]++
	lg := unix.Linger{Onoff: 1, Linger: 0}
	unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER, uintptr(unsafe.Pointer(&lg)), unsafe.Sizeof(lg), 0)
}

// Iovecs sets iov to point at the pieces of vec, reusing its room.
// Clear it (clear(iov)) once the call is made: the pieces may be unmapped
// once sent, and the Go heap must not keep pointers into them.
func Iovecs(iov []unix.Iovec, vec [][]byte) []unix.Iovec {
	iov = iov[:0]
	for _, v := range vec {
		iov = append(iov, unix.Iovec{Base: unsafe.SliceData(v), Len: uint64(len(v))})
	}
	return iov
}

// Peek is recv(2) with MSG_PEEK|MSG_DONTWAIT: whether bytes wait unread.
func (s Sys) Peek(fd int) bool {
	s.st.Syscalls[core.SysRecvfrom]++
	var b [1]byte
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return e == 0 && int(r) > 0
}

// Accept is accept4(2) on a non-blocking listener, without asking for the
// peer's address: x/sys's Accept4 decodes it with a getsockopt per
// connection (results/blocking-accept); Addrs asks for it only when it is
// wanted. flags are accept4's (SOCK_NONBLOCK, SOCK_CLOEXEC).
func (s Sys) Accept(lfd, flags int) (int, unix.Errno) {
	s.st.Syscalls[core.SysAccept]++
	return RawAccept(lfd, flags)
}

// RawAccept is Accept uncounted, for a backend whose test replaces its
// accept (its own sys_linux.go counts it).
func RawAccept(lfd, flags int) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), 0, 0, uintptr(flags), 0, 0)
	return int(r), e
}

// EpollCtl is epoll_ctl(2).
func (s Sys) EpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	s.st.Syscalls[core.SysEpollCtl]++
	return unix.EpollCtl(epfd, op, fd, ev)
}

// EpollWait is epoll_wait(2); block says whether it may sleep (msec > 0),
// and so whether it must let the runtime know.
func (s Sys) EpollWait(epfd int, events []unix.EpollEvent, msec int, block bool) (int, unix.Errno) {
	s.st.Syscalls[core.SysEpollWait]++
	p := uintptr(unsafe.Pointer(unsafe.SliceData(events)))
	if !block {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), p, uintptr(len(events)), 0, 0, 0)
		return int(r), e
	}
	r, _, e := unix.Syscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), p, uintptr(len(events)), uintptr(msec), 0, 0)
	return int(r), e
}

// PollWait is ppoll(2) of fds for up to msec milliseconds, the poll
// backend's wait; block says whether it may sleep (msec > 0), and so
// whether it must let the runtime know, as EpollWait.
func (s Sys) PollWait(fds []unix.PollFd, msec int, block bool) (int, unix.Errno) {
	s.st.Syscalls[core.SysPoll]++
	p := uintptr(unsafe.Pointer(unsafe.SliceData(fds)))
	if !block {
		var zero unix.Timespec
		r, _, e := unix.RawSyscall6(unix.SYS_PPOLL, p, uintptr(len(fds)), uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		return int(r), e
	}
	ts := unix.NsecToTimespec(int64(msec) * 1e6)
	r, _, e := unix.Syscall6(unix.SYS_PPOLL, p, uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return int(r), e
}

// Sendfile is sendfile(2) where the range may not be in the page cache.
// It goes through the runtime (Syscall, not RawSyscall): on a file not in
// the page cache it blocks on the disk, and a thread blocked in a raw
// call holds its P, so a GC stop-the-world waits for the disk and stalls
// every loop meanwhile. The build tag sendfile_raw makes it raw again
// (sendfile_raw_linux.go), for scripts/cold-sendfile.sh to compare; on a
// blocking socket (the blocking backend) that build holds the P while the
// client is slow too. A range cachestat counted goes by SendfileResident.
func (s Sys) Sendfile(out, in int, off *int64, n int) (int, unix.Errno) {
	return s.sendfile(rawSendfile, out, in, off, n)
}

// SendfileResident is sendfile(2) as a raw call, for a range that
// cachestat found in the page cache, to a non-blocking socket, while no
// loop of the server has met a cold part lately (core.Server.Cold): then
// neither side waits, as a raw io_uring_enter does not. cachestat counts
// a page that a read has put in the cache and not yet filled, and a
// sendfile that meets one waits for the disk; a raw call would hold its P
// meanwhile, and a GC's stop-the-world would wait for the disk too.
func (s Sys) SendfileResident(out, in int, off *int64, n int) (int, unix.Errno) {
	return s.sendfile(true, out, in, off, n)
}

func (s Sys) sendfile(raw bool, out, in int, off *int64, n int) (int, unix.Errno) {
	s.st.Syscalls[core.SysSendfile]++
	// Each call is direct: the compiler keeps off alive and in place only
	// for a uintptr(unsafe.Pointer) in the argument list of the call itself.
	if raw {
		r, _, e := unix.RawSyscall6(unix.SYS_SENDFILE, uintptr(out), uintptr(in), uintptr(unsafe.Pointer(off)), uintptr(n), 0, 0)
		return int(r), e
	}
	r, _, e := unix.Syscall6(unix.SYS_SENDFILE, uintptr(out), uintptr(in), uintptr(unsafe.Pointer(off)), uintptr(n), 0, 0)
	return int(r), e
}

// Cachestat is cachestat(2) (Linux 6.5) of n bytes of fd from off: cs
// gets how many of their pages are in the page cache. It walks the page
// cache's tree and never waits for I/O: raw. x/sys has unix.Cachestat,
// made through Syscall; this is the same call, raw and counted.
func (s Sys) Cachestat(fd int, off, n uint64, cs *unix.Cachestat_t) unix.Errno {
	s.st.Syscalls[core.SysCachestat]++
	r := unix.CachestatRange{Off: off, Len: n}
	_, _, e := unix.RawSyscall6(unix.SYS_CACHESTAT, uintptr(fd), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(cs)), 0, 0, 0)
	return e
}

// PreadNowait is preadv2(2) of p at off with RWF_NOWAIT: EAGAIN instead
// of waiting when the bytes are not in the page cache (counted as a pread).
func (s Sys) PreadNowait(fd int, p []byte, off int64) (int, unix.Errno) {
	s.st.Syscalls[core.SysPread]++
	iov := unix.Iovec{Base: unsafe.SliceData(p)}
	iov.SetLen(len(p))
	// On 64-bit Linux pos_l carries the whole offset and pos_h is unused.
	r, _, e := unix.RawSyscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
	return int(r), e
}

// Close is close(2).
func (s Sys) Close(fd int) error {
	s.st.Syscalls[core.SysClose]++
	return unix.Close(fd)
}

// Shutdown is shutdown(2).
func (s Sys) Shutdown(fd, how int) error {
	s.st.Syscalls[core.SysShutdown]++
	return unix.Shutdown(fd, how)
}

// Pipe2 is pipe2(2).
func (s Sys) Pipe2(p *[2]int, flags int) error {
	s.st.Syscalls[core.SysPipe]++
	return unix.Pipe2(p[:], flags)
}

// Fcntl is fcntl(2) with an int argument.
func (s Sys) Fcntl(fd, cmd, arg int) (int, error) {
	s.st.Syscalls[core.SysFcntl]++
	return unix.FcntlInt(uintptr(fd), cmd, arg)
}

// SetBlocking clears O_NONBLOCK on fd: F_GETFL, then F_SETFL only if the
// flag was set (unix.SetNonblock's two calls, each counted).
func (s Sys) SetBlocking(fd int) error {
	fl, err := s.Fcntl(fd, unix.F_GETFL, 0)
	if err != nil || fl&unix.O_NONBLOCK == 0 {
		return err
	}
	_, err = s.Fcntl(fd, unix.F_SETFL, fl&^unix.O_NONBLOCK)
	return err
}

// SetNonblock sets O_NONBLOCK on fd: F_GETFL, then F_SETFL only if the
// flag was clear.
func (s Sys) SetNonblock(fd int) error {
	fl, err := s.Fcntl(fd, unix.F_GETFL, 0)
	if err != nil || fl&unix.O_NONBLOCK != 0 {
		return err
	}
	_, err = s.Fcntl(fd, unix.F_SETFL, fl|unix.O_NONBLOCK)
	return err
}

// SetTimeouts sets SO_RCVTIMEO and SO_SNDTIMEO to tv: two setsockopt(2).
func (s Sys) SetTimeouts(fd int, tv *unix.Timeval) error {
	for _, opt := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
		s.st.Syscalls[core.SysSetsockopt]++
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, tv); err != nil {
			return err
		}
	}
	return nil
}

// Undefer turns TCP_DEFER_ACCEPT off on listener fd: one setsockopt(2).
// From then on a connection is queued for accept when its handshake is
// done, not when its first bytes come (core.Server.Retiring).
func (s Sys) Undefer(fd int) error {
	s.st.Syscalls[core.SysSetsockopt]++
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 0)
}

// HasTimeout reports whether socket fd has a receive timeout
// (SO_RCVTIMEO): one getsockopt(2).
func (s Sys) HasTimeout(fd int) bool {
	s.st.Syscalls[core.SysGetsockopt]++
	tv, err := unix.GetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO)
	return err == nil && (tv.Sec != 0 || tv.Usec != 0)
}

// Mmap maps n bytes of anonymous, private memory, which the kernel may
// read or write after the call that hands it an address returns.
func (s Sys) Mmap(n int) ([]byte, error) {
	s.st.Syscalls[core.SysMmap]++
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// Munmap unmaps what Mmap mapped.
func (s Sys) Munmap(b []byte) {
	s.st.Syscalls[core.SysMunmap]++
	unix.Munmap(b)
}

// Addrs are the two ends of accepted socket fd (getpeername, getsockname)
// for Conn.Remote and Conn.Local, or zero values when srv does not want
// them (core.Server.WantsAddrs: only the access log and CGI do).
func (s Sys) Addrs(srv *core.Server, fd int) (remote, local netip.AddrPort) {
	if !srv.WantsAddrs() {
		return remote, local
	}
	s.st.Syscalls[core.SysGetpeername]++
	if sa, err := unix.Getpeername(fd); err == nil {
		remote = listen.AddrPort(sa)
	}
	s.st.Syscalls[core.SysGetsockname]++
	if sa, err := unix.Getsockname(fd); err == nil {
		local = listen.AddrPort(sa)
	}
	return remote, local
}

// The calls of the blocking backend, on blocking sockets: through the
// runtime, since they sleep until the peer moves or SO_RCVTIMEO /
// SO_SNDTIMEO passes.

// ReadBlocking is read(2) on a blocking fd.
func (s Sys) ReadBlocking(fd int, p []byte) (int, unix.Errno) {
	return s.blocking(core.SysRead, unix.SYS_READ, fd, p)
}

// WriteBlocking is write(2) on a blocking fd.
func (s Sys) WriteBlocking(fd int, p []byte) (int, unix.Errno) {
	return s.blocking(core.SysWrite, unix.SYS_WRITE, fd, p)
}

// blocking makes call trap (read or write) of kind k on fd and p.
func (s Sys) blocking(k core.Sys, trap uintptr, fd int, p []byte) (int, unix.Errno) {
	s.st.Syscalls[k]++
	r, _, e := unix.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

// AcceptBlocking is Accept on a listener that may be blocking.
func (s Sys) AcceptBlocking(lfd, flags int) (int, unix.Errno) {
	s.st.Syscalls[core.SysAccept]++
	r, _, e := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(lfd), 0, 0, uintptr(flags), 0, 0)
	return int(r), e
}

// Poll is ppoll(2) (what unix.Poll calls), for up to msec.
func (s Sys) Poll(fds []unix.PollFd, msec int) (int, error) {
	s.st.Syscalls[core.SysPoll]++
	return unix.Poll(fds, msec)
}
