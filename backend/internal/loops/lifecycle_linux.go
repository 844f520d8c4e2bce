package loops

import (
	"sync/atomic"
	"time"

	"github.com/twinloop/twinloop/core"
)

// Lifecycle is what both loops keep alike of their own state, beside their
// connections: the shutdown that Serve asks for from its goroutine (Stop)
// and the loop starts on its thread at its next wake-up (BeginStop), and
// accepting turned off for a while after the process ran out of fds or
// memory (Pause, Resume). A loop embeds it, and so has its Stop
// (Loop.Stop). Stop and the Waker may be used from any goroutine; the
// rest is owned by the loop's thread.
//
// Stopping and a pause are independent: a loop may be paused when its
// shutdown starts, and then stays so; only Accepting combines them.
type Lifecycle struct {
	stopping    bool
	deadline    time.Time // stopping: in-flight responses get until then
	paused      bool      // accepting is off until pausedUntil
	pausedUntil time.Time

	stopReq atomic.Bool // Stop was called: the next wake-up starts the shutdown
	// Waker interrupts the loop's wait: for Stop, and for core.Loop.Post
	// once the loop has given it its Wake (core.Loop.SetWaker).
	Waker Waker
}

// PauseFor is how long accepting stays off after accept failed for want of
// fds or memory (or in a way the loop does not know), as nginx does: the
// pending connection stays in the backlog, and accepting it again at once
// would spin.
const PauseFor = 500 * time.Millisecond

// Stop asks the loop to start its shutdown (Loop.Stop): it wakes the loop,
// whose wake-up calls BeginStop. Any goroutine may call it, more than once.
func (lc *Lifecycle) Stop() {
	lc.stopReq.Store(true)
	lc.Waker.Wake()
}

// BeginStop starts the shutdown once Stop has asked for it, and reports
// whether it started it now: the responses in flight get timeout from now,
// and c answers no more requests on a kept-alive connection
// (core.Loop.Drain). The loop then stops accepting and closes its idle
// connections. Before Stop, or once started, it does nothing and reports
// false; it reads the clock only when it starts the shutdown, so that a
// wake-up for posted work costs no time.Now.
func (lc *Lifecycle) BeginStop(c *core.Loop, timeout time.Duration) bool {
	if lc.stopping || !lc.stopReq.Load() {
		return false // inlined: every wake-up asks
	}
	lc.beginStop(c, timeout)
	return true
}

func (lc *Lifecycle) beginStop(c *core.Loop, timeout time.Duration) {
	lc.stopping = true
	lc.deadline = time.Now().Add(timeout)
	c.Drain()
}

// StopNow makes the loop stopping without a deadline and without draining
// the core: for a Teardown that ends every request itself, after Run or
// after a failed Setup.
func (lc *Lifecycle) StopNow() { lc.stopping = true }

// Stopping reports whether the shutdown has started.
func (lc *Lifecycle) Stopping() bool { return lc.stopping }

// Deadline is when the loop stops even with responses in flight; it is
// set once Stopping (by BeginStop).
func (lc *Lifecycle) Deadline() time.Time { return lc.deadline }

// Paused reports whether accepting is off for a while (Pause).
func (lc *Lifecycle) Paused() bool { return lc.paused }

// Accepting reports whether the loop takes new connections: neither
// paused nor stopping.
func (lc *Lifecycle) Accepting() bool { return !lc.paused && !lc.stopping }

// Pause turns accepting off for PauseFor from now, or for PauseFor again
// if it is off already, and reports whether it was on: the loop logs the
// first failure of a spell, not each one.
func (lc *Lifecycle) Pause(now time.Time) (first bool) {
	first = !lc.paused
	lc.paused = true
	lc.pausedUntil = now.Add(PauseFor)
	return first
}

// Resume turns accepting back on once the pause is over at now, and
// reports whether it did: the loop then re-arms its listeners.
func (lc *Lifecycle) Resume(now time.Time) bool {
	if !lc.paused || now.Before(lc.pausedUntil) {
		return false
	}
	lc.paused = false
	return true
}

// Timeout is how long the loop's wait may sleep from now: until the next
// second, when timeouts are checked and the Date line changes (core.Loop.
// Tick), or until a pause ends, if that is sooner (it may have passed:
// then the result is not positive).
func (lc *Lifecycle) Timeout(now time.Time) time.Duration {
	d := time.Second - time.Duration(now.Nanosecond())
	if lc.paused {
		d = min(d, lc.pausedUntil.Sub(now))
	}
	return d
}
