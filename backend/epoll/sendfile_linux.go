//go:build !sendfile_raw

package epoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendfile goes through the runtime (Syscall, not RawSyscall): on a file
// not in the page cache it blocks on the disk, and a thread blocked in a
// raw call holds its P, so a GC stop-the-world waits for the disk and
// stalls every loop meanwhile. The build tag sendfile_raw makes it raw
// again, for scripts/cold-sendfile.sh to compare.
func sendfile(out, in int, off *int64, n int) (int, unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SENDFILE, uintptr(out), uintptr(in), uintptr(unsafe.Pointer(off)), uintptr(n), 0, 0)
	return int(r), e
}
