package loops

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fake is a Loop whose Run waits for Stop.
type fake struct {
	setupErr error
	runErr   error // Run returns it at once
	stop     chan struct{}
	stopped  atomic.Bool
	ran      atomic.Bool
	torn     atomic.Int32
}

func newFake(setupErr error) *fake { return &fake{setupErr: setupErr, stop: make(chan struct{})} }

func (f *fake) Setup() error { return f.setupErr }
func (f *fake) Run() error {
	f.ran.Store(true)
	if f.runErr != nil {
		return f.runErr
	}
	<-f.stop
	return nil
}
func (f *fake) Teardown() { f.torn.Add(1) }
func (f *fake) Stop() {
	if !f.stopped.Swap(true) {
		close(f.stop)
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	fs := []*fake{newFake(nil), newFake(nil), newFake(nil)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, []Loop{fs[0], fs[1], fs[2]}) }()
	require.Eventually(t, func() bool { return fs[0].ran.Load() && fs[1].ran.Load() && fs[2].ran.Load() }, 5*time.Second, time.Millisecond)
	select {
	case <-done:
		t.Fatal("Serve returned before ctx was cancelled")
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	require.NoError(t, <-done)
	for i, f := range fs {
		assert.True(t, f.stopped.Load(), i)
		assert.Equal(t, int32(1), f.torn.Load(), "loop %d torn down once", i)
	}
}

func TestServeReportsSetupError(t *testing.T) {
	bad := errors.New("no ring here")
	fs := []*fake{newFake(nil), newFake(bad), newFake(nil)}
	err := Serve(context.Background(), []Loop{fs[0], fs[1], fs[2]})
	require.ErrorIs(t, err, bad)
	for i, f := range fs {
		assert.True(t, f.stopped.Load(), "loop %d stopped", i)
		assert.Equal(t, int32(1), f.torn.Load(), "loop %d torn down once, also after a failed Setup", i)
	}
	assert.False(t, fs[1].ran.Load(), "a loop that failed Setup does not run")
}

func TestServeReturnsWhenLoopsEnd(t *testing.T) {
	f := newFake(nil)
	f.Stop() // Run returns at once, as a loop whose ring failed does
	require.NoError(t, Serve(context.Background(), []Loop{f}))
	assert.Equal(t, int32(1), f.torn.Load())
}

func TestServeFailsFastWhenALoopDies(t *testing.T) {
	died := errors.New("epoll_wait: bad file descriptor")
	fs := []*fake{newFake(nil), newFake(nil), newFake(nil)}
	fs[1].runErr = died
	err := Serve(context.Background(), []Loop{fs[0], fs[1], fs[2]})
	require.ErrorIs(t, err, died)
	var f *Failed
	require.ErrorAs(t, err, &f)
	assert.Equal(t, 1, f.Loop)
	assert.Equal(t, "loop 1 failed: epoll_wait: bad file descriptor", err.Error())
	for i, f := range fs {
		assert.True(t, f.stopped.Load(), "loop %d stopped", i)
		assert.Equal(t, int32(1), f.torn.Load(), "loop %d torn down once", i)
	}
}

func TestWaker(t *testing.T) {
	var w Waker
	w.Wake() // before Open: nothing
	fd, err := w.Open(unix.EFD_NONBLOCK)
	require.NoError(t, err)
	w.Wake()
	w.Wake()
	var b [8]byte
	n, err := unix.Read(fd, b[:])
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	assert.Equal(t, [8]byte{2}, b, "the counter: two wake-ups")
	w.Close()
	w.Close()
	w.Wake() // after Close: nothing, and no write to a reused fd number
}

func TestWaitErrno(t *testing.T) {
	assert.Equal(t, unix.EINTR, WaitErrno(0, unix.EINTR), "no Fault: the wait's own")
	Fault = func(loop int) unix.Errno {
		if loop == 1 {
			return unix.EBADF
		}
		return 0
	}
	defer func() { Fault = nil }()
	assert.Equal(t, unix.EBADF, WaitErrno(1, 0), "injected")
	assert.Equal(t, unix.Errno(0), WaitErrno(0, 0), "another loop's wait is left alone")
	assert.Equal(t, unix.EINTR, WaitErrno(0, unix.EINTR))
}

func TestNextGen(t *testing.T) {
	const mask = 1<<24 - 1
	assert.Equal(t, uint32(1), NextGen(0, mask))
	assert.Equal(t, uint32(8), NextGen(7, mask))
	assert.Equal(t, uint32(1), NextGen(mask, mask), "wraps past 0, which marks the loop's own")
	assert.Equal(t, uint32(1), NextGen(1<<31-1, 1<<31-1))
}
