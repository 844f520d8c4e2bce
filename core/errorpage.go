package core

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// --error-page CODE=/PATH: an error is answered with a file's bytes, its
// Content-Type, and the error's status, fields (Allow, Retry-After,
// Content-Range) and connection handling (a 400-class close stays a
// close), never a redirect. The page is a file of the loop's cache like
// any other: loaded off the loop, kept (small bodies in memory),
// re-stat'ed once a second while used; its own validators and --header
// rules are not sent (an error is not the page's representation). HEAD
// gets the header alone.
//
// An error must not wait for the disk, and most cannot (a malformed head,
// a timeout). So each loop loads its pages at start and holds the File
// each load of a page's path finds (Loop.pages, held by keep whether or
// not the cache keeps it: --no-file-cache, or a cache too small to keep
// the pages beside the files served, pushes it out). Once a second
// (Tick: warmPages) it looks each page up: a cached one is re-stat'ed as
// any entry; one not cached is loaded again, and the held File is served
// meanwhile while it was seen within cacheValid, as a cached entry is
// while its re-stat is in flight. Answered from the cache alone, a page
// whose load goes off the loop (a cold file, a mount that is not local;
// every load on io_uring before issue 37) was never there when the cache
// could not keep it. An error gets the built-in
// page when its page's file is missing, unreadable or not a regular file,
// or has not loaded for longer than cacheValid (a hung file system); each
// is logged once per code to the error log (Config.ErrorLog: stderr).

// ErrorPageCodes are the statuses an --error-page may be given for.
var ErrorPageCodes = []int{403, 404, 405, 408, 413, 414, 416, 431, 500, 502, 503, 504}

// errorPage is one configured page. Immutable but for logged.
type errorPage struct {
	code   int
	path   string // as configured: "/404.html"
	key    []byte // its cache key: "404.html"
	slot   int    // its File's index in Loop.pages: codes given one path share it
	logged atomic.Bool
}

// openErrorPages checks Config.ErrorPages: codes that have a page, URL
// paths of files inside the root; slots is each page's cache key's slot
// in Loop.pages. Whether a page can be read is learnt by each loop as it
// loads it.
func openErrorPages(pages map[int]string) (m map[int]*errorPage, slots map[string]int, err error) {
	if len(pages) == 0 {
		return nil, nil, nil
	}
	m, slots = make(map[int]*errorPage, len(pages)), make(map[string]int, len(pages))
	for code, path := range pages {
		if !slices.Contains(ErrorPageCodes, code) {
			return nil, nil, fmt.Errorf("--error-page %d=%s: %d has no error page; give one of %v", code, path, code, ErrorPageCodes)
		}
		rel, dir, status := resolvePath(nil, []byte(path))
		if status != 0 || dir {
			return nil, nil, fmt.Errorf("--error-page %d=%s: give the URL path of a file inside --dir, such as /%d.html (not hidden, not a directory)", code, path, code)
		}
		slot, ok := slots[string(rel)]
		if !ok {
			slot = len(slots)
			slots[string(rel)] = slot
		}
		m[code] = &errorPage{code: code, path: path, key: append([]byte(nil), rel...), slot: slot}
	}
	return m, slots, nil
}

// page is status's page, holding a reference the caller gives back, or
// nil: none is configured, or it is not in the cache now.
func (l *Loop) page(status int) *File {
	if len(l.srv.pages) == 0 {
		return nil
	}
	if p := l.srv.pages[status]; p != nil {
		return l.loadPage(p)
	}
	return nil
}

// loadPage looks p up in the cache and, on a miss, serves the File the
// loop holds for it if that was loaded this second, else loads it as any
// miss is loaded (inline on the blocking backend, else probed on the
// loop, and off it when cold, the held File served meanwhile: heldPage).
func (l *Loop) loadPage(p *errorPage) *File {
	f, status, hit := l.cache.get(p.key, l.sec)
	if !hit {
		held := l.pages[p.slot]
		if held != nil && held.checked == l.sec {
			held.refs++
			return held
		}
		var op *fsOp
		if f, status, op = l.miss(p.key, false, false); op != nil {
			return l.heldPage(p, held, op)
		}
	}
	if f != nil && f.kind != kindFile {
		l.cache.release(f)
		f, status = nil, 403 // a directory
	}
	if f == nil && status != 0 {
		l.pageLost(p, fmt.Sprintf("%d %s", status, http.StatusText(status)))
	}
	return f
}

// heldPage is p's held File, with a reference for the caller, while op
// loads p again, if it was seen within cacheValid; else nil, logged once
// the load has been out for longer than that.
func (l *Loop) heldPage(p *errorPage, held *File, op *fsOp) *File {
	if held != nil && l.sec-held.checked <= cacheValid {
		held.refs++
		return held
	}
	if d := l.now.Sub(op.start); d > cacheValid*time.Second {
		l.pageLost(p, fmt.Sprintf("its file has not loaded in %v: a slow or hung file system", d.Truncate(time.Second)))
	}
	return nil
}

// pageLost logs, once per code and process, why p's page cannot be
// served, through the error log's writer (errlog.go): never on the loop.
func (l *Loop) pageLost(p *errorPage, why string) {
	if p.logged.CompareAndSwap(false, true) {
		l.srv.elog.put(fmt.Sprintf("twinloop: --error-page %d=%s cannot be served (%s); the built-in page is sent instead (logged once)\n",
			p.code, p.path, why))
	}
}

// holdPage makes f, which a load of key found (nil: an error), the
// loop's File for the page of that path, if any, in place of the one
// held before (keep).
func (l *Loop) holdPage(key string, f *File) {
	slot, ok := l.srv.pageSlots[key]
	if !ok {
		return
	}
	old := l.pages[slot]
	l.pages[slot] = nil
	if f != nil && f.kind == kindFile {
		f.refs++ // the loop's
		l.pages[slot] = f
	}
	if old != nil {
		l.cache.release(old)
	}
}

// unholdPage lets a held page go once a re-stat found its file changed
// or gone (land): the next error loads it again.
func (l *Loop) unholdPage(f *File) {
	for i, h := range l.pages {
		if h == f {
			l.pages[i] = nil
			l.cache.release(f)
		}
	}
}

// warmPages looks every page up once a second (Tick): a page used or not
// stays cached and re-stat'ed, or held, and one that changed or is not
// cached is loaded again before an error needs it.
func (l *Loop) warmPages() {
	for _, p := range l.srv.pages {
		if f := l.loadPage(p); f != nil {
			l.cache.release(f)
		}
	}
}

// sendPage ends an error answer whose status line and own fields are in
// out with the page f, taking over the caller's reference to it.
func (c *Conn) sendPage(r *Request, status int, f *File) {
	c.out = append(c.out, f.ctypeLine...)
	c.out = append(c.out, "Content-Length: "...)
	c.out = strconv.AppendInt(c.out, f.info.size, 10)
	c.out = append(c.out, "\r\n"...)
	c.endHead(r)
	c.log(r, status, f.info.size)
	c.appendBody(f, 0, f.info.size, r != nil && r.Method == MethodHead)
}
