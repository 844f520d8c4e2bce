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
	l.yield()
	assert.True(t, ran.Load(), "the runnable goroutine did not run in yield")
	assert.EqualValues(t, 2, l.yielder.n)
}
