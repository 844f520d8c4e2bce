package core

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is what the loops share: the configuration, the document root and
// the pre-built status lines, all immutable after NewServer, plus the
// published counters (guarded by mu) and the access log writer.
type Server struct {
	Config Config

	root    int // O_PATH fd of Config.Dir
	cgiRoot int // O_PATH fd of Config.CGIDir, -1 without CGI
	cgiDir  string
	cgiWG   sync.WaitGroup // the CGI jobs' goroutines
	cgiRun  atomic.Int64   // scripts forked and not yet reaped (with what they left), by every loop (Config.CGIMax)
	helpers helpers        // goroutines for work that may wait for the disk (offload.go)
	mounts  mountTable     // which mounts a loop may call into (mounts_linux.go)
	elog    errorLog       // file-system errors a client is answered 500 or 503 for (errlog.go)
	unwatch func()         // ends mounts.watch
	rootMnt uint64         // the mount ID of root
	// rootLocal, cgiLocal: root's (cgiRoot's) mount is local, so a
	// loop may probe beneath it (mounts_linux.go). Immutable.
	rootLocal, cgiLocal bool
	lines               *statusLines
	fallback            []byte             // Config.Fallback's cache key; nil without one
	pages               map[int]*errorPage // Config.ErrorPages by status; immutable
	pageSlots           map[string]int     // the pages' cache keys, each its slot in Loop.pages; immutable
	log                 *logWriter         // nil without an access log
	appendLog           appendLine         // Config.LogFormat's; nil without an access log
	backendName         []byte             // Config.Backend, for LogJSON

	// retiring: the drain before a shutdown has started (Retire); set
	// once, by any goroutine, read by the loops.
	retiring atomic.Bool

	// Cold is when a loop last met a body's part that was not in the
	// page cache (cold.go): the backends' one rule for the disk in play.
	Cold ColdWindow

	mu        sync.Mutex
	published []Stats        // per loop, as of its last tick
	exitBy    time.Time      // guarded by mu: ExitDeadline once a loop drained, else zero
	lateWG    sync.WaitGroup // closeLater's goroutines
	lateFDs   atomic.Int64   // fds handed to closeLater and not closed yet
	closeOnce sync.Once      // Close's work is done once
	closeErr  error          // Close's answer
}

// ShutdownGrace is how long past Config.ShutdownTimeout the shutdown
// waits for what the file system holds: operations on the helpers, the
// io_uring requests still in the kernel, the CGI scripts being reaped, the
// access log's last write, the closes of the cached files (closeLater). A
// file system that has not answered by then (a hung NFS server, a paused
// FUSE daemon) may never answer, and the server exits without it and says
// what it left (Abandoned), so that a supervisor never waits for it past
// --shutdown-timeout plus these few seconds:
// enough for a healthy but loaded disk to finish what the shutdown
// interrupted (an open, a stat, a read of a chunk), and short beside a
// supervisor's stop timeout (deploy/ sets systemd's TimeoutStopSec=15s).
const ShutdownGrace = 3 * time.Second

// ExitDeadline is when the shutdown stops waiting for the file system:
// ShutdownGrace past the first loop's drain deadline (Drain + the
// ShutdownTimeout), or, when no loop drained (one failed to start),
// ShutdownGrace from now. One deadline for every wait of the teardown,
// so that they add up to it, not each to a grace of its own.
func (s *Server) ExitDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exitBy.IsZero() {
		return time.Now().Add(ShutdownGrace)
	}
	return s.exitBy
}

// waitUntil waits for wg until deadline, and reports whether it was done
// by then. When not, a goroutine is left waiting for it: the process is
// exiting.
func waitUntil(wg *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// closeLater closes fds, a closed loop's cached files, on a goroutine of
// their own, one after the other: a close that waits for a FUSE daemon's
// FLUSH holds one thread, not one per file (a hung mount with thousands
// of files cached would otherwise start as many threads, past the
// runtime's limit). Server.Close waits for them until its deadline.
func (s *Server) closeLater(fds []int) {
	if len(fds) == 0 {
		return
	}
	s.lateFDs.Add(int64(len(fds)))
	s.lateWG.Add(1)
	go func() {
		defer s.lateWG.Done()
		for _, fd := range fds {
			closeLate(fd)
			s.lateFDs.Add(-1)
		}
	}()
}

// Abandoned is Server.Close's error when the shutdown stopped waiting, at
// ExitDeadline, for work the file system held: the file system under the
// document root (or the access log's, or a script's) did not answer.
// Every connection is closed by then, and what an abandoned operation
// opens is closed if it ever finishes.
type Abandoned struct {
	Ops     int  // file-system operations still running on the helpers
	Dropped int  // operations queued behind them, dropped without a call
	Scripts int  // CGI scripts killed and not reaped yet
	Log     bool // the access log's last lines were not all written
	// Files: cached files not closed yet. Closing a file on FUSE waits for
	// its daemon's FLUSH, and so does the kernel when the process exits:
	// until the daemon answers, the process lingers after main returns.
	Files int
}

func (a *Abandoned) Error() string {
	var what []string
	if a.Ops > 0 {
		w := fmt.Sprintf("%d file-system operation(s)", a.Ops)
		if a.Dropped > 0 {
			w += fmt.Sprintf(" (%d more queued behind them, dropped)", a.Dropped)
		}
		what = append(what, w)
	}
	if a.Scripts > 0 {
		what = append(what, fmt.Sprintf("%d CGI script(s) killed and not reaped", a.Scripts))
	}
	if a.Log {
		what = append(what, "the access log's last lines")
	}
	if a.Files > 0 {
		what = append(what, fmt.Sprintf("the close of %d cached file(s)", a.Files))
	}
	tail := ""
	if a.Ops > 0 {
		tail = "; what those operations open is closed if they ever finish"
	}
	if a.Files > 0 {
		tail += "; the process ends only once the file system answers the closes (a FUSE daemon's FLUSH), or its mount is aborted"
	}
	return fmt.Sprintf("stopped waiting for %s at --shutdown-timeout + %v: a file system does not answer (a hung NFS server, a paused FUSE daemon?); every connection was closed%s",
		strings.Join(what, ", "), ShutdownGrace, tail)
}

// NewServer checks the configuration and opens the document root. The error
// says what to fix.
func NewServer(cfg Config) (*Server, error) {
	cfg.fill()
	for _, h := range cfg.Headers {
		if err := h.check(); err != nil {
			return nil, fmt.Errorf("--header %q: %w", h.String(), err)
		}
	}
	pages, pageSlots, err := openErrorPages(cfg.ErrorPages)
	if err != nil {
		return nil, err
	}
	root, err := openRoot(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("document root %q: %w (give --dir an existing, readable directory)", cfg.Dir, err)
	}
	s := &Server{Config: cfg, root: root, cgiRoot: -1, lines: newStatusLines(cfg.ServerName), pages: pages, pageSlots: pageSlots, elog: errorLog{w: cfg.ErrorLog}}
	s.helpers.init(defaultHelpers, defaultHelpersQ)
	if cfg.Fallback != "" {
		if s.fallback, err = openFallback(root, &s.Config); err != nil {
			closeFD(root)
			return nil, err
		}
	}
	s.mounts.load() // unreadable: every mount counts as not local
	s.rootMnt, s.rootLocal = s.localRoot(root)
	if cfg.CGIDir != "" {
		if s.cgiRoot, s.cgiDir, err = openCGIDir(cfg.CGIDir); err != nil {
			closeFD(root)
			return nil, fmt.Errorf("CGI directory %q: %w (give --cgi-dir an existing, readable directory)", cfg.CGIDir, err)
		}
		_, s.cgiLocal = s.localRoot(s.cgiRoot)
		if err = sweep.init(); err != nil {
			closeFD(s.cgiRoot)
			closeFD(root)
			return nil, fmt.Errorf("CGI: %w (what a script leaves running could not be made to end with it)", err)
		}
	}
	if cfg.AccessLog != nil {
		s.log = newLogWriter(cfg.AccessLog)
		s.appendLog = appendCombinedLine
		if cfg.LogFormat == LogJSON {
			s.appendLog = appendJSONLine
		}
		s.backendName = []byte(cfg.Backend)
	}
	s.unwatch = s.mounts.watch()
	return s, nil
}

// WantsAddrs reports whether the backend must fill Conn.Remote and
// Conn.Local (getpeername, getsockname): for the access log and CGI only,
// and to check that a PROXY header's sender is trusted.
func (s *Server) WantsAddrs() bool {
	return s.Config.AccessLog != nil || s.Config.CGIDir != "" || s.Config.ProxyProtocol
}

// Close ends the helpers, waits for the CGI scripts' goroutines (every
// script was killed by its loop's Close, so this is short), flushes the
// access log, waits for the loops' cached files to be closed
// (closeLater) and releases the document root. Each wait ends at
// ExitDeadline: what is still waiting then is left to the file system,
// and Close returns an *Abandoned that counts it. Call it after every
// loop has returned; calling it again returns the same answer.
//
// The roots are O_PATH fds: closing one sends nothing to the file system
// (the kernel skips a file's flush for FMODE_PATH), so even a hung FUSE
// mount cannot hold it.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	if s.unwatch != nil {
		s.unwatch()
	}
	deadline := s.ExitDeadline()
	var a Abandoned
	a.Ops, a.Dropped = s.helpers.close(deadline)
	if s.cgiRoot >= 0 {
		if !s.waitJobs(deadline) {
			a.Scripts = int(max(s.cgiRun.Load(), 1))
		}
	}
	if s.log != nil {
		a.Log = !s.log.close(deadline)
	}
	if !waitUntil(&s.lateWG, deadline) {
		a.Files = int(s.lateFDs.Load())
	}
	// An abandoned helper that the file system lets go later makes its
	// next call beneath the roots: their fds must not be other files' by
	// then, so they are closed once the last such helper is done.
	roots := []int{s.root, s.cgiRoot}
	s.root, s.cgiRoot = -1, -1
	if a.Ops == 0 {
		closeRoots(roots)
	} else {
		go func() {
			s.helpers.wg.Wait()
			closeRoots(roots)
		}()
	}
	if a.Ops > 0 || a.Scripts > 0 || a.Log || a.Files > 0 {
		return &a
	}
	return nil
}

// Draining reports whether a loop has begun the shutdown (Loop.Drain).
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.exitBy.IsZero()
}

// Scripts is how many CGI scripts count against Config.CGIMax now: forked
// and not yet reaped, by every loop. Read at once, not at a tick.
func (s *Server) Scripts() int { return int(s.cgiRun.Load()) }

// Stats sums the counters every loop published at its last tick.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t Stats
	for i := range s.published {
		t.Add(&s.published[i])
	}
	return t
}

// LoopStats copies into dst, and returns, the counters each loop published
// at its last tick: LoopStats()[i] is loop i's.
func (s *Server) LoopStats(dst []Stats) []Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(dst[:0], s.published...)
}

// Loop is the per-loop half of the core: its file cache, clock, counters and
// free connections. Only the loop's thread touches it.
type Loop struct {
	srv   *Server
	id    int
	Stats Stats

	cache    fileCache
	date     dateCache
	now      time.Time // the loop's clock, set by Tick
	sec      int64
	draining bool

	// free holds closed Conns for reuse, up to the most that were open at
	// once in this minute or the last (keepFree), so that a wave of
	// connections after another reuses the first one's instead of
	// allocating its own beside them while they wait for the GC: at
	// 10,000 connections that was a second set of Conns on the heap at the
	// peak.
	free     []*Conn
	open     int // Conns between NewConn and FreeConn
	openHigh [2]int
	minute   int64
	freeBufs int // cap(in)+cap(out)+cap(held) of the Conns in free
	pathBuf  []byte
	keyBuf   []byte
	// req is the request being served. A Conn parses a head into it and
	// is done with it before the loop serves any other (a request that
	// waits is parsed again from its held head when it resumes), so one
	// per loop serves every Conn, and no Conn carries a Request of its own.
	req     Request
	logBuf  []byte
	logTime []byte

	outs      outSlab    // the Conns' out buffers while a response is under way (outslab.go)
	spareSegs [][]seg    // segs arrays idle Conns put away (Conn.putAway)
	spareVecs [][][]byte // vec arrays likewise, cleared

	boundarySeq uint64 // the last multipart boundary (multipart.go)
	partBuf     []byte // room to measure multipart part headers

	fs      fsState              // file-system operations (fsop.go)
	pages   []*File              // by errorPage.slot: the File each page's last load found, held (errorpage.go)
	box     mailbox              // work posted by CGI goroutines and helpers
	ready   []*Conn              // RunPosted's answer
	spareQ  []func()             // RunPosted's other queue
	jobs    map[*cgiJob]struct{} // scripts not yet reaped, attached to a Conn or not
	scratch []byte               // room to decode a chunked body that is dropped (made on first use)
}

// NewLoop makes loop id's core state.
func (s *Server) NewLoop(id int) *Loop {
	l := &Loop{srv: s, id: id, pathBuf: make([]byte, 0, 256), keyBuf: make([]byte, 0, 256), pages: make([]*File, len(s.pageSlots))}
	l.cache.init(l, s.root, &s.Config, &l.Stats)
	if s.cgiRoot >= 0 {
		l.jobs = make(map[*cgiJob]struct{})
	}
	s.mu.Lock()
	for len(s.published) <= id {
		s.published = append(s.published, Stats{})
	}
	s.mu.Unlock()
	l.Tick(time.Now())
	return l
}

// Now is the loop's clock as of its last Tick.
func (l *Loop) Now() time.Time { return l.now }

// Tick sets the loop's clock; call it once per pass of the event loop.
// When the second changes it re-renders the Date line, publishes the
// counters and hands the access log buffer to its writer, and reports true
// so that the backend can run its once-a-second work (timeouts).
func (l *Loop) Tick(now time.Time) bool {
	l.now = now
	if !l.date.set(now) {
		return false
	}
	l.sec = now.Unix()
	if m := l.sec / 60; m != l.minute {
		last := l.openHigh[0]
		if m != l.minute+1 {
			last = 0 // the clock jumped: no minute before this one was seen
		}
		l.minute, l.openHigh = m, [2]int{l.open, last}
		if k := l.keepFree(); len(l.free) > k {
			for _, c := range l.free[k:] {
				l.freeBufs -= c.keptBytes()
			}
			clear(l.free[k:])
			l.free = l.free[:k]
		}
	}
	l.cache.expire(l.sec - int64(l.srv.Config.CacheInactive/time.Second))
	l.warmPages()
	for j := range l.jobs {
		// A script whose answer is complete but that has not exited is
		// still held to its deadline; a Conn's own is checked by
		// CheckTimeout, which can still answer 504.
		if j.c == nil && !now.Before(j.deadline) {
			j.kill()
		}
	}
	l.Publish()
	if l.srv.log != nil {
		l.logTime = now.AppendFormat(l.logTime[:0], "02/Jan/2006:15:04:05 -0700")
		if len(l.logBuf) > 0 {
			l.handLog()
		}
	}
	return true
}

// Publish copies the counters where Server.Stats reads them.
func (l *Loop) Publish() {
	l.Stats.FS.InFlight, l.Stats.FS.Waiting = uint64(l.fs.inflight), uint64(l.fs.waiting)
	l.Stats.FS.Queued = uint64(max(l.fs.queued.Load(), 0))
	l.srv.mu.Lock()
	l.srv.published[l.id] = l.Stats
	l.srv.mu.Unlock()
}

// Retire starts the drain that comes before a shutdown (--drain-delay,
// while a balancer takes the server out of rotation): the loops go on
// accepting and serving, but every response from now on says
// Connection: close and its connection is closed once it is sent, so
// that a client's pool moves to new connections instead of being cut
// under it at the shutdown; and a keep-alive connection that stays idle
// for drainIdle is closed meanwhile, while a client that raced the close
// with a request can still retry it on a new connection, which the
// listeners accept (RFC 9112 §9.5, §9.3.1). By the end of a drain of
// twice drainIdle, the shutdown (Loop.Drain) finds no idle keep-alive
// connection to close under its client. The decisions are the core's
// (Conn.serve, Conn.CheckTimeout); a backend carries them out as ever.
// Any goroutine may call it, more than once.
func (s *Server) Retire() { s.retiring.Store(true) }

// Retiring reports whether Retire was called. A backend whose listeners
// defer accept (TCP_DEFER_ACCEPT) turns that off on its next tick, so
// that by the shutdown a client's connection is in the accept queue from
// its handshake on, where the loop takes it before it closes the
// listener, rather than held by the kernel until its first bytes come
// and reset with the listener.
func (s *Server) Retiring() bool { return s.retiring.Load() }

// Drain makes every later response close its connection: the server is
// shutting down. The first loop's call sets the server's ExitDeadline.
func (l *Loop) Drain() {
	l.draining = true
	s := l.srv
	s.mu.Lock()
	if s.exitBy.IsZero() {
		s.exitBy = time.Now().Add(s.Config.ShutdownTimeout + ShutdownGrace)
	}
	s.mu.Unlock()
}

// NewConn returns a connection in its initial state: reading, or proxy
// when the server expects a PROXY header (closing at once when remote may
// not send one).
func (l *Loop) NewConn(remote netip.AddrPort) *Conn {
	var c *Conn
	if n := len(l.free); n > 0 {
		c, l.free = l.free[n-1], l.free[:n-1]
		l.freeBufs -= c.keptBytes()
	} else {
		c = &Conn{l: l}
	}
	l.open++
	l.openHigh[0] = max(l.openHigh[0], l.open)
	l.Stats.ConnsPeak = max(l.Stats.ConnsPeak, int64(l.open))
	c.Remote = remote
	c.active = l.now
	if l.srv.Config.ProxyProtocol {
		c.startProxy()
	}
	return c
}

// FreeConn takes back a closed connection for reuse (keepFree). Buffers
// that grew large are dropped so that one burst does not pin memory for
// good.
func (l *Loop) FreeConn(c *Conn) {
	l.Stats.BufBytes -= int64(c.bufs)
	c.reset()
	l.open--
	if len(l.free) >= l.keepFree() {
		return
	}
	// A kept Conn keeps its buffers while they are small and the kept
	// buffers of the list stay within freeBufMax: however large the
	// heads or answers of the clients that came before, what the list
	// holds beyond its Conns is bounded.
	bufs := [3]*[]byte{&c.in, &c.out}
	if c.rare != nil {
		bufs[2] = &c.rare.held
	}
	for _, b := range bufs {
		if b == nil {
			continue
		}
		if n := cap(*b); n > keepBufMax || l.freeBufs+n > freeBufMax {
			*b = nil
		}
		l.freeBufs += cap(*b)
	}
	l.free = append(l.free, c)
}

// keptBytes is what c's buffers hold: cap(in)+cap(out)+cap(held).
func (c *Conn) keptBytes() int { return cap(c.in) + cap(c.out) + cap(c.heldHead()) }

// minFree is how many closed Conns are kept at least.
const minFree = 4096

// keepBufMax is the largest buffer a kept Conn keeps, and freeBufMax what
// the free list's buffers may add up to.
const (
	keepBufMax = 8 << 10
	freeBufMax = 16 << 20
)

// keepFree is how many closed Conns the free list keeps: as many as were
// open at once in this minute or the last, less those open now, and at
// least minFree. A burst's Conns go to the GC a minute or two after it.
func (l *Loop) keepFree() int {
	return max(minFree, max(l.openHigh[0], l.openHigh[1])-l.open)
}

// Close lands what was posted and not run yet (a load's File goes into
// the cache, to be closed with it), kills the CGI scripts still running
// (their goroutines reap them), drops the cache, flushes the log and
// publishes the final counters. An operation that lands later has its
// files closed where it lands (fsOp.discard). Call it on the loop's
// thread after every connection is freed.
//
// The cache's files are closed off the loop's thread (Server.closeLater):
// closing a file on FUSE sends its daemon a FLUSH and waits for the
// answer, so one cached file of a paused daemon would hold the loop's
// teardown, and the whole exit, for as long as the daemon sleeps.
func (l *Loop) Close() {
	for _, f := range l.box.close() {
		f()
	}
	for j := range l.jobs {
		j.kill()
		j.closeStdin()
	}
	l.cache.shutting = true
	l.cache.close()
	for i, f := range l.pages {
		if f != nil {
			l.pages[i] = nil
			l.cache.release(f)
		}
	}
	l.outs.close(l.sys())
	l.srv.closeLater(l.cache.late)
	l.cache.late = nil
	if l.srv.log != nil && len(l.logBuf) > 0 {
		l.handLog()
	}
	l.Publish()
}

// closeRoots closes the roots that are open (>= 0).
func closeRoots(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			closeFD(fd)
		}
	}
}
