package core

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMailbox: posts from many goroutines all run, on the caller of
// RunPosted, each goroutine's in order, and a burst costs few wake-ups.
func TestMailbox(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	var wakes atomic.Int32
	l.SetWaker(func() { wakes.Add(1) })
	const goroutines, each = 8, 1000
	last := make([]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= each; i++ {
				l.Post(func() {
					assert.Equal(t, last[g]+1, i, "goroutine %d out of order", g)
					last[g] = i
				})
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		assert.Empty(t, l.RunPosted())
	}
	l.RunPosted()
	for g := range goroutines {
		assert.Equal(t, each, last[g])
	}
	assert.LessOrEqual(t, int(wakes.Load()), goroutines*each)
	assert.Positive(t, int(wakes.Load()))
	l.Post(func() {})
	n := wakes.Load()
	l.Post(func() {})
	assert.Equal(t, n, wakes.Load(), "no second wake-up while one is pending")
}
