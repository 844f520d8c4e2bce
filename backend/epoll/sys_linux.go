package epoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The raw syscalls of the hot path. unsafe is confined to this file: each
// function passes a Go slice's address to the kernel for the duration of
// one non-blocking call, during which the slice cannot move.

func rawRead(fd int, p []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

func rawWrite(fd int, p []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return int(r), e
}

// rawSendMore is send(2) with MSG_MORE: the bytes wait for what follows
// (the sendfile body) to fill a segment.
func rawSendMore(fd int, p []byte) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		unix.MSG_MORE|unix.MSG_NOSIGNAL, 0, 0)
	return int(r), e
}

// rawAccept accepts without asking for the peer address: the access log
// asks for it with getpeername only when it is on.
func rawAccept(fd int) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	return int(r), e
}

// epollWait is epoll_wait; block says whether it may sleep, and so whether
// it must let the runtime know.
func epollWait(epfd int, events []unix.EpollEvent, msec int, block bool) (int, unix.Errno) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(events)))
	if !block {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), p, uintptr(len(events)), 0, 0, 0)
		return int(r), e
	}
	r, _, e := unix.Syscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), p, uintptr(len(events)), uintptr(msec), 0, 0)
	return int(r), e
}
