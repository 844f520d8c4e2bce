// Package loops is what the backends' event loops share, whatever they
// wait in (core.Backend): Serve runs one goroutine per loop, locked to its
// OS thread, and stops them; Lifecycle is a loop's shutdown and accept
// pauses; Waker is the eventfd other goroutines write to interrupt a
// loop's wait; Sys makes a loop's system calls and counts each one, Addrs
// among them (an accepted connection's ends).
package loops

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Loop is one event loop of a backend.
//
// Setup runs on the loop's locked thread and makes what belongs to it (an
// epoll fd, a ring). Run serves until the loop has shut down, and returns
// nil, or until it failed (its epoll_wait or its ring), and returns why.
// Teardown, on the same thread, closes whatever Setup and Run opened; it
// runs after Run, or after Setup failed. Stop may be called from any
// goroutine, more than once: it makes the loop start its shutdown.
type Loop interface {
	Setup() error
	Run() error
	Teardown()
	Stop()
}

// Fault, when set before Serve, is asked by every loop once per pass, on
// the loop's thread, right after its wait (epoll_wait, io_uring_enter): a
// non-zero errno is taken as that call's error, which stops the loop. It
// lets tests fail a loop the way the kernel would; it is nil otherwise.
var Fault func(loop int) unix.Errno

// WaitErrno is what loop takes as its wait's errno: errno, or the one
// Fault injects instead.
func WaitErrno(loop int, errno unix.Errno) unix.Errno {
	if Fault != nil {
		if e := Fault(loop); e != 0 {
			return e
		}
	}
	return errno
}

// NextGen is the generation after gen, within mask and never 0. A loop
// stamps each new connection with one, and each event or completion with
// its connection's, so that one left from a slot's previous connection is
// told apart and dropped; generation 0 marks the loop's own (listeners,
// the wake-up).
func NextGen(gen, mask uint32) uint32 {
	if gen = (gen + 1) & mask; gen == 0 {
		gen = 1
	}
	return gen
}

// Failed is Serve's error when a loop died while serving.
type Failed struct {
	Loop int
	Err  error
}

func (e *Failed) Error() string { return fmt.Sprintf("loop %d failed: %v", e.Loop, e.Err) }
func (e *Failed) Unwrap() error { return e.Err }

// Serve runs each loop on its own goroutine until ctx is cancelled, then
// stops them and returns once every one has returned. When a loop cannot
// be set up it stops the others and returns the first such error. When a
// loop fails while serving, Serve fails fast: it stops the others (their
// responses in flight finish, as on cancel) and returns a *Failed naming
// the first loop that failed, so that the process exits non-zero and a
// supervisor restarts it, rather than serving on with fewer loops.
func Serve(ctx context.Context, loops []Loop) error {
	started := make(chan error, len(loops))
	failed := make(chan *Failed, len(loops))
	var wg sync.WaitGroup
	for i, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			// The thread stays locked: it ends with the goroutine, so no
			// other goroutine inherits its epoll fd, or a thread a ring is
			// bound to (IORING_SETUP_SINGLE_ISSUER).
			defer l.Teardown()
			if err := l.Setup(); err != nil {
				started <- err
				return
			}
			started <- nil
			if err := l.Run(); err != nil {
				failed <- &Failed{Loop: i, Err: err}
			}
		}()
	}
	var err error
	for range loops {
		if e := <-started; e != nil && err == nil {
			err = e
		}
	}
	stop := func() {
		for _, l := range loops {
			l.Stop()
		}
	}
	if err != nil {
		stop()
		wg.Wait()
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-ctx.Done():
		stop()
		<-done
	case f := <-failed:
		stop()
		<-done
		return f
	case <-done:
	}
	select {
	case f := <-failed: // a loop failed while the others shut down
		return f
	default:
		return nil
	}
}
