package uring

import (
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// pipeBudget is how many pipe pages the loops of one server may hold, in
// body pipes and in the CGI pipes they read, shared by every loop.
//
// The kernel counts a user's pipe pages (every process of the user
// together). Past fs.pipe-user-pages-soft (default 16384 pages, 64 MiB),
// a user without CAP_SYS_RESOURCE gets 8 KiB pipes and F_SETPIPE_SZ fails
// for every pipe it makes, in this server (CGI included) and in its other
// processes; past fs.pipe-user-pages-hard no pipe grows at all. So the
// server keeps to three quarters of the lower limit, and leaves the rest
// to the user's other pipes. A body that finds the budget spent is sent
// through a chunk instead (read + send), and counted.
type pipeBudget struct {
	left    atomic.Int64 // pages; may go below 0 through force
	total   int64
	maxSize int64 // fs.pipe-max-size: the largest pipe a user may ask for
}

// cgiPipePages is what a running CGI script's pipes are counted as: its
// stdout and stdin pipes, 16 pages each (the default 64 KiB).
const cgiPipePages = 32

// defaultPipe is a new pipe's size (16 pages).
const defaultPipe = 64 << 10

// newPipeBudget reads the limits from /proc/sys/fs; pages > 0 overrides
// the total (Backend.PipeBudget, for tests and measurements).
func newPipeBudget(pages int64) *pipeBudget {
	b := &pipeBudget{maxSize: 1 << 20}
	if v := procInt("/proc/sys/fs/pipe-max-size"); v > 0 {
		b.maxSize = v
	}
	switch {
	case pages > 0:
		b.total = pages
	default:
		soft, hard := procInt("/proc/sys/fs/pipe-user-pages-soft"), procInt("/proc/sys/fs/pipe-user-pages-hard")
		limit := int64(math.MaxInt64 / 4) // 0 means no limit
		if soft > 0 {
			limit = soft
		}
		if hard > 0 {
			limit = min(limit, hard)
		}
		b.total = limit / 4 * 3
	}
	b.left.Store(b.total)
	return b
}

// take takes pages when at least that many are left.
func (b *pipeBudget) take(pages int64) bool {
	for {
		l := b.left.Load()
		if l < pages {
			return false
		}
		if b.left.CompareAndSwap(l, l-pages) {
			return true
		}
	}
}

// force takes pages that are spent already (a CGI script's pipes).
func (b *pipeBudget) force(pages int64) { b.left.Add(-pages) }

func (b *pipeBudget) give(pages int64) { b.left.Add(pages) }

// procInt reads one integer from a /proc file; -1 when it cannot.
func procInt(path string) int64 {
	s, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(s)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}
