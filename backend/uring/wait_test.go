//go:build linux

package uring

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestYieldRunsWaiting: with one P, a goroutine made runnable by the loop
// (as a CGI script's is) runs in yield, before the raw wait that would
// otherwise keep the P from it.
func TestYieldRunsWaiting(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.LockOSThread() // as a loop is
	defer runtime.UnlockOSThread()
	l := &loop{}
	l.yield() // the first yields anyway: yieldEvery since the zero time
	var ran atomic.Bool
	go ran.Store(true)
	// Each call sees the goroutine runnable and hands the P on. The
	// scheduler may run another goroutine first (the race detector's, a GC
	// worker: make test failed once so), so up to three calls are allowed;
	// a yield that found nothing waiting would not count.
	calls := 0
	for calls < 3 && !ran.Load() {
		l.yield()
		calls++
	}
	assert.True(t, ran.Load(), "the runnable goroutine did not run in %d yields", calls)
	assert.EqualValues(t, 1+calls, l.yielder.n, "every call found it waiting and yielded")
}
