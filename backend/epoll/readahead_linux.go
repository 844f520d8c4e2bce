package epoll

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// A sendfile of a range that is not in the page cache waits for the disk,
// and with it every connection of the loop (results/cold-sendfile: one
// call in 16-19 blocked for milliseconds). So before each sendfile chunk
// the loop asks whether the chunk's range is resident, with one syscall,
// and when it is not, a helper (core.Loop.Offload) reads the range into
// the page cache while the connection waits and the loop serves the
// others; then the loop sends it.
//
// The probe is cachestat(2) (Linux 6.5): it answers for the whole range,
// where a RWF_NOWAIT read or a mincore tells about one page, and needs no
// mapping of the file. It counts the pages present in the page cache,
// also those still being read: the kernel's own read-ahead, 8 MiB on this
// machine's disk (read_ahead_kb), would leave the next chunks present but
// not read when the probe comes, and sendfile would wait for them. So the
// helper sets POSIX_FADV_RANDOM on the file first: the kernel then reads
// what a read asks for, no more, and a page is present only once a helper
// (or a sendfile) asked for it. Where cachestat is missing (ENOSYS, or
// EPERM from seccomp), the probe is a RWF_NOWAIT read of the chunk's last
// byte: a sequential read-ahead fills a range from its start, so the last
// page resident says the rest is.
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
// Its write timeout does not run meanwhile: the read-ahead has a bound of
// its own, the same length (Config.WriteTimeout), after which the
// connection is closed. A connection closed meanwhile (that bound, a reset
// from the peer, the shutdown) is recognised in done by its slot and
// generation; the file is held (core.Loop.HoldFile) until done, so the
// helper never reads a closed or reused fd.

// A file on a mount that is not local (core.File.Local: FUSE, NFS) is
// never asked about: each of its chunks is read ahead by a helper, since
// a page it lacks would be read from a daemon or server that may never
// answer; and when no helper can take the read the connection is closed,
// not served inline. The sendfile that follows the read can still meet a
// page dropped in the few microseconds since (FUSE drops a file's pages
// when another open of it asks to); that window is left.

// readaheadHook, when set before Serve, runs at the start of every
// read-ahead, on the helper: tests hold a read-ahead with it.
var readaheadHook func()

// noCachestat, when set before Serve, makes the loops probe with the
// RWF_NOWAIT read, as where cachestat is missing (tests).
var noCachestat bool

var pageSize = int64(os.Getpagesize())

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
		var cs unix.Cachestat_t
		switch errno := l.sys.Cachestat(fd, uint64(off), uint64(n), &cs); errno {
		case 0:
			pages := (off+n+pageSize-1)/pageSize - off/pageSize
			return cs.Cache >= uint64(pages), true
		case unix.ENOSYS, unix.EPERM:
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
// caller sends inline (counted in ReadaheadsInline).
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
		l.stats.ReadaheadsInline++
		return false
	}
	l.stats.Readaheads++
	l.readaheads++
	cn.waiting, cn.waitStart = true, l.core.Now()
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
