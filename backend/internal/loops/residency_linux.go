package loops

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// Residency answers, for one loop, whether a part of a file body is in
// the page cache, by cachestat(2) (Linux 6.5): one call answers for a
// whole range, needs no mapping of the file, and never waits for I/O.
// Both backends ask it before a call on the loop's thread that would read
// the part (a sendfile, a send from the File's mapping): a part that is
// not cached is read elsewhere (epoll: by a helper; io_uring: by a READ,
// which waits on the kernel's side).
//
// cachestat counts a page that a read has put in the cache and not yet
// filled; core.Server.Cold is the rule that covers that window.
//
// A Residency belongs to its loop's thread.
type Residency struct {
	sys     Sys
	missing bool // cachestat is missing here (ENOSYS, EPERM from seccomp): nothing is asked

	// The file found (or not) wholly in the page cache in this pass of the
	// loop (Body), the pass, and the answer. Holding the File keeps any
	// other from its address.
	whole     *core.File
	wholePass uint64
	wholeIn   bool
}

// NewResidency returns the loop's Residency, its calls made through sys.
func NewResidency(sys Sys) Residency { return Residency{sys: sys} }

// pageSize is the kernel's: cachestat counts pages of this size.
var pageSize = int64(os.Getpagesize())

// Missing reports whether cachestat was found missing: Range and Body
// then never know.
func (r *Residency) Missing() bool { return r.missing }

// Range reports whether n bytes of fd from off are all in the page cache;
// known is false when cachestat could not tell (missing, or an error such
// as EOPNOTSUPP on a file system that lacks it).
func (r *Residency) Range(fd int, off, n int64) (cached, known bool) {
	if r.missing {
		return false, false
	}
	var cs unix.Cachestat_t
	switch errno := r.sys.Cachestat(fd, uint64(off), uint64(n), &cs); errno {
	case 0:
		pages := (off+n+pageSize-1)/pageSize - off/pageSize
		return cs.Cache >= uint64(pages), true
	case unix.ENOSYS, unix.EPERM:
		r.missing = true
	}
	return false, false
}

// WholeMax is the largest file Body asks about whole.
const WholeMax = 4 << 20

// Body is Range for n bytes of f from off, asked in pass (a counter the
// loop advances once per pass of its wait). A file of at most WholeMax
// bytes is asked about whole, once per pass, and while all of it is
// cached its other parts in that pass ask nothing more: with thousands of
// clients of one file, a call per part is a large share of the loop's
// work (results/2026-12-01_c10k-final). It adds no window for a page to
// leave the cache unseen that a call per part would close: io_uring's
// SQEs for the pass go in at its one enter anyway, after every check.
//
// A file on a mount that is not local (core.File.Local: FUSE, NFS) is
// never known: a page it lacks is read from a daemon or a server that may
// never answer, and nothing that could read one may run on the loop.
func (r *Residency) Body(f *core.File, off, n int64, pass uint64) (cached, known bool) {
	if r.missing || !f.Local() {
		return false, false
	}
	if size := f.Size(); size <= WholeMax {
		if r.whole != f || r.wholePass != pass {
			c, known := r.Range(f.Fd(), 0, size)
			if !known {
				return false, false
			}
			r.whole, r.wholePass, r.wholeIn = f, pass, c
		}
		if r.wholeIn {
			return true, true
		}
	}
	return r.Range(f.Fd(), off, n)
}
