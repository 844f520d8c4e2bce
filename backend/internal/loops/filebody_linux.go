package loops

import (
	"sync"
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
// and when it is not, a helper (core.Loop.Offload) reads the range into
// the page cache while the connection waits and the loop serves the
// others; then the loop sends it.
//
// The probe is cachestat(2) (Linux 6.5): it answers for the whole range,
// where a RWF_NOWAIT read or a mincore tells about one page, and needs no
// mapping of the file. It counts the pages present in the page cache,
// also those still being read: the kernel's own read-ahead (read_ahead_kb)
// would leave the next chunks present but not read when the probe comes,
// and sendfile would wait for them. So the helper sets POSIX_FADV_RANDOM
// on the file first: the kernel then reads what a read asks for, no more,
// and a page is present only once a helper (or a sendfile) asked for it.
// Where cachestat is missing (ENOSYS, or EPERM from seccomp), the probe is
// a RWF_NOWAIT read of the chunk's last byte: a sequential read-ahead
// fills a range from its start, so the last page resident says the rest
// is.
//
// The helper's work is POSIX_FADV_RANDOM, then pread of the range into a
// scratch buffer, which returns once every page of it is read: readahead(2)
// and POSIX_FADV_WILLNEED only start the reads (force_page_cache_ra
// submits and returns), and a sendfile that meets a page still under I/O
// waits for it.
//
// While the read-ahead runs the connection sends nothing (Sendfile says
// Waiting); when it is done the loop drives the connection again (the
// core returns it from RunPosted), which retries the send, so a
// writability event that came meanwhile is not needed. Its write timeout
// does not run meanwhile: the read-ahead is a wait for the file system
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
// direct_io file has none). A helper reads each chunk into a buffer
// instead, and the loop writes the buffer (Chunk): no call on the loop
// reads such a file. When no helper can take the read the connection is
// closed, not served inline.
//
// Bodies belongs to its loop's thread; it counts its read-aheads in the
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
	OwnReadaheads       = iota // ranges a helper read ahead of their sendfile
	OwnReadaheadsInline        // ranges sent inline, blocking on the disk: the helpers' queue was full
)

// SendfileChunk bounds one sendfile call. It does not make a loop fair: an
// edge-triggered loop goes on until the socket is full, which on a fast
// loopback client can be a whole large body. Sends to a real network fill
// the socket much sooner.
const SendfileChunk = 1 << 20

// resSureFor is how long a range cachestat counted whole is sent by raw
// sendfile (Body.sureUntil).
const resSureFor = time.Second

// ReadaheadHook, when set before Serve, runs at the start of every
// read-ahead, on the helper: tests hold a read-ahead with it.
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
	// While waiting, a helper reads the next chunk's range and nothing is
	// sent. resFile's bytes from the current offset to resEnd were found
	// resident (or read ahead) in this part of the response: sent without
	// a probe. Until sureUntil (zero: never), resSureFor after cachestat
	// counted every page of it, the sendfile is made raw, unless a loop
	// met a cold part lately (core.Server.Cold: cachestat also counts
	// pages a read has yet to fill). A slow client's range may take
	// minutes, and its pages leave the cache meanwhile.
	waiting   bool
	resFile   *core.File // compared only; the Conn holds the reference
	resEnd    int64
	sureUntil time.Time
	// A file that is not local (core.File.Local): a helper read its
	// bytes from offset chunkOff into chunk (a buffer of chunks',
	// readChunk), of which chunk[chunkAt:chunkEnd] are not sent yet.
	// Nothing on the loop reads such a file. failed: the read found the
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
// and tells c how much went (Conn.Sent): by sendfile from a local file
// (Sendfile), or, from a file that is not local, the buffer a helper read
// it into (Chunk) by send, the loop's own send of bytes (more: the
// response goes on after them). last says the part sent was the body's
// last byte. Sent and Again: go on writing; Full: wait until the socket
// is writable; Waiting: until the core returns c from RunPosted; Fail:
// close the connection.
func (bs *Bodies) WriteFile(b *Body, c *core.Conn, fd int, o core.Out, send func(p []byte, more bool) (int, unix.Errno)) (last bool, step Step) {
	if !o.File.Local() {
		p, step := bs.Chunk(b, c, o)
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
	n, step := bs.Sendfile(b, c, fd, o)
	if step == Sent {
		c.Sent(int64(n))
	}
	return step == Sent && int64(n) == o.N, step
}

// Sendfile sends the next chunk of o's body, from a local file, on socket
// fd, after making sure the chunk is in the page cache (above). It
// returns how many bytes went out, for Conn.Sent, which WriteFile calls.
func (bs *Bodies) Sendfile(b *Body, c *core.Conn, fd int, o core.Out) (int, Step) {
	if b.waiting {
		return 0, Waiting
	}
	off, chunk, now := o.Off, min(o.N, SendfileChunk), bs.core.Now()
	known := o.File == b.resFile && off < b.resEnd
	if known {
		chunk = min(chunk, b.resEnd-off)
	}
	// A range found resident, or read ahead, is sent without a probe,
	// except in the server's cold window: then pages leave the cache
	// while others are read (the kernel's reclaim, or a proactive pageout
	// such as DAMON's, which samples memory a region at a time and takes
	// freshly read pages out with the cold ones around them), and a
	// sendfile that meets a page gone reads it from the disk on the loop.
	// So each chunk is probed again first, and read ahead again when a
	// page is missing (results/2026-12-02_cfef9af_cold, damon/).
	if !known || bs.srv.Cold.Recent(now) {
		in, sure := bs.resident(o.File.Fd(), off, chunk)
		if !in {
			bs.srv.Cold.Note(now)
			if bs.readAhead(b, c, o.File, off, chunk) {
				return 0, Waiting
			}
		}
		if !known {
			b.resFile, b.resEnd, b.sureUntil = o.File, off+chunk, time.Time{}
			if in && sure {
				b.sureUntil = now.Add(resSureFor)
			}
		}
	}
	var n int
	var errno unix.Errno
	if now.Before(b.sureUntil) && !bs.srv.Cold.Recent(now) {
		n, errno = bs.sys.SendfileResident(fd, o.File.Fd(), &off, int(chunk))
	} else {
		n, errno = bs.sys.Sendfile(fd, o.File.Fd(), &off, int(chunk))
	}
	switch {
	case errno == unix.EINTR:
		return 0, Again
	case errno == unix.EAGAIN:
		return 0, Full
	case errno != 0 || n == 0:
		// n == 0: the file shrank under us; the promised length cannot be
		// sent, and only closing tells the client.
		return 0, Fail
	}
	return n, Sent
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

// readAhead hands the read of n bytes of f from off to a helper, and
// reports whether it did; false means the helpers' queue is full, and the
// caller sends inline (counted in OwnReadaheadsInline).
func (bs *Bodies) readAhead(b *Body, c *core.Conn, f *core.File, off, n int64) bool {
	fd := f.Fd()
	work := func() { readRange(fd, off, n) }
	done := func(dropped bool) {
		if !dropped {
			// Read by the helper, not counted: the sendfile goes through
			// the runtime, in case a page left the cache since.
			b.resFile, b.resEnd, b.sureUntil = f, off+n, time.Time{}
			c.Waited()
		}
	}
	if !bs.offload(b, c, f, work, done) {
		bs.stats.Own[OwnReadaheadsInline]++
		return false
	}
	return true
}

// offload holds f and hands work to a helper, for readAhead and
// readChunk; back on the loop it releases f and, unless the body was
// dropped meanwhile, clears waiting, then runs done. It reports whether
// a helper took it; false (the helpers' queue is full) releases f and
// runs nothing.
func (bs *Bodies) offload(b *Body, c *core.Conn, f *core.File, work func(), done func(dropped bool)) bool {
	bs.core.HoldFile(f)
	back := func() {
		bs.pending--
		bs.core.ReleaseFile(f)
		if !b.dropped {
			b.waiting = false
		}
		done(b.dropped)
	}
	if !bs.core.Offload(c, work, back) {
		bs.core.ReleaseFile(f)
		return false
	}
	bs.stats.Own[OwnReadaheads]++
	bs.pending++
	b.waiting = true
	c.BodyWait()
	return true
}

// scratch holds the helpers' buffers: a read-ahead reads into one and
// throws the bytes away. There are at most as many in use as helpers.
var scratch = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// readRange reads n bytes of fd from off into the page cache, on a helper.
func readRange(fd int, off, n int64) {
	if ReadaheadHook != nil {
		ReadaheadHook()
	}
	unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM) // uncounted: a helper's, not the loop's; see above
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	for n > 0 {
		m, err := unix.Pread(fd, (*bp)[:min(n, int64(len(*bp)))], off) // uncounted: a helper's
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			return // the send will meet the error, or the file's end, itself
		}
		off, n = off+int64(m), n-int64(m)
	}
}

// Drain waits, at teardown, for the read-aheads still on the helpers, so
// that their done runs and gives back the files they hold: their fds are
// closed by the core's cache only then. The connections are closed
// already; a helper may still be reading. wakefd is the loop's Waker,
// which the helpers' Post writes to. It gives up at the server's exit
// deadline (core.Server.ExitDeadline), for a file system that never
// answers: the file a read-ahead still holds then stays open until the
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

// chunks are the buffers of files that are not local: at most one per
// connection that sends such a file, taken back when sent.
var chunks = sync.Pool{New: func() any { b := make([]byte, chunkMax); return &b }}

// chunkMax is the most of a file that is not local read at once: as
// io_uring's chunks, enough for a socket buffer's worth per write.
const chunkMax = 256 << 10

// Chunk returns the next bytes to send of o's body, from a file that is
// not local: from the buffer a helper read it into, or, when the buffer
// is spent (or is of another part), it hands the next chunk's read to a
// helper and says Waiting (Fail when no helper could take it, or the last
// read found the file short). WriteFile sends what it returns, calls
// Conn.Sent and then ChunkSent.
func (bs *Bodies) Chunk(b *Body, c *core.Conn, o core.Out) ([]byte, Step) {
	switch {
	case b.waiting:
		return nil, Waiting
	case b.failed:
		return nil, Fail
	case b.chunk == nil || b.chunkOff != o.Off || b.chunkAt == b.chunkEnd:
		b.dropChunk()
		if !bs.readChunk(b, c, o.File, o.Off, min(o.N, chunkMax)) {
			return nil, Fail
		}
		return nil, Waiting
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
	fd := f.Fd()
	bp := chunks.Get().(*[]byte)
	got := 0
	work := func() { got = ReadFull(fd, (*bp)[:n], off) }
	done := func(dropped bool) {
		switch {
		case dropped: // closed while the helper read
			chunks.Put(bp)
		case got == 0:
			chunks.Put(bp)
			b.failed = true // the file shrank: the promised length cannot be sent
		default:
			b.chunk, b.chunkOff, b.chunkAt, b.chunkEnd = bp, off, 0, got
			c.Waited()
		}
	}
	if !bs.offload(b, c, f, work, done) {
		chunks.Put(bp)
		return false
	}
	return true
}

// dropChunk gives the buffer back.
func (b *Body) dropChunk() {
	if b.chunk != nil {
		chunks.Put(b.chunk)
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
