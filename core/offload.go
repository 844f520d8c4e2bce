package core

import (
	"sync"
	"time"
)

// helpers is the Server's bounded pool of goroutines for work that may
// wait for the disk, as nginx's thread_pool (32 threads, max_queue 65536):
// a miss's opens and reads, a listing, a sendfile's read-ahead. A loop
// hands work to it with Offload and is told on its own thread when the
// work is done.
type helpers struct {
	mu      sync.Mutex
	cond    sync.Cond
	q       []offloaded // guarded by mu; a FIFO
	running int         // guarded by mu: helper goroutines started
	idle    int         // guarded by mu: of those, waiting for work
	busy    int         // guarded by mu: of those, running a work or posting its done
	closed  bool        // guarded by mu
	wg      sync.WaitGroup
	max     int // immutable: most goroutines
	maxQ    int // immutable: most queued, beyond which Offload refuses
}

type offloaded struct {
	l       *Loop
	c       *Conn
	work    func()
	done    func()
	discard func() // instead of done once the loop has closed; nil: nothing
}

// Default sizes, nginx's thread_pool defaults. Helpers stay once
// started: there are at most max of them.
const (
	defaultHelpers  = 32
	defaultHelpersQ = 65536
)

func (h *helpers) init(max, maxQ int) {
	h.cond.L = &h.mu
	h.max, h.maxQ = max, maxQ
}

// Offload runs work on a helper goroutine, then done on the loop's thread
// (through Post); c, when not nil, is then among the Conns RunPosted
// returns, for the backend to drive. It never blocks; it returns false
// when the queue is full or the server is closing, and then runs neither.
func (l *Loop) Offload(c *Conn, work, done func()) bool { return l.offload(c, work, done, nil) }

// offload is Offload, with discard run on the helper instead of done
// when the loop has closed by the time work is done.
func (l *Loop) offload(c *Conn, work, done, discard func()) bool {
	h := &l.srv.helpers
	h.mu.Lock()
	if h.closed || len(h.q) >= h.maxQ {
		h.mu.Unlock()
		return false
	}
	h.q = append(h.q, offloaded{l, c, work, done, discard})
	if h.idle > 0 {
		h.cond.Signal()
	}
	// A helper signalled stays in idle until it wakes, and takes one
	// work: with fewer idle than queued, this work would wait behind one
	// that may be stuck in a file system, though the pool has room.
	if h.idle < len(h.q) && h.running < h.max {
		h.running++
		h.wg.Add(1)
		go h.run()
	}
	h.mu.Unlock()
	return true
}

func (h *helpers) run() {
	defer h.wg.Done()
	h.mu.Lock()
	for {
		for len(h.q) == 0 && !h.closed {
			h.idle++
			h.cond.Wait()
			h.idle--
		}
		if len(h.q) == 0 {
			h.mu.Unlock()
			return
		}
		o := h.q[0]
		h.q[0] = offloaded{}
		h.q = h.q[1:]
		h.busy++
		h.mu.Unlock()
		o.work()
		l, c, done := o.l, o.c, o.done
		l.postOr(func() {
			done()
			if c != nil {
				l.markReady(c)
			}
		}, o.discard)
		h.mu.Lock()
		h.busy--
	}
}

// close ends the pool, once every loop has closed. What is still queued
// is dropped at once, its discard run: no loop is left to take its
// result, so running it would only make calls to throw their answers
// away. The works running are waited for until deadline, and no longer:
// one may be stuck in a file system that never answers (a hung NFS
// server, a paused FUSE daemon), and the server must exit anyway. Those
// are abandoned, not stopped: their goroutines stay, and when a work
// returns, its discard closes what it opened (postOr, the loop being
// closed). close returns how many it abandoned and how many it dropped;
// called again, it waits until deadline for those still running.
func (h *helpers) close(deadline time.Time) (abandoned, dropped int) {
	h.mu.Lock()
	h.closed = true
	q := h.q
	h.q = nil
	h.cond.Broadcast()
	h.mu.Unlock()
	for _, o := range q {
		if o.discard != nil {
			o.discard()
		}
	}
	if waitUntil(&h.wg, deadline) {
		return 0, len(q)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.busy, len(q)
}

// closeOff closes fd on a helper: an fd on a mount that is not local,
// whose close(2) may wait for the file system (FUSE's and NFS's FLUSH).
// Counted here, where it is handed off. With the helpers closed or full
// it goes to closeLater: the loop must not wait, and the fd must not
// leak.
func (l *Loop) closeOff(fd int) {
	l.sys().handOffClose()
	work := func() { closeOffLoop(fd) }
	if !l.offload(nil, work, func() {}, work) {
		l.srv.closeLater([]int{fd})
	}
}
