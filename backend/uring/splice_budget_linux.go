package uring

import (
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// pipeBudget is how many pipe pages the loops of one server may hold in
// body pipes, shared by every loop, beside the share its CGI scripts'
// pipes are given.
//
// The kernel counts a user's pipe pages (every process of the user
// together). Past fs.pipe-user-pages-soft (default 16384 pages, 64 MiB),
// a user without CAP_SYS_RESOURCE gets 8 KiB pipes and F_SETPIPE_SZ fails
// for every pipe it makes, in this server (CGI included) and in its other
// processes; past fs.pipe-user-pages-hard no pipe grows at all. So the
// server keeps to three quarters of the lower limit, and leaves the rest
// to the user's other pipes. A body that finds the budget spent is sent
// through a chunk instead (read + send), and counted.
//
// Of the three quarters, the scripts get cgiPipePages for each of the
// Config.CGIMax that may run at once, set aside when the server starts,
// and the bodies the rest. Counted in one pool, as they were, 384 silent
// scripts (the default limit's 12288 pages / 32) left no pipe to any
// body, and every large body of every loop went by read + send, at
// several times the CPU (issue 19). The scripts' share is at most half:
// beyond it (--cgi-max above 192 with the default limit) their pipes are
// made all the same, and spend the quarter left to the user's other
// pipes, never the bodies' half.
type pipeBudget struct {
	left    atomic.Int64 // pages for body pipes
	total   int64        // what left starts at: the whole budget less the scripts' share
	maxSize int64        // fs.pipe-max-size: the largest pipe a user may ask for

	bodies atomic.Int64 // file bodies under way in every loop (fileBody.counted)
	held   atomic.Int64 // body pipes that connections hold now
}

// roomFor reports whether a new pipe of size bytes leaves the budget a
// smallest pipe for every other body under way that holds none: pipes
// grow past the smallest only while the bodies in flight are few. At
// 10,000 connections of a 1 MiB file, 1 MiB pipes spent the budget (three
// quarters of 64 MiB) on 48 pipes, and most of the bodies went by read +
// send with a private chunk each (issue 20); 64 KiB pipes give 768.
func (b *pipeBudget) roomFor(size int64) bool {
	if size <= pipeSizes[len(pipeSizes)-1] {
		return true
	}
	others := max(b.bodies.Load()-b.held.Load()-1, 0)
	return b.left.Load()-size/pageSize >= others*(pipeSizes[len(pipeSizes)-1]/pageSize)
}

// cgiPipePages is what a running CGI script's pipes are counted as: its
// stdout and stdin pipes, 16 pages each (the default 64 KiB).
const cgiPipePages = 32

// defaultPipe is a new pipe's size (16 pages).
const defaultPipe = 64 << 10

// pageSize is the kernel's: pipes are counted in pages of this size.
var pageSize = int64(os.Getpagesize())

// newPipeBudget reads the limits from /proc/sys/fs; pages > 0 overrides
// the whole budget (Backend.PipeBudget, for tests and measurements).
// scripts is how many CGI scripts may run at once (0: no CGI).
func newPipeBudget(pages int64, scripts int) *pipeBudget {
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
	b.total -= min(int64(scripts)*cgiPipePages, b.total/2) // the scripts' share
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
