package core

import "sync"

// mailbox carries work from other goroutines to a loop's thread: a CGI
// script's goroutine posts "the body chunk is written" or "the script
// exited", and the loop runs it between two waits. It is the only state
// of a Loop that other goroutines touch.
type mailbox struct {
	mu      sync.Mutex
	q       []func() // guarded by mu
	pending bool     // guarded by mu: q is non-empty and the loop was woken for it
	closed  bool     // guarded by mu: the loop has closed; nothing posted runs
	wake    func()   // set by SetWaker before the loop serves; immutable after
}

// SetWaker registers wake, which interrupts the loop's wait from any
// goroutine (epoll: a write to its eventfd). The backend calls it once,
// before serving; after each wake-up it calls RunPosted on the loop's thread.
func (l *Loop) SetWaker(wake func()) { l.box.wake = wake }

// Post queues f to run on the loop's thread, and wakes the loop unless a
// wake-up is already on its way. It never blocks, and may be called from
// any goroutine, also after the loop has stopped (f then never runs).
func (l *Loop) Post(f func()) { l.postOr(f, nil) }

// postOr is Post, but runs orElse (when not nil) on the calling goroutine
// instead of f once the loop has closed.
func (l *Loop) postOr(f, orElse func()) {
	m := &l.box
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		if orElse != nil {
			orElse()
		}
		return
	}
	m.q = append(m.q, f)
	wake := !m.pending
	m.pending = true
	m.mu.Unlock()
	if wake && m.wake != nil {
		m.wake()
	}
}

// RunPosted runs, on the loop's thread, everything posted since the last
// call, and returns the connections whose state it changed: the backend
// drives each of them (finding its own state by Conn.Handle). The slice is
// the loop's, valid until the next call.
func (l *Loop) RunPosted() []*Conn {
	m := &l.box
	m.mu.Lock()
	q := m.q
	m.q, m.pending = l.spareQ[:0], false
	m.mu.Unlock()
	l.ready = l.ready[:0]
	for i, f := range q {
		f()
		q[i] = nil
	}
	l.spareQ = q
	for _, c := range l.ready {
		c.readyQueued = false
	}
	return l.ready
}

// markReady records that c must be driven after RunPosted.
func (l *Loop) markReady(c *Conn) {
	if !c.readyQueued {
		c.readyQueued = true
		l.ready = append(l.ready, c)
	}
}

// close marks the mailbox closed and returns what was posted and not run.
func (m *mailbox) close() []func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.q
	m.q, m.closed = nil, true
	return q
}
