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

	head       []byte    // 200 fields: Content-Type … Accept-Ranges, each ending CRLF
	ctypeLine  []byte    // "Content-Type: …\r\n"
	encLine    []byte    // "Content-Encoding: br\r\n" for a sidecar, else empty
	validators []byte    // what a 304 repeats (RFC 9110 §15.4.5): Last-Modified, ETag, and Vary and Cache-Control when sent
	lastMod    []byte    // the Last-Modified value, inside validators
	etag       []byte    // `"5f3a…-5dc"`, as nginx builds it from mtime and size; a sidecar's ends "-br", "-zstd" or "-gzip"
	location   []byte    // kindRedirect: the Location value
	vary       bool      // responses carry Vary: Accept-Encoding (the file has a sidecar, or is one)
	side       *sidecars // --precompressed: the file's .br, .zst and .gz, loaded with it; nil without the flag

	refs    int   // holders: the cache itself while cached, plus each sender
	cached  bool  // in the map and LRU list
	checked int64 // unix second of the last stat
	prev    *File // LRU list, most recently used first
	next    *File
}

// Fd is the open file descriptor to send the body from.
func (f *File) Fd() int { return f.fd }

// fileCache maps request paths to open files with pre-built headers. It
// belongs to one loop and is never locked. A hit costs no syscall; an entry
// is re-stated at most once per second, so a file replaced on disk is seen
// within a second, as nginx's open_file_cache_valid.
type fileCache struct {
	root    int
	cfg     *Config
	stats   *Stats
	m       map[string]*File
	lru     File // sentinel: lru.next is the most recent, lru.prev the least
	n       int
	bytes   int64 // body bytes held in memory
	scratch []byte
}

func (c *fileCache) init(root int, cfg *Config, stats *Stats) {
	c.root, c.cfg, c.stats = root, cfg, stats
	c.m = make(map[string]*File)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
}

// get returns the entry for key, holding a reference the caller gives back
// with release, or the status to answer with. now is the loop's second.
func (c *fileCache) get(key []byte, dir bool, now int64) (*File, int) {
	if f := c.m[string(key)]; f != nil {
		if f.checked == now || c.stillValid(f, now) {
			c.stats.CacheHits++
			c.touch(f)
			f.refs++
			return f, 0
		}
		c.remove(f)
	}
	c.stats.CacheMiss++
	f, status := c.load(string(key), dir)
	if f == nil {
		return nil, status
	}
	f.checked = now
	f.refs++ // the caller's
	if !c.cfg.NoFileCache {
		c.insert(f)
	}
	return f, 0
}

func (c *fileCache) stillValid(f *File, now int64) bool {
	fi, err := c.statBeneath(f.path)
	if err != nil || !f.sameAs(&fi) || f.side != nil && !c.sidecarsUnchanged(f.side) {
		return false
	}
	f.checked = now
	return true
}

// sameAs reports whether a fresh stat shows the entry's file unchanged. A
// listing's size is its HTML's, so only the directory's identity and mtime
// (which changes when an entry is added, removed or renamed) count.
func (f *File) sameAs(fi *fileInfo) bool {
	if f.kind == kindListing {
		return fi.ino == f.info.ino && fi.dev == f.info.dev && fi.mtime.Equal(f.info.mtime)
	}
	return fi.same(&f.info)
}

// release gives back a reference taken by get. The last one closes the
// file and gives back the file's own references to its sidecars.
func (c *fileCache) release(f *File) {
	f.refs--
	if f.refs > 0 {
		return
	}
	if f.fd >= 0 {
		c.closeFile(f.fd)
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

// load opens key's file and builds its entry.
func (c *fileCache) load(key string, dir bool) (*File, int) {
	rel := key
	if dir && rel != "" {
		rel = rel[:len(rel)-1] // key keeps the slash to tell "sub" from "sub/"
	}
	fd, fi, err := c.openBeneath(rel)
	if err != nil {
		return nil, openStatus(err)
	}
	f := &File{key: key, path: rel, fd: fd, info: fi}
	switch {
	case fi.isDir() && !dir:
		c.closeFile(fd)
		f.fd, f.kind = -1, kindRedirect
		f.location = append(appendPathEscaped(append(f.location, '/'), []byte(rel)), '/')
		return f, 0
	case fi.isDir():
		idx := "index.html"
		if rel != "" {
			idx = rel + "/index.html"
		}
		ifd, ifi, err := c.openBeneath(idx)
		if err != nil {
			defer c.closeFile(fd)
			if s := openStatus(err); s != 404 {
				return nil, s
			}
			if c.cfg.AutoIndex {
				return c.listing(f, fd)
			}
			f.fd, f.kind = -1, kindNoIndex
			return f, 0
		}
		c.closeFile(fd)
		fd, fi = ifd, ifi
		f.path, f.fd, f.info = idx, fd, fi
		if !fi.isReg() {
			c.closeFile(fd)
			return nil, 403
		}
	case dir:
		c.closeFile(fd) // "file/": nginx answers 404 too
		return nil, 404
	case !fi.isReg():
		c.closeFile(fd) // FIFOs, devices and sockets are never served
		return nil, 403
	}
	if c.keepsInMemory(fi.size) {
		if err := c.readBody(f, fd, fi.size); err != nil {
			c.closeFile(fd)
			return nil, 500
		}
	}
	if c.cfg.Precompressed {
		c.loadSidecars(f)
	}
	f.buildHead(c.headFor(f, nil))
	return f, 0
}

func (c *fileCache) keepsInMemory(size int64) bool {
	switch c.cfg.Sendfile {
	case SendfileAlways:
		return false
	case SendfileNever:
		return size <= c.cfg.CacheBytes/4
	}
	return size <= c.cfg.MemBodyMax
}

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
	ranges       bool // Accept-Ranges: bytes, else none
}

// headFor is what f's header says under the configuration; sidecar is
// the coding when f is a sidecar of a file named like src.
func (c *fileCache) headFor(f *File, sidecar *coding) headFields {
	return headFields{
		ctype:        f.contentType(),
		coding:       sidecar,
		vary:         sidecar != nil || f.side != nil && f.side.any,
		cacheControl: c.cfg.cacheControlFor(f.path),
		ranges:       c.cfg.MaxRanges >= 0,
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

// insert keeps f, evicting the least recently used entries until its
// fds (its own and its sidecars') and bytes fit: c.n counts open files,
// so that --precompressed cannot hold four fds per entry.
func (c *fileCache) insert(f *File) {
	for c.n > 0 && (c.n+f.fds() > c.cfg.CacheEntries || c.bytes+f.memBytes() > c.cfg.CacheBytes) {
		c.remove(c.lru.prev)
	}
	f.cached = true
	f.refs++ // the cache's own
	c.m[f.key] = f
	c.n += f.fds()
	c.bytes += f.memBytes()
	f.prev, f.next = &c.lru, c.lru.next
	f.next.prev, c.lru.next = f, f
}

func (c *fileCache) touch(f *File) {
	if c.lru.next == f {
		return
	}
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = &c.lru, c.lru.next
	f.next.prev, c.lru.next = f, f
}

func (c *fileCache) remove(f *File) {
	if !f.cached {
		return
	}
	f.prev.next, f.next.prev = f.next, f.prev
	f.prev, f.next = nil, nil
	delete(c.m, f.key)
	f.cached = false
	c.n -= f.fds()
	c.bytes -= f.memBytes()
	c.release(f)
}

// close drops every entry; files still being sent close when released.
func (c *fileCache) close() {
	for c.lru.next != &c.lru {
		c.remove(c.lru.next)
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
