package core

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// syncWriter is an error log a test reads while the writer goroutine
// writes it.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// stuckWriter never returns from a write until released: stderr as a pipe
// nobody reads.
type stuckWriter struct{ release chan struct{} }

func (w stuckWriter) Write(p []byte) (int, error) { <-w.release; return len(p), nil }

// TestErrorLogNeverBlocks: with a writer that never returns, the log keeps
// at most errLogQueue lines and one writer, drops the rest and counts them,
// and the caller never waits.
func TestErrorLogNeverBlocks(t *testing.T) {
	w := stuckWriter{make(chan struct{})}
	defer close(w.release)
	e := &errorLog{w: w}
	require.True(t, e.put("first\n"))
	require.Eventually(t, func() bool { return len(e.lines) == 0 }, 5*time.Second, time.Millisecond, "the writer holds the first line")
	for i := range errLogQueue + 10 {
		e.last = e.last.Add(-errLogEvery) // as if a second had passed each time
		e.fsError("a.txt", unix.EIO, 500)
		require.LessOrEqual(t, len(e.lines), errLogQueue, "line %d", i)
	}
	assert.Equal(t, errLogQueue, len(e.lines))
	assert.Equal(t, 10, e.dropped, "what found the queue full is counted, not queued")
	assert.False(t, e.put("x\n"), "a full queue refuses at once")
}
