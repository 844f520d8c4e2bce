package core

import (
	"path/filepath"
	"sync/atomic"
	"time"
)

// File-system operations: no loop waits for the disk. A cache miss, a
// revalidation, a listing and a CGI script's lookup are operations (fsOp)
// that run where the loop's mode puts them:
//
//   - inline, on the loop, with calls that wait: a loop without a waker
//     (the blocking backend, which waits in every call anyway);
//   - probed, on the loop, with calls that fail instead of waiting
//     (openat2 RESOLVE_CACHED, preadv2 RWF_NOWAIT): a miss on any loop
//     with a waker (epoll's, io_uring's) beneath a local root (fsMode,
//     lookupMode); a warm file is loaded there and then, and one that
//     would wait is undone and handed to a helper;
//   - offloaded, on a helper goroutine (offload.go) making its calls
//     through the loop's FileCalls (io_uring: its ring), and landing on
//     the loop's thread through Post: a cold miss, a listing, a
//     revalidation, and every load beneath a root that is not local.
//
// A request whose answer waits for an operation is in file (Conn.waitFS)
// until it lands; requests behind it wait too, responses queued before it
// still go out. Concurrent misses on one key join one operation. What
// lands goes into the cache (a 404 or 403 too, for the rest of its
// second, so that a flood of requests for one missing path shares its
// calls) and answers every request still waiting for it; a Conn freed
// meanwhile left the operation's list in its reset, and a loop closed
// meanwhile has the operation's fds closed where it lands (discard).
// A cache hit makes no call: on the first hit of a second its entry is
// served as it is and one revalidation starts (stale-while-revalidate);
// when the stat lands, a changed or vanished file's entry is dropped and
// the next request loads it again. Only an entry seen recently
// (cacheValid, cache.go) is served meanwhile: one idle for longer, or
// whose stat has not come back, is dropped, and its request loads it. A revalidation is never probed on the
// loop: it would cost the hit a call. One case still loads inline on any
// loop: a script's local redirect answered while the script's request
// body is still being read and dropped (the Conn is in body, which file
// cannot interrupt); it is rare, and the script ran first anyway.

// FSKind names a kind of file-system operation, for counting.
type FSKind uint8

const (
	FSLoad    FSKind = iota // a cache miss: a file, a directory's index.html, a redirect
	FSListing               // a miss that built an --autoindex listing
	FSStat                  // a revalidation of a cached entry
	FSCGI                   // a CGI script's lookup
	NumFSKinds
)

var fsKindNames = [NumFSKinds]string{FSLoad: "load", FSListing: "listing", FSStat: "stat", FSCGI: "cgi"}

func (k FSKind) String() string { return fsKindNames[k] }

// FSWaitBounds are the upper bounds, in seconds, of the buckets of
// FSStats.Wait: how long offloaded operations took from hand-off to
// landing.
var FSWaitBounds = [...]float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30}

// fsOp is one offloaded operation.
type fsOp struct {
	kind FSKind // FSLoad (FSListing once known), FSStat or FSCGI
	key  string // FSLoad: the cache key; FSCGI: the script's name
	dir  bool

	// FSStat: the entry and, copied on the loop's thread, what the
	// helper compares: it never reads a File the loop may change.
	entry *File
	path  string
	ekind entryKind
	info  fileInfo
	side  *sidecars // immutable once loaded
	// FSStat of a body sent from a file on a mount that is not local: a
	// duplicate of the entry's fd, and the length of the body's first
	// part, which the helper reads after the stat (firstPart); 0: none.
	partFd int
	part   int64

	// Written by the helper, read on the loop's thread once landed.
	f      *File // FSLoad: nobody holds it yet
	status int
	ok     bool // FSStat: unchanged
	calls  [NumSys]uint64

	// The loop's.
	waiters []*Conn // waiting for it; a Conn knows its index (connRare.fsIdx)
	start   time.Time
	sec     int64 // the loop's second at the start: what the file it finds is seen as of
}

// fsState is a loop's side of its operations.
type fsState struct {
	calls    FileCalls // SetFileCalls; DirectCalls when nil
	noProbe  bool      // every load goes to a helper, warm or not: tests that hold a load's calls
	wrapped  bool      // calls is wrapped by Config.WrapFileCalls
	ops      map[fsKey]*fsOp
	inflight int          // offloaded, not landed yet
	waiting  int          // requests waiting for one
	queued   atomic.Int64 // offloaded, not taken by a helper yet: the one field helpers write
}

type fsKey struct {
	kind FSKind
	key  string
}

type fsMode uint8

const (
	fsInline  fsMode = iota // on the loop, waiting
	fsProbe                 // on the loop without waiting, else offloaded
	fsOffload               // on a helper
)

// SetFileCalls sets how the loop's helpers make the file-system calls of
// its operations (FileCalls; default DirectCalls). The backend calls it
// before serving.
func (l *Loop) SetFileCalls(fc FileCalls) { l.fs.calls = fc }

// fsMode is the one rule for where a loop's operations run, whatever
// its backend: inline when nothing could wake the loop when one lands,
// else probed on the loop, with calls that fail rather than wait, and
// off it when the probe finds the disk in play. lookupMode adds the
// other half: never the probe beneath a root on a mount that is not
// local.
func (l *Loop) fsMode() fsMode {
	switch {
	case l.box.wake == nil:
		return fsInline
	case l.fs.noProbe:
		return fsOffload
	}
	return fsProbe
}

// lookupMode is the mode of a miss's or a CGI lookup's operation beneath
// a root: inline when the caller may not wait for it, else the loop's,
// but never the probe beneath a root on a mount that is not local
// (mounts_linux.go). ok is false when the caller may not wait and the
// root is not local: nothing may be called there on a loop, and the
// answer is 503.
func (l *Loop) lookupMode(inline, local bool) (mode fsMode, ok bool) {
	mode = l.fsMode()
	switch {
	case inline && !local && mode != fsInline:
		return mode, false
	case inline:
		return fsInline, true
	case mode == fsProbe && !local:
		return fsOffload, true
	}
	return mode, true
}

// loopLoader is a loader on the loop's thread: it waits unless the loop
// probes (fsProbe).
func (l *Loop) loopLoader(root int, mode fsMode) loader {
	nowait := mode == fsProbe
	return loader{root: root, cfg: &l.srv.Config, mounts: &l.srv.mounts, elog: &l.srv.elog, fs: loopFS{s: l.sys(), nowait: nowait}, nowait: nowait}
}

// miss is route's lookup of key once the cache missed (a hit is the
// cache's alone, with no call frame more): the entry, holding a
// reference the caller gives back with release; or the status to answer;
// or the operation the request must wait for. inline: the lookup may not
// wait (a local redirect answered while its request's body is still read).
func (l *Loop) miss(key []byte, dir, inline bool) (*File, int, *fsOp) {
	l.Stats.CacheMiss++
	if op := l.fs.ops[fsKey{FSLoad, string(key)}]; op != nil {
		return nil, 0, op
	}
	mode, ok := l.lookupMode(inline, l.srv.rootLocal)
	if !ok {
		return nil, 503, nil
	}
	if mode != fsOffload {
		ld := l.loopLoader(l.srv.root, mode)
		f, status := ld.load(string(key), dir)
		if status != needsDisk {
			if mode == fsProbe {
				l.Stats.FS.Inline++
			}
			l.keep(string(key), f, status, l.sec)
			if f != nil {
				f.refs++ // the caller's
			}
			return f, status, nil
		}
	}
	op := &fsOp{kind: FSLoad, key: string(key), dir: dir}
	if !l.startOp(op) {
		return nil, 503, nil
	}
	return nil, 0, op
}

// findCGI is serveCGI's lookup of script name: the path to run or the
// status to answer, or the operation to wait for.
func (l *Loop) findCGI(name []byte, inline bool) (string, int, *fsOp) {
	if status := cgiNameStatus(name); status != 0 {
		return "", status, nil
	}
	if op := l.fs.ops[fsKey{FSCGI, string(name)}]; op != nil {
		return "", 0, op
	}
	mode, ok := l.lookupMode(inline, l.srv.cgiLocal)
	if !ok {
		return "", 503, nil
	}
	if mode != fsOffload {
		ld := l.loopLoader(l.srv.cgiRoot, mode)
		if status := ld.cgiLookup(string(name)); status != needsDisk {
			return l.cgiPath(name, status)
		}
	}
	op := &fsOp{kind: FSCGI, key: string(name)}
	if !l.startOp(op) {
		return "", 503, nil
	}
	return "", 0, op
}

func (l *Loop) cgiPath(name []byte, status int) (string, int, *fsOp) {
	if status != 0 {
		return "", status, nil
	}
	return filepath.Join(l.srv.cgiDir, string(name)), 0, nil
}

// revalidate starts the stat of a cached entry on the first hit of a new
// second; the entry is served meanwhile.
//
// On a mount that is not local, a stat may be answered from the kernel's
// attribute cache (FUSE's attr_timeout, NFS's actimeo) while a read
// waits for a daemon or a server that no longer answers: the entry would
// stay valid, and every response from it would send its header and then
// nothing until --fs-timeout closed it (Conn.BodyWait). So the stat of a
// body sent from such a file also reads the body's first part, on the
// helper, from a duplicate of its fd (the cache may close its own
// meanwhile): a read that does not come back keeps the entry unchecked,
// it is dropped after cacheValid, and the next request loads it again,
// waiting for the file system before its header is sent: 503 at
// --fs-timeout when it hangs. Its pages, read, are what a backend sends
// first. A body kept in memory needs no read.
func (l *Loop) revalidate(f *File) {
	op := &fsOp{kind: FSStat, key: f.key, entry: f, path: f.path, ekind: f.kind, info: f.info, side: f.side}
	if n := min(f.info.size, FirstPart); !f.local && f.kind == kindFile && f.body == nil && n > 0 {
		if fd, err := l.sys().dupfd(f.fd); err == nil {
			op.partFd, op.part = fd, n
		}
	}
	f.revalidating = l.startOp(op)
	if !f.revalidating && op.part > 0 {
		l.closeOff(op.partFd) // a close on such a mount may wait too (FLUSH)
	}
}

// FirstPart is the most of a body on a mount that is not local that a
// revalidation reads (revalidate): what the backends read first (epoll's
// chunks; io_uring's are smaller).
const FirstPart = 256 << 10

// fileCalls is what the loop's helpers call: SetFileCalls', else
// DirectCalls, wrapped by Config.WrapFileCalls once.
func (l *Loop) fileCalls() FileCalls {
	if l.fs.calls == nil {
		l.fs.calls = DirectCalls{}
	}
	if w := l.srv.Config.WrapFileCalls; w != nil && !l.fs.wrapped {
		l.fs.calls, l.fs.wrapped = w(l.fs.calls), true
	}
	return l.fs.calls
}

// startOp hands op to a helper; false when the queue is full or the
// server is closing.
func (l *Loop) startOp(op *fsOp) bool {
	ld := &loader{root: l.srv.root, cfg: &l.srv.Config, mounts: &l.srv.mounts, elog: &l.srv.elog}
	local := l.srv.rootLocal
	if op.kind == FSCGI {
		ld.root, local = l.srv.cgiRoot, l.srv.cgiLocal
	}
	hfs := helperFS{fc: DirectCalls{}, direct: true, calls: &op.calls, localRoot: -1}
	if local {
		// Beneath a root that is not local the helper makes every call
		// itself: a call through io_uring's ring that a hung file system
		// holds (on an io-wq worker) can be neither waited for nor
		// cancelled when the loop stops, where a helper's is abandoned
		// and what it opens late is closed (discard).
		fc := l.fileCalls()
		sc, direct := fc.(interface{ MakesSyscalls() bool })
		hfs.fc, hfs.direct, hfs.localRoot = fc, direct && sc.MakesSyscalls(), ld.root
	}
	ld.fs = hfs
	op.start, op.sec = time.Now(), l.sec
	l.fs.queued.Add(1)
	work := func() {
		l.fs.queued.Add(-1)
		op.run(ld)
	}
	if !l.offload(nil, work, func() { l.land(op) }, op.discard) {
		l.fs.queued.Add(-1)
		return false
	}
	l.fs.inflight++
	if op.kind != FSStat {
		if l.fs.ops == nil {
			l.fs.ops = make(map[fsKey]*fsOp)
		}
		l.fs.ops[fsKey{op.kind, op.key}] = op
	}
	return true
}

// run is the operation's work, on a helper goroutine.
func (op *fsOp) run(ld *loader) {
	switch op.kind {
	case FSLoad:
		op.f, op.status = ld.load(op.key, op.dir)
	case FSStat:
		op.ok, op.status = ld.unchanged(op.path, op.ekind, &op.info, op.side)
		if op.part > 0 {
			if op.ok {
				op.ok = ld.firstPart(op.partFd, op.part)
			}
			ld.fs.close(op.partFd)
		}
	case FSCGI:
		op.status = ld.cgiLookup(op.key)
	}
}

// discard runs instead of land when the loop closed before op landed:
// what it opened is closed.
func (op *fsOp) discard() {
	if op.f != nil {
		op.f.discard()
	}
}

// land runs on the loop's thread once op is done: it counts op's calls,
// keeps what it found, and answers the requests waiting for it.
func (l *Loop) land(op *fsOp) {
	l.fs.inflight--
	l.sys().addOffloaded(&op.calls)
	kind := op.kind
	if op.f != nil && op.f.kind == kindListing {
		kind = FSListing
	}
	l.Stats.FS.Ops[kind]++
	wait := time.Since(op.start).Seconds()
	l.Stats.FS.WaitSum += wait
	b := 0
	for b < len(FSWaitBounds) && wait > FSWaitBounds[b] {
		b++
	}
	l.Stats.FS.Wait[b]++
	switch op.kind {
	case FSStat:
		f := op.entry
		f.revalidating = false
		switch {
		case !f.cached:
		case op.ok:
			f.checked = max(f.checked, op.sec)
		default:
			l.cache.remove(f) // replaced or gone: the next request loads it again
			l.unholdPage(f)
		}
		return
	case FSLoad:
		delete(l.fs.ops, fsKey{FSLoad, op.key})
		l.keep(op.key, op.f, op.status, op.sec)
		if op.f != nil {
			op.f.refs++ // the operation's own while it answers, given back below
		}
	case FSCGI:
		delete(l.fs.ops, fsKey{FSCGI, op.key})
	}
	ws := op.waiters
	op.waiters = nil
	for _, c := range ws {
		c.fs = nil
		l.fs.waiting--
		c.landed(op)
		l.markReady(c)
	}
	if op.f != nil {
		l.cache.release(op.f)
	}
}

// keep puts what a load that started in second sec found into the cache:
// the File, seen as it is in sec (a load that a slow file system held
// for seconds is no fresher than its start), or a 404 or 403 for the
// rest of that second. The loop holds it too, cached or not, when it is
// an --error-page's (holdPage).
func (l *Loop) keep(key string, f *File, status int, sec int64) {
	if f != nil {
		f.checked, f.used = sec, l.sec
	}
	if l.srv.pageSlots != nil {
		l.holdPage(key, f)
	}
	c := &l.cache
	if c.cfg.NoFileCache {
		return
	}
	if f == nil {
		if status != 404 && status != 403 {
			return
		}
		f = &File{key: key, kind: kindError, status: status, fd: -1}
		f.checked, f.used = sec, l.sec
	}
	if old := c.m[key]; old != nil {
		c.remove(old)
	}
	c.insert(f)
}

// waitFS holds the request r, whose head is head, until op lands: the
// head is kept in held (c.in is parsed in place and moves on), and the
// connection is in file.
func (c *Conn) waitFS(op *fsOp, head []byte) {
	c.hold(head)
	rare := c.rare
	c.fs, rare.fsIdx = op, len(op.waiters)
	op.waiters = append(op.waiters, c)
	c.l.fs.waiting++
	rare.fsSince = c.l.now
	c.to(stateFile)
}

// leaveFS takes c off its operation's list: the operation goes on, and
// lands in the cache without it.
func (c *Conn) leaveFS() {
	op := c.fs
	last := len(op.waiters) - 1
	if i := c.rare.fsIdx; i != last { // waitFS made rare
		m := op.waiters[last]
		op.waiters[i], m.rare.fsIdx = m, i
	}
	op.waiters[last] = nil
	op.waiters = op.waiters[:last]
	c.fs = nil
	c.l.fs.waiting--
}

// heldAgain parses the held head again, for the request waiting in file;
// a static request's body was read before it waited, a script's is still
// to come.
func (c *Conn) heldAgain(head []byte, kind FSKind) *Request {
	r := c.reparse(head, kind != FSCGI)
	if rare := c.rare; rare != nil && rare.fsRedirect != nil {
		redirectRequest(r, rare.fsRedirect)
		rare.fsRedirect = nil
	}
	return r
}

// landed answers the request that waited for op.
func (c *Conn) landed(op *fsOp) {
	head := c.unhold()
	c.active = c.l.now
	c.to(stateReading)
	c.route(c.heldAgain(head, op.kind), head, op)
	c.endRedirects()
	c.resume()
}

// endRedirects drops the CGI half kept for a local redirect's lookup
// (PipeEOF) once the redirect is answered without a script.
func (c *Conn) endRedirects() {
	if c.cgi != nil && c.cgi.job == nil && c.fs == nil {
		c.cgi = nil
	}
}

// fsTimedOut answers 503 to a request that waited Config.FSTimeout for
// the file system (a hung NFS server): its operation goes on without it.
func (c *Conn) fsTimedOut() Action {
	c.l.Stats.Timeouts++
	kind := c.fs.kind
	c.leaveFS()
	head := c.unhold()
	c.to(stateReading)
	r := c.heldAgain(head, kind)
	c.respondError(r, 503)
	if kind == FSCGI {
		c.dropBody(r)
	}
	c.endRedirects()
	c.resume()
	if c.Next() == ActWrite {
		return ActWrite
	}
	return ActClose
}
