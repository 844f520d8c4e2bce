package loops

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Waker is the eventfd that other goroutines write to interrupt a loop's
// wait: Serve's shutdown, core.Loop.Post. The loop opens it in Setup and
// closes it in Teardown, while any goroutine may be waking it; mu guards
// the fd against that.
type Waker struct {
	mu   sync.Mutex
	fd   int  // guarded by mu
	open bool // guarded by mu
}

// Open makes the eventfd, close-on-exec, with flags added (EFD_NONBLOCK
// for epoll; none for io_uring, which polls it), and returns it.
func (w *Waker) Open(flags int) (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|flags) // uncounted: setup
	if err != nil {
		return -1, os.NewSyscallError("eventfd", err)
	}
	w.mu.Lock()
	w.fd, w.open = fd, true
	w.mu.Unlock()
	return fd, nil
}

// Wake adds one to the eventfd's counter, which makes it readable. It
// never blocks (the counter would have to reach 2⁶⁴-1), and does nothing
// before Open or after Close.
func (w *Waker) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open {
		one := [8]byte{1}
		unix.Write(w.fd, one[:]) // uncounted: made by the goroutine that wakes the loop
	}
}

// Close closes the eventfd, if open.
func (w *Waker) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open {
		unix.Close(w.fd) // uncounted: teardown, after core.Close
		w.open = false
	}
}
