package loops

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// Bodies sends file bodies for a readiness loop (epoll, poll) by
// sendfile, and keeps the loop off the disk while it does.
//
// A sendfile of a range that is not in the page cache waits for the disk,
// and with it every connection of the loop (results/cold-sendfile
// measured how often, and for how long). So before each sendfile chunk
// the loop asks whether the chunk's range is resident, with one syscall,
// and when it is not, a helper (core.Loop.Offload) reads the part into a
// buffer of the connection's (Chunk) while the connection waits and the
// loop serves the others; then the loop sends the buffer.
//
// The probe is cachestat(2) (Linux 6.5): it answers for the whole range,
// where a RWF_NOWAIT read or a mincore tells about one page, and needs no
// mapping of the file. It counts the pages present in the page cache,
// also those a read has put there and not yet filled, and a sendfile that
// meets one waits for the disk; and a page it counted may leave the cache
// before the sendfile comes (the kernel's reclaim, or a proactive pageout
// such as DAMON's, which takes freshly read pages out with the cold ones
// around them: results/2026-12-02_cfef9af_cold). Both happen when the
// disk is in play, so the probe is trusted only outside the server's cold
// window (core.ColdWindow.LoopMayRead): within it no call on the loop
// reads a file, and every part of a body goes by a helper's buffer, as
// io_uring's go by its workers or its ring. What a helper read into the
// buffer is the loop's: no eviction takes it back. The buffers of all
// loops are bounded (BuffersMax); past the bound a part goes by sendfile
// again, read into the page cache by a helper first when it is cold, and
// probed before the call, so that clients that drain slowly, or not at
// all, cannot hold a buffer each. Where cachestat is
// missing (ENOSYS, or EPERM from seccomp), the probe is a RWF_NOWAIT read
// of the chunk's last byte: a sequential read-ahead fills a range from
// its start, so the last page resident says the rest is.
//
// The helper sets POSIX_FADV_RANDOM on a local file before it reads:
// the kernel then reads what a read asks for, no more, and a page is
// present only once a read asked for it, so that a probe after the
// window finds no read-ahead of the kernel's still under way.
//
// While the helper reads the connection sends nothing (WriteFile says
// Waiting); when it is done the loop drives the connection again (the
// core returns it from RunPosted), which sends the buffer, so a
// writability event that came meanwhile is not needed. Its write timeout
// does not run meanwhile: the read is a wait for the file system
// (core.Conn.BodyWait), held to --fs-timeout by core.Conn.CheckTimeout,
// after which the loop closes the connection (its header is out). A
// connection closed meanwhile (that bound, a reset from
// the peer, the shutdown) is recognised in done by Body.Drop; the file is
// held (core.Loop.HoldFile) until done, so the helper never reads a
// closed or reused fd.
//
// A file on a mount that is not local (core.File.Local: FUSE, NFS) is
// never sent by sendfile: a page it lacks would be read from a daemon or
// a server that may never answer, on the loop, and a read ahead does not
// keep it (FUSE drops a file's pages when another open asks to, and a
// direct_io file has none). Every part of it goes by a helper's buffer:
// no call on the loop reads such a file. When no helper can take the
// read the connection is closed, not served inline; a local file's part
// is then sent inline by sendfile (counted in OwnReadaheadsInline).
//
// Bodies belongs to its loop's thread; it counts its helpers' reads in the
// loop's Stats.Own at OwnReadaheads and OwnReadaheadsInline, which a
// backend that uses it keeps as its own counters.
type Bodies struct {
	srv      *core.Server
	core     *core.Loop
	stats    *core.Stats
	sys      Sys
	res      Residency
	probe    probe
	probeBuf [1]byte // probeNowait's byte
	pending  int     // read-aheads on the helpers whose done has not run
}

// The read-ahead counters' indexes into core.Stats.Own.
const (
	OwnReadaheads       = iota // parts a helper read into a buffer for the loop to send
	OwnReadaheadsInline        // parts of local files sent inline, blocking on the disk: the helpers' queue was full
)

// SendfileChunk bounds one sendfile call. It does not make a loop fair: an
// edge-triggered loop goes on until the socket is full, which on a fast
// loopback client can be a whole large body. Sends to a real network fill
// the socket much sooner.
const SendfileChunk = 1 << 20

// resSureFor is how long a range cachestat counted whole is sent by raw
// sendfile (Body.sureUntil), outside the cold window.
const resSureFor = time.Second

// ReadaheadHook, when set before Serve, runs at the start of every
// helper's read of a part (readChunk), on the helper: tests hold a read
// with it.
var ReadaheadHook func()

// NoCachestat, when set before Serve, makes the loops probe with the
// RWF_NOWAIT read, as where cachestat is missing (tests).
var NoCachestat bool

// probe is how the loop asks whether a range is resident.
type probe uint8

const (
	probeCachestat probe = iota
	probeNowait          // RWF_NOWAIT read of the range's last byte
	probeNone            // neither works here (a file system without RWF_NOWAIT): send as before
)

// NewBodies returns the Bodies of loop c, its calls made through sys.
func NewBodies(srv *core.Server, c *core.Loop, sys Sys) *Bodies {
	b := &Bodies{srv: srv, core: c, stats: &c.Stats, sys: sys, res: NewResidency(sys)}
	if NoCachestat {
		b.probe = probeNowait
	}
	return b
}

// Body is one connection's state in its file body. The zero value is
// ready; the loop calls Drop when it closes the connection.
type Body struct {
	// While waiting, a helper reads the next part into chunk and nothing
	// is sent. resFile's bytes from the current offset to resEnd were
	// found resident in this part of the response, outside the cold
	// window: sent by sendfile without a probe while the window stays
	// shut. Until sureUntil (zero: never), resSureFor after cachestat
	// counted every page of it, the sendfile is made raw. A slow client's
	// range may take minutes, and its pages leave the cache meanwhile.
	waiting   bool
	resFile   *core.File // compared only; the Conn holds the reference
	resEnd    int64
	sureUntil time.Time
	// A part read by a helper (a file that is not local, core.File.Local,
	// or any within the cold window): its bytes from offset chunkOff, in
	// chunk (a buffer of chunks', readChunk), of which
	// chunk[chunkAt:chunkEnd] are not sent yet. failed: the read found the
	// file shorter than promised.
	chunk             *[]byte
	chunkOff          int64
	chunkAt, chunkEnd int
	failed            bool
	dropped           bool // the connection is closed: a helper's done finds nothing to do
}

// Step is what a send of a body's next part did.
type Step uint8

const (
	Sent    Step = iota // bytes went out
	Again               // EINTR: try again at once
	Full                // EAGAIN: wait until the socket is writable
	Waiting             // a helper reads the part: the core returns the Conn from RunPosted when done
	Fail                // an error, or a file shorter than promised: close the connection
)

// Waiting reports whether a helper is reading the body's next part: the
// connection sends nothing until it is done.
func (b *Body) Waiting() bool { return b.waiting }

// NewPart forgets the range found resident: a new response or part is
// probed anew.
func (b *Body) NewPart() { b.resFile = nil }

// Drop is for the loop's close: a helper's done that comes later does
// nothing, and the chunk buffer goes back.
func (b *Body) Drop() {
	b.dropped = true
	b.dropChunk()
}

// SendStep is what a send's errno says: Sent (0), Again (EINTR), Full
// (EAGAIN), or Fail (any other: close the connection).
func SendStep(errno unix.Errno) Step {
	switch errno {
	case 0:
		return Sent
	case unix.EINTR:
		return Again
	case unix.EAGAIN:
		return Full
	}
	return Fail
}

// WriteFile sends the next part of o's body from its file on socket fd,
// and tells c how much went (Conn.Sent): by sendfile, from a local file
// whose part the probe found resident outside the cold window (sendfile),
// or else from the buffer a helper read it into (Chunk) by send, the
// loop's own send of bytes (more: the response goes on after them). last
// says the part sent was the body's last byte. Sent and Again: go on
// writing; Full: wait until the socket is writable; Waiting: until the
// core returns c from RunPosted; Fail: close the connection.
func (bs *Bodies) WriteFile(b *Body, c *core.Conn, fd int, o core.Out, send func(p []byte, more bool) (int, unix.Errno)) (last bool, step Step) {
	if !bs.fromBuffer(b, o) {
		n, step := bs.sendfile(b, fd, o)
		switch step {
		case Sent:
			c.Sent(int64(n))
			return int64(n) == o.N, Sent
		case cold:
			// A helper reads the part: below.
		default:
			return false, step
		}
	}
	b.resFile = nil // probed again once the window has shut
	p, step := bs.Chunk(b, c, o)
	if step == inline {
		return bs.sendInline(c, fd, o)
	}
	if step != Sent {
		return false, step
	}
	n, errno := send(p, int64(len(p)) < o.N)
	if step = SendStep(errno); step != Sent {
		return false, step
	}
	c.Sent(int64(n))
	b.ChunkSent(n)
	if n < len(p) {
		return false, Full // the socket is full
	}
	return int64(n) == o.N, Sent
}

// Steps of this file's own, never returned by WriteFile.
const (
	cold   Step = iota + Fail + 1 // sendfile: the part is not resident, and a helper reads it
	inline                        // Chunk: no helper could take a local file's read: sent inline
)

// fromBuffer reports whether the body's next part goes by a helper's
// buffer and not by sendfile: the file is not local; a helper reads the
// part now, or read it and the buffer holds the bytes from the body's
// offset on (sent first, whatever the window says now); or the server's
// cold window is open (core.ColdWindow.LoopMayRead), when the probe's
// answer cannot be trusted (Bodies), and fewer than BuffersMax buffers
// are out. Past that bound a resident part in the window is probed again
// and sent by sendfile, as before the buffers: many clients of cached
// bodies would otherwise hold a buffer each while the disk is in play.
func (bs *Bodies) fromBuffer(b *Body, o core.Out) bool {
	switch {
	case !o.File.Local(), b.waiting, b.failed:
		return true
	case b.chunk != nil && b.chunkOff == o.Off && b.chunkAt < b.chunkEnd:
		return true
	case bs.srv.Cold.LoopMayRead(bs.core.Now()):
		return false
	}
	return buffersOut.Load() < BuffersMax
}

// BuffersMax bounds the buffers out (chunks) of all loops: past it a
// local file's resident part in the cold window goes by sendfile, and a
// part a helper read is left in the page cache and sent by sendfile too
// (readChunk); only a file that is not local always keeps its buffer.
// 32 MiB: the 32 helpers' reads, and the parts read and not yet sent, fit
// well below it on loopback. Tests change it before Serve.
var BuffersMax int64 = 128

// buffersOut counts the chunks taken (getChunk) and not yet given back.
var buffersOut atomic.Int64

// sendfile sends the next chunk of o's body, from a local file, on socket
// fd, when the probe finds the chunk in the page cache, and says cold
// when it does not (the server's cold window opens: core.ColdWindow.Note).
// It returns how many bytes went out, for Conn.Sent, which WriteFile
// calls. Within the window (past BuffersMax) every chunk is probed, and
// the call goes through the runtime.
func (bs *Bodies) sendfile(b *Body, fd int, o core.Out) (int, Step) {
	off, chunk, now := o.Off, min(o.N, SendfileChunk), bs.core.Now()
	window := !bs.srv.Cold.LoopMayRead(now)
	known := o.File == b.resFile && off < b.resEnd
	if known {
		// Found resident, or read by a helper past BuffersMax: the call
		// goes no further than that range, whose pages a probe finds.
		chunk = min(chunk, b.resEnd-off)
	}
	if !known || window {
		// Not known, or known but in the window, where pages leave the
		// cache between a probe and the call: probed (again).
		in, sure := bs.resident(o.File.Fd(), off, chunk)
		if !in {
			bs.srv.Cold.Note(now)
			return 0, cold
		}
		b.resFile, b.resEnd, b.sureUntil = o.File, off+chunk, time.Time{}
		if sure && !window {
			b.sureUntil = now.Add(resSureFor)
		}
	}
	var n int
	var errno unix.Errno
	if now.Before(b.sureUntil) && !window {
		n, errno = bs.sys.SendfileResident(fd, o.File.Fd(), &off, int(chunk))
	} else {
		n, errno = bs.sys.Sendfile(fd, o.File.Fd(), &off, int(chunk))
	}
	return n, sendfileStep(n, errno)
}

// sendfileStep is what a sendfile's result says.
func sendfileStep(n int, errno unix.Errno) Step {
	switch {
	case errno == unix.EINTR:
		return Again
	case errno == unix.EAGAIN:
		return Full
	case errno != 0 || n == 0:
		// n == 0: the file shrank under us; the promised length cannot be
		// sent, and only closing tells the client.
		return Fail
	}
	return Sent
}

// sendInline sends the next chunk of a local file's body by sendfile,
// through the runtime, blocking on the disk when it is not resident: no
// helper could take its read (the queue is full). Counted in
// OwnReadaheadsInline.
func (bs *Bodies) sendInline(c *core.Conn, fd int, o core.Out) (last bool, step Step) {
	bs.stats.Own[OwnReadaheadsInline]++
	off := o.Off
	n, errno := bs.sys.Sendfile(fd, o.File.Fd(), &off, int(min(o.N, SendfileChunk)))
	if step = sendfileStep(n, errno); step != Sent {
		return false, step
	}
	c.Sent(int64(n))
	return int64(n) == o.N, Sent
}

// resident reports whether n bytes of fd from off are all in the page
// cache, with one syscall. When it cannot tell it says true: the send
// goes on inline, as it did before the probe. sure says that cachestat
// answered: every page was counted. The RWF_NOWAIT probe looks at one
// page, and its read may land inline (backend/epoll's readahead_test.go),
// so it is never sure.
func (bs *Bodies) resident(fd int, off, n int64) (in, sure bool) {
	switch bs.probe {
	case probeCachestat:
		if cached, known := bs.res.Range(fd, off, n); known {
			return cached, true
		}
		if bs.res.Missing() {
			bs.probe = probeNowait
		}
	case probeNowait:
		m, errno := bs.sys.PreadNowait(fd, bs.probeBuf[:], off+n-1)
		switch errno {
		case 0:
			return m == 1, false
		case unix.EAGAIN:
			return false, false
		case unix.EOPNOTSUPP, unix.EINVAL:
			bs.probe = probeNone
		}
	}
	return true, false
}

// Drain waits, at teardown, for the reads still on the helpers, so
// that their done runs and gives back the files they hold: their fds are
// closed by the core's cache only then. The connections are closed
// already; a helper may still be reading. wakefd is the loop's Waker,
// which the helpers' Post writes to. It gives up at the server's exit
// deadline (core.Server.ExitDeadline), for a file system that never
// answers: the file a read still holds then stays open until the
// process exits, since only this thread may drop its reference.
func (bs *Bodies) Drain(wakefd int) {
	deadline := bs.srv.ExitDeadline()
	for bs.pending > 0 && time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(wakefd), Events: unix.POLLIN}}
		bs.sys.Poll(fds, 100)
		var b [8]byte
		bs.sys.Read(wakefd, b[:])
		bs.core.RunPosted() // their Conns are closed: nothing to drive
	}
}

// chunks are the buffers helpers read parts into (Chunk): at most one per
// connection that sends from one, taken back when sent.
var chunks = sync.Pool{New: func() any { b := make([]byte, chunkMax); return &b }}

// chunkMax is the most of a file a helper reads at once: as io_uring's
// chunks, enough for a socket buffer's worth per write.
const chunkMax = 256 << 10

// Chunk returns the next bytes to send of o's body from the buffer a
// helper read them into, or, when the buffer is spent (or is of another
// part), it hands the next chunk's read to a helper and says Waiting
// (Fail when no helper could take a read of a file that is not local, or
// the last read found the file short; inline when none could take a
// local file's). WriteFile sends what it returns, calls Conn.Sent and
// then ChunkSent.
func (bs *Bodies) Chunk(b *Body, c *core.Conn, o core.Out) ([]byte, Step) {
	switch {
	case b.waiting:
		return nil, Waiting
	case b.failed:
		return nil, Fail
	case b.chunk == nil || b.chunkOff != o.Off || b.chunkAt == b.chunkEnd:
		b.dropChunk()
		switch {
		case bs.readChunk(b, c, o.File, o.Off, min(o.N, chunkMax)):
			return nil, Waiting
		case o.File.Local():
			return nil, inline
		}
		return nil, Fail
	}
	return (*b.chunk)[b.chunkAt:b.chunkEnd], Sent
}

// ChunkSent says that n bytes of what Chunk returned went out.
func (b *Body) ChunkSent(n int) {
	b.chunkAt, b.chunkOff = b.chunkAt+n, b.chunkOff+int64(n)
}

// readChunk hands the read of n bytes of f from off into a buffer to a
// helper, and reports whether it did. A read that comes back short (the
// file shrank) leaves the buffer short: the next Chunk returns what it
// holds, and an empty one fails the connection.
func (bs *Bodies) readChunk(b *Body, c *core.Conn, f *core.File, off, n int64) bool {
	bs.core.HoldFile(f)
	fd, local := f.Fd(), f.Local()
	// The buffer is taken on the helper, when the read starts: a part
	// queued behind the helpers holds none (at c=10000 with cold bodies
	// the queue can hold thousands).
	var bp *[]byte
	got := 0
	work := func() {
		if ReadaheadHook != nil {
			ReadaheadHook()
		}
		bp = getChunk()
		if local {
			unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM) // uncounted: a helper's, not the loop's; see Bodies
		}
		got = ReadFull(fd, (*bp)[:n], off)
	}
	done := func() {
		bs.pending--
		bs.core.ReleaseFile(f)
		if b.dropped {
			putChunk(bp)
			return // closed while the helper read
		}
		b.waiting = false
		if got == 0 {
			putChunk(bp)
			b.failed = true // the file shrank: the promised length cannot be sent
			return
		}
		if local && buffersOut.Load() > BuffersMax {
			// Past the bound the part is not kept: the read left it in
			// the page cache, and it goes by sendfile, probed again
			// first, as before the buffers. So a buffer is held while its
			// client drains it only up to BuffersMax: clients that do not
			// read (or 10,000 of them) cannot hold 256 KiB each.
			putChunk(bp)
			b.resFile, b.resEnd, b.sureUntil = f, off+int64(got), time.Time{}
			c.Waited()
			return
		}
		b.chunk, b.chunkOff, b.chunkAt, b.chunkEnd = bp, off, 0, got
		c.Waited()
	}
	if !bs.core.Offload(c, work, done) {
		bs.core.ReleaseFile(f)
		return false
	}
	bs.stats.Own[OwnReadaheads]++
	bs.pending++
	b.waiting = true
	c.BodyWait()
	return true
}

// getChunk takes a buffer, counted in buffersOut until putChunk.
func getChunk() *[]byte {
	buffersOut.Add(1)
	return chunks.Get().(*[]byte)
}

func putChunk(bp *[]byte) {
	buffersOut.Add(-1)
	chunks.Put(bp)
}

// dropChunk gives the buffer back.
func (b *Body) dropChunk() {
	if b.chunk != nil {
		putChunk(b.chunk)
		b.chunk = nil
	}
}

// ReadFull reads len(p) bytes of fd from off, or up to the file's end, on
// a helper (never a loop: the file may be on a mount that hangs), and
// says how many.
func ReadFull(fd int, p []byte, off int64) int {
	got := 0
	for got < len(p) {
		m, err := unix.Pread(fd, p[got:], off+int64(got)) // uncounted: a helper's
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			break
		}
		got += m
	}
	return got
}
