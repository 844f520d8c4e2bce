// Package loops is what the backends' event loops share, whatever they
// wait in (core.Backend): Serve runs one goroutine per loop, locked to its
// OS thread, and stops them; Waker is the eventfd other goroutines write
// to interrupt a loop's wait; Addrs names an accepted connection's ends.
package loops

import (
	"context"
	"runtime"
	"sync"
)

// Loop is one event loop of a backend.
//
// Setup runs on the loop's locked thread and makes what belongs to it (an
// epoll fd, a ring). Run serves until the loop has shut down, or failed.
// Teardown, on the same thread, closes whatever Setup and Run opened; it
// runs after Run, or after Setup failed. Stop may be called from any
// goroutine, more than once: it makes the loop start its shutdown.
type Loop interface {
	Setup() error
	Run()
	Teardown()
	Stop()
}

// Serve runs each loop on its own goroutine until ctx is cancelled, then
// stops them and returns once every one has returned. When a loop cannot
// be set up it stops the others and returns the first such error.
func Serve(ctx context.Context, loops []Loop) error {
	started := make(chan error, len(loops))
	var wg sync.WaitGroup
	for _, l := range loops {
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
			l.Run()
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
	case <-done:
	}
	return nil
}
