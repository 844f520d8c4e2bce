package core

import "golang.org/x/sys/unix"

// FileCalls makes the file-system calls of a cache miss, a revalidation, a
// sidecar lookup and a CGI target lookup. The core makes them from its
// helper goroutines (offload.go), never from a loop's thread, so each call
// may wait for the disk; how a backend makes them is its choice:
//
//   - the default (DirectCalls) makes each call itself, on the helper
//     goroutine's thread: the helper pool is then nginx's thread_pool, and
//     is what epoll uses;
//   - io_uring makes each through its loop's ring (IORING_OP_OPENAT2,
//     IORING_OP_STATX, IORING_OP_READ) and answers the waiting goroutine
//     when the completion arrives: no thread waits for the disk.
//
// Every method may be called from any goroutine, concurrently, and must
// not return before the kernel is done with the memory it was given
// (path, how, st, p). Errors are bare unix.Errno values, EINTR retried.
// When the FileCalls makes system calls (DirectCalls.MakesSyscalls), the
// core counts each in the loop's Stats when its operation lands.
type FileCalls interface {
	// Openat2 is openat2(2) with how as given (RESOLVE_BENEATH and the
	// rest kept). A FileCalls that does not make system calls itself
	// (io_uring's ring) is asked only for opens confined to a local
	// root's mount (RESOLVE_NO_XDEV; mounts_linux.go): the others the
	// core makes on its helper.
	Openat2(dirfd int, path string, how *unix.OpenHow) (int, error)
	// Statx is statx(2); path "" with unix.AT_EMPTY_PATH stats dirfd.
	Statx(dirfd int, path string, flags, mask int, st *unix.Statx_t) error
	// Pread is pread(2) into p.
	Pread(fd int, p []byte, off int64) (int, error)
	// Close is close(2).
	Close(fd int) error
}

// DirectCalls makes each file-system call on the calling goroutine's own
// thread.
type DirectCalls struct{}

// MakesSyscalls says that each call is a system call, which the loop
// counts in its Stats.Syscalls when the operation lands. A FileCalls
// without this method (io_uring's ring) counts its own work (as SQEs).
func (DirectCalls) MakesSyscalls() bool { return true }

func (DirectCalls) Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, path, how) // uncounted: the core counts it when the load completes
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func (DirectCalls) Statx(dirfd int, path string, flags, mask int, st *unix.Statx_t) error {
	for {
		err := unix.Statx(dirfd, path, flags, mask, st) // uncounted: as Openat2
		if err != unix.EINTR {
			return err
		}
	}
}

func (DirectCalls) Pread(fd int, p []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, p, off) // uncounted: as Openat2
		if err != unix.EINTR {
			return n, err
		}
	}
}

func (DirectCalls) Close(fd int) error { return unix.Close(fd) } // uncounted: as Openat2
