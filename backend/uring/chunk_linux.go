package uring

import (
	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// chunks are the buffers file bodies are read into before they are sent,
// and the carrier that reads and sends through them (body_linux.go):
// Backend.ReadBodies, and the pipes' fallback. Each is chunkSize bytes,
// mmap'd on demand (the kernel writes into one from the read's SQE to its
// CQE, outside the Go heap), owned by one connection from the body's start
// to its end, then kept for reuse until trim finds it idle.
type chunks struct {
	mem  [][]byte // nil: unmapped
	free []int32
	used []bool    // taken since the last trim
	sys  loops.Sys // the loop's (l.sys)
	st   *core.Stats

	// views: a body's resident parts go from its File's view, not
	// through a chunk (the pipes' fallback; not with Backend.ReadBodies,
	// the read + send ablation).
	views bool
}

// plan sends the next part of the body from the File's view (a shared,
// read-only mapping of the file: Conn.BodyView) when that part is in the
// page cache: one SEND, copied once by the kernel, and no memory of the
// connection's own. Otherwise it takes a chunk for the body, or closes the
// connection when no memory can be had for one (only closing tells the
// client), and keeps it until the body is out.
func (c *chunks) plan(l *loop, cn *conn, n int64, _ bool) (poll, steps uint32, ok bool) {
	b := &cn.body
	holds := b.via == c && b.idx >= 0
	if !holds && c.views {
		if k := min(n, viewSend); c.viewable(l, cn, k) {
			b.via, b.idx, b.asked = c, -1, int32(k)
			c.st.BodyViews++
			return 0, 1, true
		}
	}
	return c.planRead(l, cn, n)
}

// planRead is plan by READ into a chunk, the view not asked (pipes.plan
// found the part cold already).
func (c *chunks) planRead(l *loop, cn *conn, n int64) (poll, steps uint32, ok bool) {
	b := &cn.body
	if b.via != c || b.idx < 0 {
		i := c.get()
		if i < 0 {
			l.close(cn)
			return 0, 0, false
		}
		b.via, b.idx = c, i
	}
	b.asked = int32(min(n, chunkSize))
	return 0, 2, true
}

// viewSend is the most a chain sends from a view: one SEND, which
// io_uring polls and resumes (MSG_WAITALL) until it is whole, so Sent and
// with it the write timeout follow progress by this much.
const viewSend = 256 << 10

// viewable reports whether the next k bytes of cn's body may be sent from
// its File's view: the view exists and covers them, and their pages are
// in the page cache (cachestat(2)), so the kernel's copy from it never
// waits for the disk on the loop's thread; a cold part goes by READ into a
// chunk. Without cachestat nothing is sent from a view. Past the end of a
// file truncated since it was mapped, pages are not in the cache either,
// and the chunk's READ comes up short (retryBodyIn closes the connection);
// truncated between the check and the send, the kernel's copy gets EFAULT
// (never SIGBUS: the loop itself never reads the view) and the connection
// is closed.
func (c *chunks) viewable(l *loop, cn *conn, k int64) bool {
	o := cn.c.Out()
	if v := cn.c.BodyView(); int64(len(v)) < o.Off+k {
		return false
	}
	cached, known := l.residency(cn, k)
	return cached && known
}

// chunkReadFlags, when set (tests), gives a chunk's READ its rw_flags:
// RWF_NOWAIT on a file that is not in memory makes the kernel complete
// it with -EAGAIN, as it may on FUSE, NFS or 9p (retryBodyIn).
var chunkReadFlags func() uint32

// queue queues read → send of the next chunk of the body, or one send
// from the File's view.
func (c *chunks) queue(l *loop, cn *conn, fd int, off, n int64) {
	k := int64(cn.body.asked)
	flags := unix.MSG_NOSIGNAL | unix.MSG_WAITALL
	if k < n {
		flags |= unix.MSG_MORE
	}
	var buf []byte
	if cn.body.idx < 0 {
		buf = cn.c.BodyView()[off : off+k]
	} else {
		buf = c.mem[cn.body.idx][:k]
		e := l.sqe()
		e.PrepareRead(fd, addrOf(buf), uint32(k), uint64(off)) // io_uring_prep_read(3)
		if chunkReadFlags != nil {
			e.OpcodeFlags = chunkReadFlags()
		}
		e.Flags = giouring.SqeIOLink
		l.queue(e, opBodyIn, cn)
	}
	e := l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), flags) // io_uring_prep_send(3)
	if cn.body.idx < 0 && l.cfg.Body == BodyViewZC {
		// io_uring_prep_send_zc(3): a second CQE (IORING_CQE_F_NOTIF)
		// says when the kernel is done with the pages (complete). The
		// pages are the page cache's, which the kernel pins meanwhile.
		// giouring's PrepareSendZC passes the address of the slice
		// header, not of its bytes (the bodies came out garbled), so the
		// SQE is a SEND's with the opcode changed: the same fields.
		e.OpCode = giouring.OpSendZC
	}
	l.queue(e, opBodyOut, cn)
}

// in: a short read means the file shrank since it was opened.
func (c *chunks) in(b *fileBody, res int32) bool { return res == b.asked }

// out: a send that would block is polled by io_uring itself, so anything
// but bytes is an error.
func (c *chunks) out(_ *fileBody, res int32) bool { return res > 0 }

// ended gives the chunk back when the body is out, or the connection is
// closing; a send from the view holds nothing.
func (c *chunks) ended(cn *conn) {
	if cn.body.idx < 0 || cn.closing || cn.c.Out().N == 0 {
		cn.body.release()
	}
}

func (c *chunks) release(b *fileBody) {
	if b.idx >= 0 {
		c.free = append(c.free, b.idx)
	}
}

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
	c.st.Chunks++
	c.st.ChunkBytes += chunkSize
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
	c.st.Chunks--
	c.st.ChunkBytes -= chunkSize
}
