package core

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
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
// a timeout). So each loop loads its pages at start and, once a second,
// looks them up (Tick: warmPages), which keeps them from expiring or
// being pushed out of the cache, and loads again, off the loop, one that
// changed or was pushed out. An error whose page is not in the cache at
// that moment (it is being loaded again) gets the built-in page; so does
// every error whose page is missing, unreadable or not a regular file,
// which is logged once per code to the error log (Config.ErrorLog: stderr).

// ErrorPageCodes are the statuses an --error-page may be given for.
var ErrorPageCodes = []int{403, 404, 405, 408, 413, 414, 416, 431, 500, 502, 503, 504}

// errorPage is one configured page. Immutable but for logged.
type errorPage struct {
	code   int
	path   string // as configured: "/404.html"
	key    []byte // its cache key: "404.html"
	logged atomic.Bool
}

// openErrorPages checks Config.ErrorPages: codes that have a page, URL
// paths of files inside the root. Whether a page can be read is learnt
// by each loop as it loads it.
func openErrorPages(pages map[int]string) (map[int]*errorPage, error) {
	if len(pages) == 0 {
		return nil, nil
	}
	m := make(map[int]*errorPage, len(pages))
	for code, path := range pages {
		if !slices.Contains(ErrorPageCodes, code) {
			return nil, fmt.Errorf("--error-page %d=%s: %d has no error page; give one of %v", code, path, code, ErrorPageCodes)
		}
		rel, dir, status := resolvePath(nil, []byte(path))
		if status != 0 || dir {
			return nil, fmt.Errorf("--error-page %d=%s: give the URL path of a file inside --dir, such as /%d.html (not hidden, not a directory)", code, path, code)
		}
		m[code] = &errorPage{code: code, path: path, key: append([]byte(nil), rel...)}
	}
	return m, nil
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

// loadPage looks p up in the cache and, on a miss, loads it as any miss
// is loaded (inline on the blocking backend, probed on epoll, else off
// the loop: nil this time, and the load lands in the cache).
func (l *Loop) loadPage(p *errorPage) *File {
	f, status, hit := l.cache.get(p.key, l.sec)
	if !hit {
		var op *fsOp
		if f, status, op = l.miss(p.key, false, false); op != nil {
			return nil
		}
	}
	if f != nil && f.kind != kindFile {
		l.cache.release(f)
		f, status = nil, 403 // a directory
	}
	if f == nil && status != 0 && p.logged.CompareAndSwap(false, true) {
		// Once per code and process, through the error log's writer
		// (errlog.go): never on the loop.
		l.srv.elog.put(fmt.Sprintf("twinloop: --error-page %d=%s cannot be served (%d %s); the built-in page is sent instead (logged once)\n",
			p.code, p.path, status, http.StatusText(status)))
	}
	return f
}

// warmPages looks every page up once a second (Tick): a page used or not
// stays in the cache, re-stat'ed, and one that changed or was pushed out
// is loaded again before an error needs it.
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
