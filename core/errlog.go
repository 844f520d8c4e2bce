package core

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// The error log: a file-system call that fails for a reason the client
// cannot be told more of (EIO, a FUSE or NFS mount that is gone, a file
// that shrank while it was read) is written to Config.ErrorLog (stderr)
// with the path and the error, as nginx's error_log writes `open() "..."
// failed (5: Input/output error)`: the status alone tells an operator
// nothing. A failing disk fails every request, so the log keeps to one
// line a second per Server and says how many it left out. It never blocks
// a loop: the write is made on a goroutine of its own, since stderr may
// be a pipe nobody reads.

// errLogEvery is the least time between two lines of the error log.
const errLogEvery = time.Second

// errorLog is a Server's error log; its zero value writes to stderr.
type errorLog struct {
	w       io.Writer
	mu      sync.Mutex
	last    time.Time
	dropped int
}

// fsError logs that the load of path failed with err and was answered
// status. It may be called from any goroutine; a nil log does nothing.
func (e *errorLog) fsError(path string, err error, status int) {
	if e == nil {
		return
	}
	now := time.Now()
	e.mu.Lock()
	if !e.last.IsZero() && now.Sub(e.last) < errLogEvery {
		e.dropped++
		e.mu.Unlock()
		return
	}
	dropped := e.dropped
	e.last, e.dropped = now, 0
	e.mu.Unlock()
	msg := fmt.Sprintf("twinloop: %q: %v: answered %d", "/"+path, err, status)
	if dropped > 0 {
		msg += fmt.Sprintf(" (and %d such errors in the second before, not logged)", dropped)
	}
	w := e.w
	if w == nil {
		w = os.Stderr
	}
	go fmt.Fprintln(w, msg)
}
