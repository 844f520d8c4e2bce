//go:build sendfile_raw

package epoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendfile as a raw call, unknown to the runtime: the comparison build of
// scripts/cold-sendfile.sh (see sendfile_linux.go).
func sendfile(out, in int, off *int64, n int) (int, unix.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDFILE, uintptr(out), uintptr(in), uintptr(unsafe.Pointer(off)), uintptr(n), 0, 0)
	return int(r), e
}
