package core

import (
	"sync/atomic"
	"time"
)

// ColdWindow is the server's record of the disk being in play: when a loop
// last met a part of a file body that was not in the page cache. It is
// shared by every loop of one Server (Server.Cold), and its rule is
// LoopMayRead: for ColdWindowLen after a cold part, a range that
// cachestat(2) counts as cached may still be under read (a helper's read,
// an io_uring READ, the kernel's read-ahead behind them: cachestat counts
// a page once it is in the cache, before the disk has filled it), or
// leave the cache between the probe and the call (reclaim, or a
// proactive pageout such as DAMON's, takes freshly read pages while
// others are read), and a sendfile(2) made on a loop's thread would wait
// for the disk there. So within the window no call on a loop's thread
// reads a file body: epoll's and poll's parts are read by helpers into
// buffers the loop then sends (loops.Bodies), and io_uring's splice on
// its workers or READ through the ring. Every cold part met starts the
// window again, so only a read still in flight this long after the last
// cold part is missed.
//
// The zero value is a window that has never opened. Its methods may be
// called from any loop.
type ColdWindow struct {
	at atomic.Int64 // Unix nanoseconds of the last cold part noted; 0 none
}

// ColdWindowLen is how long the window stays open after a cold part: on a
// throttled disk a read can take seconds.
const ColdWindowLen = 2 * time.Second

// Note records that a loop met a cold part at now. It stores only when the
// record is older than ColdWindowLen/16, so that loops meeting cold parts
// all the time do not keep writing one shared cache line.
func (w *ColdWindow) Note(now time.Time) {
	if t := now.UnixNano(); t-w.at.Load() > int64(ColdWindowLen/16) {
		w.at.Store(t)
	}
}

// Recent reports whether a cold part was noted within ColdWindowLen of now.
func (w *ColdWindow) Recent(now time.Time) bool {
	return now.UnixNano()-w.at.Load() < int64(ColdWindowLen)
}

// LoopMayRead reports whether a loop may make a call on its thread that
// reads a file body's pages found resident (a sendfile): not within the
// window.
func (w *ColdWindow) LoopMayRead(now time.Time) bool { return !w.Recent(now) }

// Reset closes the window, as if no cold part had been met.
func (w *ColdWindow) Reset() { w.at.Store(0) }
