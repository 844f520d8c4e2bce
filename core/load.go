package core

import (
	"sync"

	"golang.org/x/sys/unix"
)

// A load is what a cache miss does: open the path beneath the root, stat
// it, read a small body, find index.html or build a listing, look for
// sidecars, and build the File with its header. It runs where the loop's
// mode puts it (fsop.go), always through a loader, which touches neither
// the loop's cache nor its Stats, so that it may run on a helper
// goroutine: it returns a File nobody holds yet, or a status.
//
// Its calls go through a fileSys: on the loop, made and counted there
// (loopFS; nowait for the probe), or on a helper, through the loop's
// FileCalls, counted in the operation (helperFS).

// fileSys makes a load's system calls. Errors are bare unix.Errno values,
// EINTR retried.
type fileSys interface {
	openat2(dirfd int, name string, how *unix.OpenHow) (int, error)
	// statx stats name beneath dirfd ("" with AT_EMPTY_PATH: dirfd).
	statx(dirfd int, name string, flags int, st *unix.Statx_t) error
	pread(fd int, p []byte, off int64) (int, error)
	close(fd int)
	getdents(fd int, buf []byte) (int, error)
	// mmap maps n bytes of anonymous memory for a body sent by reference
	// (readBody); munmap undoes it.
	mmap(n int) ([]byte, error)
	munmap(b []byte)
}

// loader runs one load or revalidation.
type loader struct {
	root   int
	cfg    *Config
	mounts *mountTable
	fs     fileSys
	nowait bool // fs is the probe: a call that would wait fails instead
	// what is the path the loader is working on, and elog where an
	// error the client cannot be told more of is logged (status); nil
	// logs nothing.
	what string
	elog *errorLog
}

// needsDisk is the status of a probe that found a call would wait for the
// disk: everything it opened is closed again, and the load is handed to a
// helper.
const needsDisk = -1

// status is the answer for err: needsDisk when the probe could not go on
// without waiting (EAGAIN; EOPNOTSUPP and EINVAL where a file system or
// kernel lacks RWF_NOWAIT or RESOLVE_CACHED, whose helper does without;
// EXDEV, a path that leaves the root's mount or the root, which the
// helper follows or refuses).
// An error a client cannot be told more of is logged (logged, errlog.go).
func (ld *loader) status(err error) int {
	if ld.nowait && (err == unix.EAGAIN || err == unix.EOPNOTSUPP || err == unix.EINVAL || err == unix.EXDEV) {
		return needsDisk
	}
	s := openStatus(err)
	if logged(err, s) {
		ld.elog.fsError(ld.what, err, s)
	}
	return s
}

// load opens key's file and builds its entry.
func (ld *loader) load(key string, dir bool) (*File, int) {
	rel := key
	if dir && rel != "" {
		rel = rel[:len(rel)-1] // key keeps the slash to tell "sub" from "sub/"
	}
	ld.what = key
	fd, fi, err := ld.openBeneath(rel)
	if err != nil {
		return nil, ld.status(err)
	}
	f := &File{key: key, path: rel, fd: fd, info: fi}
	switch {
	case fi.isDir() && !dir:
		ld.fs.close(fd)
		f.fd, f.kind = -1, kindRedirect
		f.location = append(appendPathEscaped(append(f.location, '/'), []byte(rel)), '/')
		return f, 0
	case fi.isDir():
		idx := "index.html"
		if rel != "" {
			idx = rel + "/index.html"
		}
		ifd, ifi, err := ld.openBeneath(idx)
		if err != nil {
			defer ld.fs.close(fd)
			if s := ld.status(err); s != 404 {
				return nil, s
			}
			if ld.cfg.AutoIndex {
				return ld.listing(f, fd)
			}
			f.fd, f.kind = -1, kindNoIndex
			return f, 0
		}
		ld.fs.close(fd)
		f.path, f.fd, f.info = idx, ifd, ifi
		if !ifi.isReg() {
			ld.fs.close(ifd)
			return nil, 403
		}
	case dir:
		ld.fs.close(fd) // "file/": nginx answers 404 too
		return nil, 404
	}
	if ld.keepsInMemory(f.info.size) {
		if err := ld.readBody(f, f.fd, f.info.size); err != nil {
			ld.fs.close(f.fd)
			return nil, ld.status(err)
		}
	}
	if ld.cfg.Precompressed && ld.loadSidecars(f) == needsDisk {
		ld.undo(f)
		return nil, needsDisk
	}
	ld.mark(f)
	f.buildHead(ld.headFor(f, nil))
	return f, 0
}

// mark records whether f's file is on a local mount (File.Local). A
// helper learns a mount that was not there at start; the probe never
// meets one (RESOLVE_NO_XDEV).
func (ld *loader) mark(f *File) {
	ld.mounts.learn(f.info.mnt)
	f.local = ld.mounts.local(f.info.mnt)
}

// undo closes what a probe's load opened before it found it must wait.
func (ld *loader) undo(f *File) { f.closeAll(ld.fs.close, ld.fs.munmap) }

// discard closes the fds of a File that was loaded for a loop that has
// closed since (fsOp.discard).
func (f *File) discard() { f.closeAll(closeLate, unmapLate) }

// closeAll closes the fds and unmaps the bodies of a File nobody holds
// (and of its sidecars) with the given calls: undo's are counted on the
// loop, discard's are not (the loop is gone).
func (f *File) closeAll(close func(int), unmap func([]byte)) {
	if f.fd >= 0 {
		close(f.fd)
	}
	if f.mapped {
		unmap(f.body)
	}
	if f.side != nil {
		for _, a := range f.side.rep {
			if a != nil {
				close(a.fd)
				if a.mapped {
					unmap(a.body)
				}
			}
		}
	}
}

func (ld *loader) keepsInMemory(size int64) bool {
	switch ld.cfg.Sendfile {
	case SendfileAlways:
		return false
	case SendfileNever:
		return size <= ld.cfg.CacheBytes/4
	}
	return size <= ld.cfg.MemBodyMax
}

// firstPart reads n bytes of fd from its start, on a helper, and reports
// whether they all came (revalidate); fewer: the file shrank, and the
// entry is to be loaded again.
func (ld *loader) firstPart(fd int, n int64) bool {
	bp := partBufs.Get().(*[]byte)
	defer partBufs.Put(bp)
	got := int64(0)
	for got < n {
		m, err := ld.fs.pread(fd, (*bp)[:n-got], got)
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			return false
		}
		got += int64(m)
	}
	return true
}

// partBufs are the helpers' buffers for firstPart, thrown away after.
var partBufs = sync.Pool{New: func() any { b := make([]byte, FirstPart); return &b }}

// unchanged re-stats a cached entry's path (and its sidecars' names) and
// reports whether it is as it was loaded: a revalidation. It reads only
// what is immutable once loaded: the entry's path, kind and info, and its
// sidecars' names and stats, copied into op on the loop's thread.
func (ld *loader) unchanged(path string, kind entryKind, info *fileInfo, side *sidecars) (bool, int) {
	ld.what = path
	fi, err := ld.statBeneath(path)
	if err != nil {
		return false, ld.status(err)
	}
	if !sameAs(kind, info, &fi) {
		return false, 0
	}
	if side != nil {
		return ld.sidecarsUnchanged(side)
	}
	return true, 0
}
