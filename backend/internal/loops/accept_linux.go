package loops

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// Accepts is what a readiness loop (epoll, poll) does with accept4's
// errors, which it meets while taking every queued connection off a
// listener: a lost connection is logged at most once a second and the
// ones behind it are taken; running out of fds or memory, or too many
// errors in a row, pauses accepting (Lifecycle.Pause), logged once a
// spell. It belongs to its loop's thread.
type Accepts struct {
	Loop  int       // the loop's index, for the log
	Log   io.Writer // where the lines go
	logAt time.Time // errors are logged again from then on
	muted int       // errors not logged since the last line
	inRow int       // errors in a row in this pass
}

// AcceptStep is what the loop does after an accept4.
type AcceptStep uint8

const (
	Accepted    AcceptStep = iota // a connection: serve it, and accept again
	AcceptAgain                   // no connection, but the next may come: accept again
	AcceptDone                    // the queue is empty: the pass is over
	AcceptPause                   // accepting is paused: stop watching the listeners until Lifecycle.Resume
)

// maxAcceptErrors bounds the errors one accept pass takes in a row before
// it pauses accepting: an error that does not take a connection off the
// queue would otherwise spin the loop.
const maxAcceptErrors = 1024

// Step says what to do after an accept4 that returned errno, and logs
// what an operator should know; lc is paused when accepting must stop.
func (a *Accepts) Step(lc *Lifecycle, errno unix.Errno) AcceptStep {
	switch errno {
	case 0:
		a.inRow = 0
		return Accepted
	case unix.EAGAIN:
		a.inRow = 0
		return AcceptDone
	case unix.EINTR, unix.ECONNABORTED:
		return AcceptAgain
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
		// Out of fds or memory: the pending connection stays in the
		// backlog, and accepting it again at once would spin. Stop
		// accepting for a while, as nginx does for 500 ms.
		return a.pause(lc, errno, "raise the fd limit with ulimit -n, or lower --max-conns")
	}
	// EPROTO, EPERM from a firewall rule, ...: that connection is lost,
	// the ones behind it are not.
	a.failed(errno)
	if a.inRow++; a.inRow >= maxAcceptErrors {
		return a.pause(lc, errno, "check the firewall and the kernel log")
	}
	return AcceptAgain
}

// failed logs an accept error, at most once a second, with how many were
// not logged since.
func (a *Accepts) failed(errno unix.Errno) {
	now := time.Now()
	if now.Before(a.logAt) {
		a.muted++
		return
	}
	a.logAt = now.Add(time.Second)
	more := ""
	if a.muted > 0 {
		more = fmt.Sprintf(" (and %d more accept errors in the last second)", a.muted)
	}
	a.muted = 0
	fmt.Fprintf(a.Log, "twinloop: loop %d: accept4: %v; that connection is dropped, the next ones are accepted%s\n", a.Loop, errno, more)
}

// pause stops accepting for PauseFor; todo tells the operator what to
// look at.
func (a *Accepts) pause(lc *Lifecycle, errno unix.Errno, todo string) AcceptStep {
	a.inRow = 0
	if lc.Pause(time.Now()) {
		fmt.Fprintf(a.Log, "twinloop: loop %d: accept4: %v; not accepting for %v (%s)\n", a.Loop, errno, PauseFor, todo)
	}
	return AcceptPause
}
