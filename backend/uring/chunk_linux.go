package uring

import (
	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// chunks are the buffers file bodies are read into before they are sent,
// and the carrier that reads and sends through them (body_linux.go): a
// cold part's, and every part's with --uring-body=read. Each is chunkSize
// bytes, mmap'd on demand (the kernel writes into one from the read's SQE
// to its CQE, outside the Go heap), its pages taken from the budget the
// server's pipes take from too (pipeBudget), and kept for reuse until trim
// finds it idle.
//
// A cold part's chain holds a chunk for itself only: READ, then SEND of no
// more than the socket takes now (pipes.sockRoom), so that neither waits
// for the client, and the chunk goes back when the chain ends. A socket
// with no room is waited for by poll, holding no chunk; a body that finds
// the budget spent waits in line, holding nothing, for a chain in flight
// to give its carrier back (pipes.wait, servePipeWaiters). A loop with no
// chain of its own in flight, whose line nothing would move, takes its
// floor instead: one chunk of its own beyond the budget, since the budget
// may be held by the other loops, whose CQEs do not wake this one. So
// what bodies hold is at most the budget and a chunk per loop. Each chain
// starts from the body's planner again, so a body whose file is back in
// the page cache leaves the chunks at its next chain. Held to the body's
// end, a chunk per connection was most of the server's memory at 10,000
// connections of an evicted 1 MiB file
// (results/2026-12-06_uring-cold1m-c10k).
type chunks struct {
	mem    [][]byte // nil: unmapped
	free   []int32
	used   []bool    // taken since the last trim
	sys    loops.Sys // the loop's (l.sys)
	st     *core.Stats
	budget *pipeBudget // shared with the pipes, and every loop's
	ps     *pipes      // the loop's: the line for a carrier, and the chains in flight
	floor  int32       // the loop's chunk beyond the budget (planRoom); -1 none
}

// chunkPages is what a chunk takes from the budget.
var chunkPages = chunkSize / pageSize

// plan: a chunk the body holds (--uring-body=read) is read into again;
// otherwise the part is a cold one (planRead).
func (c *chunks) plan(l *loop, cn *conn, n int64, _ bool) chainPlan {
	if b := &cn.body; b.via == c && b.idx >= 0 {
		b.asked = int32(min(n, chunkSize))
		return chainPlan{steps: 2}
	}
	return c.planRead(l, cn, n)
}

// planRead readies READ into a chunk, then SEND of it, for a part that
// may not be sent from the loop's thread (not in the page cache, or it
// cannot tell): a chain of its own within the budget, as above.
func (c *chunks) planRead(l *loop, cn *conn, n int64) chainPlan {
	s := c.ps.of(cn)
	if s.waiting {
		return planNone // servePipeWaiters drives it
	}
	c.ps.count(s)
	if s.pollOut {
		s.pollOut, s.polled = false, true
		return planPoll
	}
	room, wait := c.ps.sockRoom(l, cn, s)
	switch {
	case wait:
		return planNone // fixedfd_linux.go: the fd getsockopt takes is on its way
	case room <= 0:
		s.polled = true // once its CQE has come (the next plan), the socket has room
		return planPoll
	}
	return c.planRoom(l, cn, s, n, room)
}

// planRoom is planRead once the socket's room is known.
func (c *chunks) planRoom(l *loop, cn *conn, s *spliced, n, room int64) chainPlan {
	s.chunked = true
	if c.ps.behind() {
		c.ps.line(cn, s)
		return planNone
	}
	i := c.get()
	switch {
	case i >= 0:
	case c.ps.active > 0:
		// The budget is spent, but a chain of this loop that waits for
		// no client holds a carrier: it comes back within a READ and a
		// SEND, or a splice.
		c.ps.line(cn, s)
		return planNone
	default:
		// Nothing in flight here gives one back: the loop's floor.
		if i = c.getFloor(); i < 0 {
			l.close(cn) // no memory for a chunk: only closing tells the client
			return planNone
		}
	}
	b := &cn.body
	b.via, b.idx, s.active = c, i, true
	c.ps.active++
	b.asked = int32(min(n, chunkSize, room))
	return chainPlan{steps: 2}
}

// whole is --uring-body=read's planner: every part by chunk, a body
// holding its chunk to its end, made beyond the budget when it is spent
// (the ablation measures read + send with a buffer per connection).
func (c *chunks) whole(l *loop, cn *conn, n int64) chainPlan {
	b := &cn.body
	if b.via != c || b.idx < 0 {
		i := c.getBeyond()
		if i < 0 {
			l.close(cn)
			return planNone
		}
		b.via, b.idx = c, i
	}
	b.asked = int32(min(n, chunkSize))
	return chainPlan{steps: 2}
}

// readBodies is --uring-body=read's planner (chunks.whole).
type readBodies struct{ c *chunks }

func (r readBodies) plan(l *loop, cn *conn, n int64, _ bool) chainPlan {
	return r.c.whole(l, cn, n)
}

// chunkReadFlags, when set (tests), gives a chunk's READ its rw_flags:
// RWF_NOWAIT on a file that is not in memory makes the kernel complete
// it with -EAGAIN, as it may on FUSE, NFS or 9p (retryBodyIn).
var chunkReadFlags func() uint32

// queue queues read → send of the next chunk of the body.
func (c *chunks) queue(l *loop, cn *conn, fd int, off, n int64) {
	k := int64(cn.body.asked)
	buf := c.mem[cn.body.idx][:k]
	e := l.sqe()
	e.PrepareRead(fd, addrOf(buf), uint32(k), uint64(off)) // io_uring_prep_read(3)
	if chunkReadFlags != nil {
		e.OpcodeFlags = chunkReadFlags()
	}
	e.Flags = giouring.SqeIOLink
	l.queue(e, opBodyIn, cn)
	cn.c.BodyWait() // to its CQE: held to --fs-timeout (onBodyIn)
	flags := bodySendFlags(k < n)
	if c.ps.of(cn).active {
		// A cold part's chain asks no more than the socket takes
		// (planRoom). Without MSG_WAITALL a send that finds less room
		// returns short, and the chunk goes back, instead of waiting for
		// the client: what it did not send is read again.
		flags &^= unix.MSG_WAITALL
	}
	e = l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), flags) // io_uring_prep_send(3)
	l.queue(e, opBodyOut, cn)
}

// bodySendFlags are a body SEND's: MSG_WAITALL, which io_uring polls and
// resumes until it is whole (a send that would block is polled by io_uring
// itself), and MSG_MORE when more of the body follows.
func bodySendFlags(more bool) int {
	if more {
		return unix.MSG_NOSIGNAL | unix.MSG_WAITALL | unix.MSG_MORE
	}
	return unix.MSG_NOSIGNAL | unix.MSG_WAITALL
}

// in: a short read means the file shrank since it was opened.
func (c *chunks) in(cn *conn, res int32) bool { return res == cn.body.asked }

// out: a send that would block is polled by io_uring itself, so anything
// but bytes is an error.
func (c *chunks) out(_ *conn, res int32) bool { return res > 0 }

// ended gives a cold part's chunk back at its chain's end, and the
// ablation's when the body is out, or the connection is closing.
func (c *chunks) ended(cn *conn) {
	if s := c.ps.of(cn); s.active {
		s.active = false
		c.ps.active--
		cn.releaseBody()
		return
	}
	if cn.life >= lifeClosing || cn.c.Out().N == 0 {
		cn.releaseBody()
	}
}

func (c *chunks) release(cn *conn) { c.free = append(c.free, cn.body.idx) }

// get returns a chunk: a free one, else a new one within the budget
// (free pipes closed to make room); -1 when none.
func (c *chunks) get() int32 {
	if i := c.reuse(); i >= 0 {
		return i
	}
	for !c.budget.take(chunkPages) {
		if !c.ps.closeFree() {
			return -1
		}
	}
	i := c.mmap()
	if i < 0 {
		c.budget.give(chunkPages)
	}
	return i
}

// getFloor returns the loop's floor, a chunk beyond the budget that no
// other loop can hold: -1 when it is in use (get found no free chunk), or
// no memory can be had.
func (c *chunks) getFloor() int32 {
	if c.floor >= 0 {
		return -1
	}
	i := c.mmap()
	c.floor = i
	return i
}

// getBeyond returns a chunk, a new one beyond the budget when it is
// spent (--uring-body=read: one per connection); -1 when no memory can be
// had.
func (c *chunks) getBeyond() int32 {
	if i := c.reuse(); i >= 0 {
		return i
	}
	if !c.budget.take(chunkPages) {
		c.budget.force(chunkPages)
	}
	i := c.mmap()
	if i < 0 {
		c.budget.give(chunkPages)
	}
	return i
}

// reuse takes a free chunk; -1 when none.
func (c *chunks) reuse() int32 {
	n := len(c.free)
	if n == 0 {
		return -1
	}
	i := c.free[n-1]
	c.free = c.free[:n-1]
	c.used[i] = true
	return i
}

// mmap maps a new chunk; -1 when it cannot.
func (c *chunks) mmap() int32 {
	b, err := c.sys.Mmap(chunkSize)
	if err != nil {
		return -1
	}
	c.st.Own[ownChunks]++
	c.st.Own[ownChunkBytes] += chunkSize
	for i, m := range c.mem {
		if m == nil {
			c.mem[i], c.used[i] = b, true
			return int32(i)
		}
	}
	c.mem = append(c.mem, b)
	c.used = append(c.used, true)
	return int32(len(c.mem) - 1)
}

// unmapFree unmaps one free chunk, giving its pages to the budget, and
// reports whether there was one.
func (c *chunks) unmapFree() bool {
	n := len(c.free)
	if n == 0 {
		return false
	}
	c.unmap(c.free[n-1])
	c.free = c.free[:n-1]
	return true
}

func (c *chunks) trim() {
	keep := c.free[:0]
	for _, i := range c.free {
		if c.used[i] {
			c.used[i] = false
			keep = append(keep, i)
			continue
		}
		c.unmap(i)
	}
	c.free = keep
}

// close unmaps every chunk; no read or send may be in flight.
func (c *chunks) close() {
	for i, m := range c.mem {
		if m != nil {
			c.unmap(int32(i))
		}
	}
	c.free = nil
}

// unmap unmaps chunk i, giving its pages to the budget unless it is the
// floor.
func (c *chunks) unmap(i int32) {
	c.sys.Munmap(c.mem[i])
	c.mem[i] = nil
	if i == c.floor {
		c.floor = -1
	} else {
		c.budget.give(chunkPages)
	}
	c.st.Own[ownChunks]--
	c.st.Own[ownChunkBytes] -= chunkSize
}
