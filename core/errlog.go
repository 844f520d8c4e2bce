package core

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// The error log: a file-system call that fails for a reason the client
// cannot be told more of (EIO, a FUSE or NFS mount that is gone) is
// written to Config.ErrorLog (stderr) with the path and the error, as
// nginx's error_log writes `open() "..." failed (5: Input/output error)`:
// the status alone tells an operator nothing. So is an --error-page that
// cannot be served (errorpage.go). A failing disk fails every request, so
// the file-system lines keep to one a second per Server and say how many
// were left out. Nothing here blocks a loop or grows without bound: one
// goroutine per Server writes the lines, from a queue of errLogQueue; a
// line that finds the queue full (stderr is a pipe nobody reads) is
// dropped and counted with the others left out.

// errLogEvery is the least time between two file-system lines.
const errLogEvery = time.Second

// errLogQueue is how many lines may wait for the writer.
const errLogQueue = 16

// errorLog is a Server's error log; its zero value writes to stderr.
type errorLog struct {
	w     io.Writer
	start sync.Once
	lines chan string

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
	defer e.mu.Unlock()
	if !e.last.IsZero() && now.Sub(e.last) < errLogEvery {
		e.dropped++
		return
	}
	msg := fmt.Sprintf("twinloop: %q: %v: answered %d", "/"+path, err, status)
	if e.dropped > 0 {
		msg += fmt.Sprintf(" (and %d such errors in the second before, not logged)", e.dropped)
	}
	if e.put(msg + "\n") {
		e.last, e.dropped = now, 0
	} else {
		e.dropped++
	}
}

// put queues one line for the writer, which it starts on first use; false
// when the queue is full.
func (e *errorLog) put(line string) bool {
	e.start.Do(func() {
		e.lines = make(chan string, errLogQueue)
		w := e.w
		if w == nil {
			w = os.Stderr
		}
		go func() {
			for l := range e.lines {
				io.WriteString(w, l)
			}
		}()
	})
	select {
	case e.lines <- line:
		return true
	default:
		return false
	}
}
