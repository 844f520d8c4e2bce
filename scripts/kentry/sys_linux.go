package main

// unsafe is confined to this file. It makes the raw system calls the
// benchmarks time, as the backends make them (backend/internal/loops,
// backend/uring/sys_linux.go): RawSyscall, each buffer's address taken in
// the call's own argument list. And it reads three unexported fields of
// giouring.Ring, as backend/uring does and for the same reason: the pinned
// giouring publishes the SQ tail only inside its Submit calls, which enter
// through syscall.Syscall6, and the backend enters raw.

import (
	"sync/atomic"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// getppidSyscall is getppid(2) through the runtime's entersyscall and
// exitsyscall, as every blocking call Go makes (syscall.Syscall).
func getppidSyscall() int {
	r, _, _ := unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
	return int(r)
}

// getppidRaw is getppid(2) without them (syscall.RawSyscall), as the
// backends make every call that cannot block.
func getppidRaw() int {
	r, _, _ := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
	return int(r)
}

// read is read(2), raw, as loops.Sys.Read.
func read(fd int, p []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

// write is write(2), raw, as loops.Sys.Write.
func write(fd int, p []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

// sendfile is sendfile(2), raw, as loops.Sys.SendfileResident (a range
// in the page cache).
func sendfile(out, in int, off *int64, n int) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDFILE, uintptr(out), uintptr(in), uintptr(unsafe.Pointer(off)), uintptr(n), 0, 0)
	return int(r), e
}

// epollWait is epoll_wait(2) with a zero timeout, raw, as the epoll loop's
// first wait of a pass (loops.Sys.EpollWait with block false).
func epollWait(epfd int, events []unix.EpollEvent) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))),
		uintptr(len(events)), 0, 0, 0)
	return int(r), e
}

// enter is io_uring_enter(2) with IORING_ENTER_GETEVENTS and no argument,
// raw, as the io_uring loop's enters that cannot sleep long
// (backend/uring's enter with block false).
func enter(fd int, toSubmit, minComplete uint32) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit), uintptr(minComplete),
		uintptr(giouring.EnterGetEvents), 0, 0)
	return int(r), e
}

// sqView and ringView mirror giouring v0.0.0-20230826085535-69588b89acb9's
// SubmissionQueue and Ring field for field, as backend/uring's do (the
// size checks below fail the build if a field is added or removed; check
// fails setup if the values do not match what the exported API reports).
type sqView struct {
	head, tail, ringMask, ringEntries, flags, dropped, array *uint32
	sqes                                                     unsafe.Pointer
	ringSize                                                 uint
	ringPtr                                                  unsafe.Pointer
	sqeHead, sqeTail                                         uint32
	_                                                        [2]uint32
}

type ringView struct {
	sq          *sqView
	cq          unsafe.Pointer
	flags       uint32
	ringFd      int
	features    uint32
	enterRingFd int
	intFlags    uint8
	_           [3]uint8
	_           uint32
}

var (
	_ [unsafe.Sizeof(ringView{}) - unsafe.Sizeof(giouring.Ring{})]byte
	_ [unsafe.Sizeof(giouring.Ring{}) - unsafe.Sizeof(ringView{})]byte
	_ [unsafe.Sizeof(sqView{}) - unsafe.Sizeof(giouring.SubmissionQueue{})]byte
	_ [unsafe.Sizeof(giouring.SubmissionQueue{}) - unsafe.Sizeof(sqView{})]byte
)

func viewOf(r *giouring.Ring) *ringView { return (*ringView)(unsafe.Pointer(r)) }

// check reports whether the mirror reads what giouring itself reports for
// a ring just set up with flags.
func (v *ringView) check(r *giouring.Ring, flags uint32) bool {
	return v.ringFd == r.RingFd() && v.enterRingFd == r.RingFd() && v.flags == flags &&
		v.sq != nil && v.sq.ringEntries != nil && *v.sq.ringEntries == r.SQSpaceLeft() &&
		v.sq.sqeTail == v.sq.sqeHead
}

// flushSQ publishes the SQEs queued since the last flush to the kernel and
// returns how many it has not consumed yet (liburing's __io_uring_flush_sq).
func (v *ringView) flushSQ() uint32 {
	sq := v.sq
	if sq.sqeHead != sq.sqeTail {
		sq.sqeHead = sq.sqeTail
		atomic.StoreUint32(sq.tail, sq.sqeTail)
	}
	return sq.sqeTail - atomic.LoadUint32(sq.head)
}
