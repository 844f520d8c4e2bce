package uring

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Stopping and tearing down: the wake read by which Stop and the core's
// posts interrupt a loop's wait, the shutdown it starts (beginStop), and
// Teardown, which waits for every request's last CQE before it unmaps
// what the kernel may still write.

// woken handles the wake read's completion: the shutdown, and what CGI
// goroutines posted. The read is re-armed first, so that a Post after
// RunPosted has taken the queue wakes the loop again.
func (l *loop) woken(res int32) {
	l.wake.armed = false
	if res == -int32(unix.ECANCELED) || l.wake.off {
		return
	}
	l.armWake()
	l.beginStop()
	for _, c := range l.core.RunPosted() {
		if cn := l.conns[c.Handle]; cn.life != lifeFree && cn.c == c {
			l.drive(cn)
		}
	}
}

// wakeRead is the loop's read of its Waker's eventfd, by which other
// goroutines interrupt its wait (Stop, core.Loop.Post).
type wakeRead struct {
	fd    int    // the eventfd, -1 none
	buf   []byte // mmap'd; buf[:8] receives the eventfd's counter
	armed bool   // the read is in flight
	off   bool   // teardown: the read is cancelled, not re-armed
}

func (l *loop) armWake() {
	e := l.sqe()
	e.PrepareRead(l.wake.fd, addrOf(l.wake.buf[:8]), 8, 0) // io_uring_prep_read(3)
	l.queue(e, opWake, nil)
	l.wake.armed = true
}

// cancelLoopOp cancels the request with user_data ud (io_uring_prep_cancel64(3)).
func (l *loop) cancelLoopOp(ud uint64) {
	e := l.sqe()
	e.PrepareCancel64(ud, 0)
	l.queue(e, opCancelLoop, nil)
}

// beginStop starts the shutdown once Stop asked for it: no more accepts,
// idle connections closed, the others get until the deadline to finish
// what they are sending.
func (l *loop) beginStop() {
	if !l.BeginStop(l.core, l.srv.Config.ShutdownTimeout) {
		return
	}
	l.stopAccepting()
	for _, cn := range l.conns {
		if cn.life == lifeOpen && cn.chain == 0 && cn.c.Idle() {
			l.close(cn)
		}
	}
}

// Teardown ends every request, waits for the last CQE, then closes and
// unmaps everything the loop opened (loops.Loop). The locked goroutine
// returns only once the kernel is done with the loop's memory.
func (l *loop) Teardown() {
	drained := l.ring == nil
	if l.ring != nil && l.err == nil {
		l.StopNow()
		l.stopAccepting()
		l.wake.off = true
		if l.wake.armed {
			l.cancelLoopOp(pack(opWake, 0, 0))
		}
		if l.files != nil {
			l.files.shutdown(true)
		}
		for _, cn := range l.conns {
			if cn.life != lifeFree {
				l.close(cn)
			}
		}
		drained = l.drain()
	} else if l.files != nil {
		l.files.shutdown(false)
	}
	for i := range l.listeners {
		if ln := &l.listeners[i]; !ln.closed {
			l.closeListener(ln)
		}
	}
	l.dropAccepted()
	for _, cn := range l.conns {
		if cn.life != lifeFree {
			// Only when the ring failed: close the fd, and leave the
			// Conn alone, since a send may still read its memory.
			cn.vec.pins.release()
			switch {
			case cn.life == lifeClosed:
			default:
				l.sock.closeLeft(l, cn)
			}
			cn.life = lifeFree
		}
	}
	if l.core != nil {
		l.core.Close()
	}
	l.Waker.Close()
	l.wake.fd = -1
	if l.ring != nil {
		l.ring.exit() // uncounted: teardown, after core.Close published the counts
	}
	if !drained {
		// Requests may still be running in the kernel, which would write
		// into these buffers: leave them mapped. After a failure of the
		// ring, the process is ending anyway and its one line said why.
		if l.err == nil {
			fmt.Fprintf(os.Stderr, "twinloop: loop %d: %d io_uring requests did not complete; their buffers stay mapped\n", l.id, l.inflight)
		}
		if l.files != nil {
			l.files.abandon()
		}
		return
	}
	if l.bufs != nil {
		l.bufs.unmap()
	}
	l.bodies.close()
	l.zc.close()
	if l.files != nil {
		l.files.unmap()
	}
	l.stdoutBufs.close(l.sys)
	if l.wake.buf != nil {
		unix.Munmap(l.wake.buf) // uncounted: as its mmap in Setup
	}
}

// drain reaps until every request has completed, or until the server's
// exit deadline: a read or an open on a file system that never answers
// (a hung NFS server, a paused FUSE daemon) may never complete, and the
// whole shutdown must end within the shutdown timeout plus
// core.ShutdownGrace, this wait included.
func (l *loop) drain() bool {
	limit := l.srv.ExitDeadline()
	for l.err == nil {
		l.reap()
		// Teardown admits no more: a socket its cancelled accepts took
		// is closed.
		l.dropAccepted()
		if l.inflight == 0 {
			return true
		}
		if time.Now().After(limit) {
			return false
		}
		if drainWaits != nil {
			drainWaits(l.stats.Own[ownZCPending])
		}
		l.enterAndWait()
	}
	return false
}

// drainWaits, when set (tests), is told before each wait of drain how
// many zero-copy notifications are still to come: that Teardown waits
// for them, which a test can see without guessing how long it takes.
var drainWaits func(zcPending int64)
