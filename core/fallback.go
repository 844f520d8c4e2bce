package core

import (
	"errors"
	"fmt"
)

// --fallback: an SPA's client-side routes. A GET or HEAD for a path that
// does not exist (a 404: no such file or directory, a file named as a
// directory, a parent that is a file) is answered with the fallback file
// and 200, as nginx's try_files $uri $uri/ /index.html does: its header
// (ETag, the --header rules of its own path), preconditions and ranges
// are the file's. What is not a 404 is unchanged: a file or a directory
// with its index, a directory without one (403, or its listing), a
// hidden path (403, so that a probe for /.env is not answered 200), a
// path that leaves the root (400, or 403 for a symlink), a CGI script's
// path, and every method but GET and HEAD.

// openFallback checks Config.Fallback at start: a regular file beneath
// the root, which a request may be answered with. Its key is returned.
func openFallback(root int, cfg *Config) ([]byte, error) {
	rel, dir, status := resolvePath(nil, []byte(cfg.Fallback))
	if status != 0 || dir {
		return nil, fmt.Errorf("--fallback %q: give the URL path of a file inside --dir, such as /index.html (not hidden, not a directory)", cfg.Fallback)
	}
	ld := loader{root: root, cfg: cfg, fs: helperFS{fc: DirectCalls{}, calls: new([NumSys]uint64), localRoot: -1}}
	fd, fi, err := ld.openBeneath(string(rel))
	if err == nil && fi.isDir() {
		err = errors.New("a directory")
	}
	if err != nil {
		return nil, fmt.Errorf("--fallback %q: %v (give a file that exists inside --dir %s, such as /index.html)", cfg.Fallback, err, cfg.Dir)
	}
	ld.fs.close(fd)
	return append([]byte(nil), rel...), nil
}

// onFallback reports whether op, the operation the request for key
// waited for, is the fallback file's load: the request's own path was
// missing a moment before (its 404 is not looked up again, which a
// cache that keeps nothing, --no-file-cache, would send back to the
// disk, and so on without end).
func (s *Server) onFallback(op *fsOp, key []byte) bool {
	return op != nil && op.kind == FSLoad && s.fallback != nil && op.key == string(s.fallback) && string(key) != string(s.fallback)
}

// fallback looks the fallback file up for a request whose path is
// missing: the entry, holding a reference, or the operation to wait for,
// or 404 when the file has gone since the start.
func (c *Conn) fallback(op *fsOp) (*File, int, *fsOp) {
	f, status, wait := c.lookup(c.l.srv.fallback, false, op)
	switch {
	case wait != nil:
	case f == nil:
		status = 404
	case f.kind != kindFile: // a directory now
		c.l.cache.release(f)
		f, status = nil, 404
	}
	return f, status, wait
}
