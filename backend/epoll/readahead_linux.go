package epoll

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

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
// While the read-ahead runs the connection sends nothing (write returns
// false); when it is done the loop drives the connection again, which
// retries the send, so an EPOLLOUT edge that came meanwhile is not needed.
// Its write timeout does not run meanwhile: the read-ahead is a wait for
// the file system (core.Conn.BodyWait), held to --fs-timeout, after which
// the connection is closed (its header is out). A connection closed meanwhile (that bound, a reset
// from the peer, the shutdown) is recognised in done by its slot and
// generation; the file is held (core.Loop.HoldFile) until done, so the
// helper never reads a closed or reused fd.

// A file on a mount that is not local (core.File.Local: FUSE, NFS) is
// never sent by sendfile: a page it lacks would be read from a daemon or
// a server that may never answer, on the loop, and a read ahead does not
// keep it (FUSE drops a file's pages when another open asks to, and a
// direct_io file has none). A helper reads each chunk into a buffer
// instead, and the loop writes the buffer (writeChunk): no call on the
// loop reads such a file. When no helper can take the read the connection
// is closed, not served inline.

// readaheadHook, when set before Serve, runs at the start of every
// read-ahead, on the helper: tests hold a read-ahead with it.
var readaheadHook func()

// noCachestat, when set before Serve, makes the loops probe with the
// RWF_NOWAIT read, as where cachestat is missing (tests).
var noCachestat bool

// probe is how the loop asks whether a range is resident.
type probe uint8

const (
	probeCachestat probe = iota
	probeNowait          // RWF_NOWAIT read of the range's last byte
	probeNone            // neither works here (a file system without RWF_NOWAIT): send as before
)

// resident reports whether n bytes of fd from off are all in the page
// cache, with one syscall. When it cannot tell it says true: the send
// goes on inline, as it did before the probe. sure says that cachestat
// answered: every page was counted. The RWF_NOWAIT probe looks at one
// page, and its read may land inline (readahead_test.go), so it is never
// sure.
func (l *loop) resident(fd int, off, n int64) (in, sure bool) {
	switch l.probe {
	case probeCachestat:
		if cached, known := l.res.Range(fd, off, n); known {
			return cached, true
		}
		if l.res.Missing() {
			l.probe = probeNowait
		}
	case probeNowait:
		m, errno := l.sys.PreadNowait(fd, l.probeBuf[:], off+n-1)
		switch errno {
		case 0:
			return m == 1, false
		case unix.EAGAIN:
			return false, false
		case unix.EOPNOTSUPP, unix.EINVAL:
			l.probe = probeNone
		}
	}
	return true, false
}

// readAhead hands the read of n bytes of f from off to a helper, and
// reports whether it did; false means the helpers' queue is full, and the
// caller sends inline (counted in ownReadaheadsInline).
func (l *loop) readAhead(cn *conn, f *core.File, off, n int64) bool {
	l.core.HoldFile(f)
	fd, gen := f.Fd(), cn.gen
	work := func() { readRange(fd, off, n) }
	done := func() {
		l.readaheads--
		l.core.ReleaseFile(f)
		if l.conn(cn.fd, gen) != cn {
			return // closed while the helper read: nothing to send
		}
		cn.waiting = false
		// Read by the helper, not counted: the sendfile goes through
		// the runtime, in case a page left the cache since.
		cn.resFile, cn.resEnd, cn.sureUntil = f, off+n, time.Time{}
		cn.c.Waited()
	}
	if !l.core.Offload(cn.c, work, done) {
		l.core.ReleaseFile(f)
		l.stats.Own[ownReadaheadsInline]++
		return false
	}
	l.stats.Own[ownReadaheads]++
	l.readaheads++
	cn.waiting = true
	cn.c.BodyWait()
	return true
}

// scratch holds the helpers' buffers: a read-ahead reads into one and
// throws the bytes away. There are at most as many in use as helpers.
var scratch = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// readRange reads n bytes of fd from off into the page cache, on a helper.
func readRange(fd int, off, n int64) {
	if readaheadHook != nil {
		readaheadHook()
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

// drainReadaheads waits, at teardown, for the read-aheads still on the
// helpers, so that their done runs and gives back the files they hold:
// their fds are closed by the core's cache only then. The connections are
// closed already; a helper may still be reading. It gives up at the
// server's exit deadline (core.Server.ExitDeadline), for a file system
// that never answers: the file a read-ahead still holds then stays open
// until the process exits, since only this thread may drop its reference.
func (l *loop) drainReadaheads() {
	deadline := l.srv.ExitDeadline()
	for l.readaheads > 0 && time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(l.wakefd), Events: unix.POLLIN}}
		l.sys.Poll(fds, 100)
		var b [8]byte
		l.sys.Read(l.wakefd, b[:])
		l.core.RunPosted() // their Conns are closed: nothing to drive
	}
}

// chunks are the buffers of files that are not local: at most one per
// connection that sends such a file, taken back when sent.
var chunks = sync.Pool{New: func() any { b := make([]byte, chunkMax); return &b }}

// chunkMax is the most of a file that is not local read at once: as
// io_uring's chunks, enough for a socket buffer's worth per write.
const chunkMax = 256 << 10

// writeChunk sends the next part of a body from a file that is not local:
// from the buffer a helper read it into, or, when the buffer is spent (or
// is of another part), it hands the next chunk's read to a helper and
// waits.
func (l *loop) writeChunk(cn *conn, o core.Out) bool {
	if cn.chunk == nil || cn.chunkOff != o.Off || cn.chunkAt == cn.chunkEnd {
		l.dropChunk(cn)
		if !l.readChunk(cn, o.File, o.Off, min(o.N, chunkMax)) {
			l.close(cn)
		}
		return false
	}
	b := (*cn.chunk)[cn.chunkAt:cn.chunkEnd]
	n, errno := l.sendBytes(cn, b, int64(len(b)) < o.N)
	if again, failed := l.sendFailed(cn, errno); failed {
		return again
	}
	cn.c.Sent(int64(n))
	cn.chunkAt, cn.chunkOff = cn.chunkAt+n, cn.chunkOff+int64(n)
	return n == len(b)
}

// readChunk hands the read of n bytes of f from off into a buffer to a
// helper, and reports whether it did. A read that comes back short (the
// file shrank) leaves the buffer short: the next write sends what it
// holds, and an empty one closes the connection (n == 0 below).
func (l *loop) readChunk(cn *conn, f *core.File, off, n int64) bool {
	l.core.HoldFile(f)
	fd, gen := f.Fd(), cn.gen
	bp := chunks.Get().(*[]byte)
	got := 0
	work := func() { got = readFull(fd, (*bp)[:n], off) }
	done := func() {
		l.readaheads--
		l.core.ReleaseFile(f)
		if l.conn(cn.fd, gen) != cn {
			chunks.Put(bp)
			return // closed while the helper read
		}
		cn.waiting = false
		if got == 0 {
			chunks.Put(bp)
			l.close(cn) // the file shrank: the promised length cannot be sent
			return
		}
		cn.chunk, cn.chunkOff, cn.chunkAt, cn.chunkEnd = bp, off, 0, got
		cn.c.Waited()
	}
	if !l.core.Offload(cn.c, work, done) {
		l.core.ReleaseFile(f)
		chunks.Put(bp)
		return false
	}
	l.stats.Own[ownReadaheads]++
	l.readaheads++
	cn.waiting = true
	cn.c.BodyWait()
	return true
}

// dropChunk gives cn's buffer back.
func (l *loop) dropChunk(cn *conn) {
	if cn.chunk != nil {
		chunks.Put(cn.chunk)
		cn.chunk = nil
	}
}

// readFull reads len(p) bytes of fd from off, or up to the file's end, on
// a helper, and says how many.
func readFull(fd int, p []byte, off int64) int {
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
