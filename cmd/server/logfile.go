package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// logFile is a log the server opened by its path (--access-log,
// --error-log), which reopen opens again, as nginx -s reopen does: after
// logrotate renamed it, the next line goes to a new file at the path,
// and the renamed one is closed. Its writes come from the log's one
// writer goroutine (core's logWriter, errorLog); reopen from the signal's.
type logFile struct {
	path string
	f    atomic.Pointer[os.File]
}

// openLogFile opens path for appending, creating it (0644) if need be.
func openLogFile(path string) (*logFile, error) {
	lf := &logFile{path: path}
	f, err := lf.open()
	if err != nil {
		return nil, err
	}
	lf.f.Store(f)
	return lf, nil
}

func (lf *logFile) open() (*os.File, error) {
	return os.OpenFile(lf.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}

// Write writes p to the file open now. A write that meets the file
// reopen has just closed is made again on the new one.
func (lf *logFile) Write(p []byte) (int, error) {
	n, err := lf.f.Load().Write(p)
	if errors.Is(err, os.ErrClosed) && n == 0 {
		return lf.f.Load().Write(p)
	}
	return n, err
}

// reopen opens the path again and writes to the new file from now on;
// the old one is closed once a write in flight on it is done (os.File
// holds its fd until then). When the path cannot be opened, the old file
// stays in use and the error says why.
func (lf *logFile) reopen() error {
	f, err := lf.open()
	if err != nil {
		return err
	}
	lf.f.Swap(f).Close()
	return nil
}

// Close closes the file open now.
func (lf *logFile) Close() error { return lf.f.Load().Close() }

// reopenOnSignal reopens files at every SIGUSR1, saying on stderr what
// failed, until the returned func is called. SIGUSR1 is caught even with
// no file to reopen, so that a logrotate postrotate that sends it to a
// server logging to stdout does not kill it (its default action).
func reopenOnSignal(files []*logFile, stderr io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				reopenAll(files, stderr)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}

// reopenAll reopens each file (SIGUSR1).
func reopenAll(files []*logFile, stderr io.Writer) {
	for _, lf := range files {
		if err := lf.reopen(); err != nil {
			fmt.Fprintf(stderr, "server: SIGUSR1: %v; still writing to the file open before\n", err)
		}
	}
}
