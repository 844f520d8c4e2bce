package core

import (
	"strconv"
	"time"
)

// entryKind says what a cached path answers with.
type entryKind uint8

const (
	kindFile     entryKind = iota // a regular file: 200 with its body
	kindRedirect                  // a directory named without its slash: 301 to the slash form
	kindNoIndex                   // a directory without index.html: 403
	kindListing                   // a directory without index.html, with --autoindex: its listing
	kindError                     // a path that answers an error (404, 403): kept for the second it was found in
)

// File is one cached answer for a path: an open file with its pre-built
// header fields, or a redirect. It is owned by one loop's cache; refs counts
// the connections still sending from fd, so an evicted or replaced entry is
// closed only when the last of them is done.
type File struct {
	key  string // cleaned request path, "sub/" for a directory request
	path string // what was opened, relative to the root ("sub/index.html")
	kind entryKind
	fd   int
	info fileInfo
	body []byte // the whole body when kept in memory, else nil
	// mapped: body is an anonymous mapping (readBody), unmapped with the
	// last reference, when no queued response can still point into it.
	mapped bool
	// view: a read-only shared mapping of the file's info.size bytes
	// (Conn.BodyView), made on a backend's first use, unmapped with the last
	// reference. Only the kernel reads it (a send from it), never Go code:
	// a page past a truncated file's end faults with SIGBUS in user space,
	// but with EFAULT inside a syscall's copy.
	view []byte
	// local: fd is on a local mount (mounts_linux.go), which the loop may
	// call into; else the fd is closed by a helper and the body is never
	// sent by a call on the loop that may read the file.
	local bool

	head       []byte    // 200 fields: Content-Type … Accept-Ranges, each ending CRLF
	ctypeLine  []byte    // "Content-Type: …\r\n"
	encLine    []byte    // "Content-Encoding: br\r\n" for a sidecar, else empty
	validators []byte    // what a 304 repeats (RFC 9110 §15.4.5): Last-Modified, ETag, and Vary, Cache-Control and the --header fields when sent
	lastMod    []byte    // the Last-Modified value, inside validators
	etag       []byte    // `"5f3a…-5dc"`, as nginx builds it from mtime and size; a sidecar's ends "-br", "-zstd" or "-gzip"
	location   []byte    // kindRedirect: the Location value
	vary       bool      // responses carry Vary: Accept-Encoding (the file has a sidecar, or is one)
	side       *sidecars // --precompressed: the file's .br, .zst and .gz, loaded with it; nil without the flag

	status  int   // kindError: the status
	refs    int   // holders: the cache itself while cached, plus each sender
	cached  bool  // in the map and LRU list
	checked int64 // unix second its file was last seen as it is: the load, or the start of the last stat that found it unchanged
	used    int64 // unix second of the last request for it, for Config.CacheInactive
	// revalidating: a stat of it is in flight (fsop.go); it is served
	// as it is meanwhile, for as long as checked is recent (cacheValid).
	revalidating bool
	tried        int64 // unix second the last revalidation was started, or tried
	prev         *File // LRU list, most recently used first
	next         *File
}

// Fd is the open file descriptor to send the body from.
func (f *File) Fd() int { return f.fd }

// Size is the file's size when it was opened (or last re-stat'd).
func (f *File) Size() int64 { return f.info.size }

// Local reports whether the file is on a local mount (mounts_linux.go).
// When it is not, a backend must not make a call on its loop that may
// read the file (a sendfile, a send from its mapping): on FUSE or NFS a
// page not in the cache is read from the daemon or the server, which may
// never answer. It reads the body off the loop instead.
func (f *File) Local() bool { return f.local }

// fileCache maps request paths to open files with pre-built headers. It
// belongs to one loop and is never locked. A hit makes no system call on
// the loop's thread; an entry is re-stat'ed at most once per second, as
// nginx's open_file_cache_valid: on a helper while the entry is served
// (fsop.go), or inline, before it is served, on a loop that runs
// everything inline (the blocking backend). An entry is served while its
// stat is in flight only if the file was last seen as it is within
// cacheValid; older (a file left idle, or a stat that does not come back
// from a hung file system), it is dropped and the request loads the file
// again, off the loop as any miss: a file deleted or replaced while
// nobody asked for it is never answered from the past. An entry no
// request used for Config.CacheInactive is closed (expire).
//
// The errors kept (kindError: a 404 or 403 for the rest of its second)
// have an LRU list of their own, bounded apart (maxErrors): they hold no
// fd, and a stream of distinct missing paths, which a scanner sends, must
// not push the files, listings and redirects out of the cache, each of
// which costs calls to load again.
type fileCache struct {
	l       *Loop
	root    int
	cfg     *Config
	stats   *Stats
	m       map[string]*File
	lru     File // sentinel: lru.next is the most recent, lru.prev the least; every kind but kindError
	n       int
	bytes   int64 // body bytes held in memory
	errs    File  // sentinel of the kindError entries' list, as lru
	nerrs   int   // entries in errs
	maxErrs int   // maxErrors(CacheEntries)
	scratch []byte
	// shutting: the loop's Close is dropping every entry, and release
	// collects the fds in late instead of closing them (Loop.Close says
	// why).
	shutting bool
	late     []int
}

// maxErrors is how many errors a cache of entries keeps: a quarter of
// its entries, at least one, at most 1024. An error is kept so that a
// flood of requests for one missing path shares one lookup in its second;
// a few hundred such paths at once is already an attack more than a
// mistake, and a scan of distinct paths gains nothing from any number.
// They cost only memory (a File and its key each, for at most 1024 of
// them a loop), and a cache given few entries keeps few errors too.
func maxErrors(entries int) int { return min(max(entries/4, 1), 1024) }

func (c *fileCache) init(l *Loop, root int, cfg *Config, stats *Stats) {
	c.l, c.root, c.cfg, c.stats = l, root, cfg, stats
	c.m = make(map[string]*File)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.errs.next, c.errs.prev = &c.errs, &c.errs
	c.maxErrs = maxErrors(cfg.CacheEntries)
}

// get returns the entry for key, holding a reference the caller gives
// back with release, or the error status kept for it; ok is false on a
// miss. now is the loop's second.
func (c *fileCache) get(key []byte, now int64) (f *File, status int, ok bool) {
	f = c.m[string(key)]
	if f == nil {
		return nil, 0, false
	}
	if f.checked != now && !c.current(f, now) {
		c.remove(f)
		return nil, 0, false
	}
	c.stats.CacheHits++
	c.touch(f)
	f.used = now
	if f.kind == kindError {
		return nil, f.status, true
	}
	f.refs++
	return f, 0, true
}

// cacheValid is how many seconds after its file was last seen as it is
// an entry may still be served while its re-stat is in flight. Past it,
// the entry is dropped and loaded again: the answer waits for the file
// system, as a miss does, rather than come from the past.
const cacheValid = 1

// current is the once-a-second check of an entry: an error kept expires;
// a file is re-stat'ed, inline or by a revalidation that serves it
// meanwhile while it was seen recently enough (cacheValid).
func (c *fileCache) current(f *File, now int64) bool {
	switch {
	case f.kind == kindError:
		return false
	case c.l.fsMode() == fsInline:
		return c.stillValid(f, now)
	case now-f.checked > cacheValid:
		return false
	case !f.revalidating && f.tried != now:
		// Once a second: a stat that could not start (the helpers'
		// queue full) is not tried again on every hit.
		f.tried = now
		c.l.revalidate(f)
	}
	return true
}

func (c *fileCache) stillValid(f *File, now int64) bool {
	ld := c.l.loopLoader(c.root, fsInline)
	if ok, _ := ld.unchanged(f.path, f.kind, &f.info, f.side); !ok {
		return false
	}
	f.checked = now
	return true
}

// expire closes the entries no request used since second before, from
// the least recently used on: a file deleted on disk is not held open
// for good by a loop that served it once.
func (c *fileCache) expire(before int64) {
	for _, head := range [...]*File{&c.lru, &c.errs} {
		for f := head.prev; f != head && f.used < before; f = head.prev {
			c.remove(f)
		}
	}
}

// sameAs reports whether a fresh stat shows the entry's file unchanged. A
// listing's size is its HTML's, so only the directory's identity and mtime
// (which changes when an entry is added, removed or renamed) count.
func sameAs(kind entryKind, was, fi *fileInfo) bool {
	if kind == kindListing {
		return fi.ino == was.ino && fi.dev == was.dev && fi.mtime.Equal(was.mtime)
	}
	return fi.same(was)
}

// release gives back a reference taken by get. The last one closes the
// file and gives back the file's own references to its sidecars.
func (c *fileCache) release(f *File) {
	f.refs--
	if f.refs > 0 {
		return
	}
	if f.fd >= 0 {
		switch {
		case c.shutting:
			c.late = append(c.late, f.fd)
		case f.local:
			c.sys().close(f.fd)
		default:
			c.l.closeOff(f.fd)
		}
		f.fd = -1
	}
	if f.mapped {
		c.sys().munmap(f.body)
		f.body, f.mapped = nil, false
	}
	if f.view != nil {
		c.sys().munmap(f.view)
		f.view = nil
	}
	if s := f.side; s != nil {
		f.side = nil
		for _, a := range s.rep {
			if a != nil {
				c.release(a)
			}
		}
	}
}

// HoldFile takes a reference to f for the backend, on the loop's thread:
// f's fd stays open until ReleaseFile, even if the connection that was
// sending from it is closed and the cache drops it meanwhile. epoll holds
// the file this way while a helper reads a range of it ahead.
func (l *Loop) HoldFile(f *File) { f.refs++ }

// ReleaseFile gives back HoldFile's reference, on the loop's thread.
func (l *Loop) ReleaseFile(f *File) { l.cache.release(f) }

func (f *File) contentType() string {
	if f.kind == kindListing {
		return "text/html; charset=utf-8"
	}
	return contentType(f.path)
}

// headFields are what a File's pre-built header says besides its stat.
type headFields struct {
	ctype        string
	coding       *coding // the sidecar's content coding; nil for the file itself
	vary         bool
	cacheControl string
	fields       string // the --header rules' lines for the file (headerLines)
	ranges       bool   // Accept-Ranges: bytes, else none
}

// headFor is what f's header says under the configuration; sidecar is
// the coding when f is a sidecar of a file named like src.
func (ld *loader) headFor(f *File, sidecar *coding) headFields {
	served := f.path // a directory's index.html, else the key's own file
	if f.kind == kindListing {
		served = f.key
	}
	return headFields{
		ctype:        f.contentType(),
		coding:       sidecar,
		vary:         sidecar != nil || f.side != nil && f.side.any,
		cacheControl: ld.cfg.cacheControlFor(f.path),
		fields:       headerLines(ld.cfg.Headers, f.key, served),
		ranges:       ld.cfg.MaxRanges >= 0,
	}
}

func (f *File) buildHead(h headFields) {
	mt := f.info.mtime.UTC()
	f.etag = append(f.etag, '"')
	f.etag = strconv.AppendInt(f.etag, mt.Unix(), 16)
	f.etag = append(f.etag, '-')
	f.etag = strconv.AppendInt(f.etag, f.info.size, 16)
	if h.coding != nil {
		// Distinct from the file's own ETag even if the sidecar had the
		// same mtime and size: each representation has its own.
		f.etag = append(append(f.etag, '-'), h.coding.name...)
		f.encLine = append(append(append(f.encLine, "Content-Encoding: "...), h.coding.name...), "\r\n"...)
	}
	f.etag = append(f.etag, '"')
	f.vary = h.vary

	f.ctypeLine = append(append(append(f.ctypeLine, "Content-Type: "...), h.ctype...), "\r\n"...)
	f.validators = append(f.validators, "Last-Modified: "...)
	f.validators = mt.Truncate(time.Second).AppendFormat(f.validators, httpTimeFormat)
	f.lastMod = f.validators[len("Last-Modified: "):len(f.validators):len(f.validators)]
	f.validators = append(append(append(f.validators, "\r\nETag: "...), f.etag...), "\r\n"...)
	if h.vary {
		f.validators = append(f.validators, varyLine...)
	}
	if h.cacheControl != "" {
		f.validators = append(append(append(f.validators, "Cache-Control: "...), h.cacheControl...), "\r\n"...)
	}
	f.validators = append(f.validators, h.fields...)

	f.head = append(f.head, f.ctypeLine...)
	f.head = append(f.head, f.encLine...)
	f.head = append(f.head, "Content-Length: "...)
	f.head = strconv.AppendInt(f.head, f.info.size, 10)
	f.head = append(f.head, "\r\n"...)
	f.head = append(f.head, f.validators...)
	f.head = append(f.head, acceptRanges(h.ranges)...)
}

// acceptRanges is the Accept-Ranges line (RFC 9110 §14.3).
func acceptRanges(on bool) string {
	if on {
		return "Accept-Ranges: bytes\r\n"
	}
	return "Accept-Ranges: none\r\n"
}

const varyLine = "Vary: Accept-Encoding\r\n"

// insert keeps f, evicting the least recently used entries of its list
// until it fits. A file, listing or redirect must fit its fds (its own
// and its sidecars') and bytes: c.n counts open files, so that
// --precompressed cannot hold four fds per entry. An error evicts only
// errors, beyond maxErrs.
func (c *fileCache) insert(f *File) {
	head := &c.lru
	if f.kind == kindError {
		head = &c.errs
		for c.nerrs >= c.maxErrs {
			c.remove(c.errs.prev)
		}
		c.nerrs++
	} else {
		for c.n > 0 && (c.n+f.fds() > c.cfg.CacheEntries || c.bytes+f.memBytes() > c.cfg.CacheBytes) {
			c.remove(c.lru.prev)
		}
		c.n += f.fds()
		c.bytes += f.memBytes()
	}
	f.cached = true
	f.refs++ // the cache's own
	c.m[f.key] = f
	f.prev, f.next = head, head.next
	f.next.prev, head.next = f, f
}

func (c *fileCache) touch(f *File) {
	head := &c.lru
	if f.kind == kindError {
		head = &c.errs
	}
	if head.next == f {
		return
	}
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = head, head.next
	f.next.prev, head.next = f, f
}

func (c *fileCache) remove(f *File) {
	if !f.cached {
		return
	}
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = nil, nil
	delete(c.m, f.key)
	f.cached = false
	if f.kind == kindError {
		c.nerrs--
	} else {
		c.n -= f.fds()
		c.bytes -= f.memBytes()
	}
	c.release(f)
}

// close drops every entry; files still being sent close when released.
func (c *fileCache) close() {
	for _, head := range [...]*File{&c.lru, &c.errs} {
		for head.next != head {
			c.remove(head.next)
		}
	}
}

// fds is how many files f holds open: its own and its sidecars'.
func (f *File) fds() int {
	n := 1
	if f.side != nil {
		for _, a := range f.side.rep {
			if a != nil {
				n++
			}
		}
	}
	return n
}

// memBytes is what f holds in memory: its body and its sidecars' bodies.
func (f *File) memBytes() int64 {
	n := int64(len(f.body))
	if f.side != nil {
		for _, a := range f.side.rep {
			if a != nil {
				n += int64(len(a.body))
			}
		}
	}
	return n
}
