package main

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/internal/servertest"
)

// isolate moves the calling thread into a network namespace of its own,
// with its loopback up; a server it starts is in it too, and so is a
// socket it opens. The thread must be locked to its goroutine and stay so:
// it ends with the goroutine, its namespace with the last process in it.
//
// In a namespace of its own a server's counts are its requests' alone:
// the listeners' check at shutdown (listen.Shared) reads every socket in
// /proc/net/tcp, and on a shared machine their number changes from one
// run to the next, by more than the ten misses measured. Needs
// CAP_SYS_ADMIN.
func isolate() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return os.NewSyscallError("unshare", err)
	}
	return servertest.LoopbackUp()
}

// canIsolate says whether isolate works here, trying it on a thread of
// its own.
func canIsolate() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see isolate
		errc <- isolate()
	}()
	return <-errc
}
