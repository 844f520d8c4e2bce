package poll

import (
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// The loop's system calls are made and counted by loops.Sys (l.sys), but
// accept4, which a test replaces (accept4 is a variable): it is counted
// here, in acceptOne.

// rawAccept is accept4(2) on a non-blocking listener, the connection
// non-blocking and close-on-exec, without the peer's address (loops.Sys.Accept).
func rawAccept(fd int) (int, unix.Errno) {
	return loops.RawAccept(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
}

// acceptOne is accept4, counted.
func (l *loop) acceptOne(lfd int) (int, unix.Errno) {
	l.stats.Syscalls[core.SysAccept]++
	return accept4(lfd)
}
