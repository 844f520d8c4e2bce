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
// to its CQE, outside the Go heap), owned by one connection from the
// body's start to its end, then kept for reuse until trim finds it idle.
type chunks struct {
	mem  [][]byte // nil: unmapped
	free []int32
	used []bool    // taken since the last trim
	sys  loops.Sys // the loop's (l.sys)
	st   *core.Stats
}

// plan is planRead: a body that holds a chunk keeps it to its end, and
// with --uring-body=read every part goes by chunk.
func (c *chunks) plan(l *loop, cn *conn, n int64, _ bool) chainPlan {
	return c.planRead(l, cn, n)
}

// planRead readies READ into a chunk, then SEND of it: it takes a chunk
// for the body, or closes the connection when no memory can be had for
// one (only closing tells the client), and keeps it until the body is
// out.
func (c *chunks) planRead(l *loop, cn *conn, n int64) chainPlan {
	b := &cn.body
	if b.via != c || b.idx < 0 {
		i := c.get()
		if i < 0 {
			l.close(cn)
			return planNone
		}
		b.via, b.idx = c, i
	}
	b.asked = int32(min(n, chunkSize))
	return chainPlan{steps: 2}
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
	e = l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), bodySendFlags(k < n)) // io_uring_prep_send(3)
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

// ended gives the chunk back when the body is out, or the connection is
// closing.
func (c *chunks) ended(cn *conn) {
	if cn.life >= lifeClosing || cn.c.Out().N == 0 {
		cn.releaseBody()
	}
}

func (c *chunks) release(cn *conn) { c.free = append(c.free, cn.body.idx) }

func (c *chunks) get() int32 {
	if n := len(c.free); n > 0 {
		i := c.free[n-1]
		c.free = c.free[:n-1]
		c.used[i] = true
		return i
	}
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

func (c *chunks) unmap(i int32) {
	c.sys.Munmap(c.mem[i])
	c.mem[i] = nil
	c.st.Own[ownChunks]--
	c.st.Own[ownChunkBytes] -= chunkSize
}
