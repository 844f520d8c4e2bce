package uring

import (
	"os"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// The send chain carries what Out says, linked (IOSQE_IO_LINK) so that it
// goes in with one enter and runs in order:
//
//	[send Mem, MSG_MORE if a body follows] → [body in] → [body out]
//
// The body steps depend on Backend.ReadBodies:
//
//	splice (default):  splice file range into a pipe → splice pipe to socket
//	ReadBodies:        read file range into a chunk → send chunk
//
// A short send, read or splice breaks the link and cancels the rest. The
// chain's last CQE then drives the connection again, which resumes from
// Out at whatever offset Sent has reached; in splice mode, bytes a short
// chain left in the pipe go out first. See doc.go for why splice is the
// default.

// carriers are what file bodies travel through between the file and the
// socket: mmap'd chunks, or pipes.
type carriers interface {
	get() int32         // a carrier, or -1 when none is free
	put(i int32)        // gives back a carrier that holds nothing
	drop(i int32)       // gives back one that may still hold bytes
	available() bool    // whether get may succeed
	size(i int32) int64 // how many bytes one chain moves through it
	close()
}

// send starts the chain for what Out says.
func (l *loop) send(cn *conn) {
	o := cn.c.Out()
	if o.N > 0 && cn.carrier < 0 {
		if cn.carrier = l.carriers.get(); cn.carrier < 0 {
			cn.waiting = true
			l.carrierWait = append(l.carrierWait, pack(0, cn.gen, cn.slot))
			return
		}
	}
	var mem, body uint32
	if len(o.Mem) > 0 {
		mem = 1
	}
	switch {
	case o.N == 0:
	case cn.pipeBytes > 0 && mem > 0:
		// Out never has header bytes while a body is under way: the
		// core parses no further request until the body is out.
		l.close(cn)
		return
	case cn.pipeBytes > 0:
		body = 1 // only drain the pipe
	default:
		body = 2
	}
	l.reserve(mem + body)
	if mem > 0 {
		flags := unix.MSG_NOSIGNAL
		if o.N > 0 {
			// MSG_WAITALL: without it a short send completes "successfully"
			// and the linked body would follow a half-sent header (seen in
			// the soak: a body's bytes in the middle of the previous
			// response). With it io_uring retries until all is sent, or
			// fails the link.
			flags |= unix.MSG_MORE | unix.MSG_WAITALL
		}
		cn.pin.Pin(&o.Mem[0])
		e := l.sqe()
		e.PrepareSend(cn.fd, addrOf(o.Mem), uint32(len(o.Mem)), flags) // io_uring_prep_send(3)
		if body > 0 {
			e.Flags = giouring.SqeIOLink
		}
		l.queue(e, opSend, cn)
		cn.memSend = true
	}
	switch {
	case body == 0:
	case l.pipes != nil:
		l.queueSplice(cn, o.File.Fd(), o.Off, o.N)
	default:
		l.queueRead(cn, o.File.Fd(), o.Off, o.N)
	}
	cn.chain = int(mem + body)
}

// queueRead queues read → send of the next chunk of the body.
func (l *loop) queueRead(cn *conn, fd int, off, n int64) {
	k := min(n, l.carriers.size(cn.carrier))
	buf := l.chunks.buf(cn.carrier)[:k]
	e := l.sqe()
	e.PrepareRead(fd, addrOf(buf), uint32(k), uint64(off)) // io_uring_prep_read(3)
	e.Flags = giouring.SqeIOLink
	l.queue(e, opBodyIn, cn)
	cn.bodyLen = int32(k)
	flags := unix.MSG_NOSIGNAL
	if k < n {
		flags |= unix.MSG_MORE
	}
	e = l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), flags)
	l.queue(e, opBodyOut, cn)
}

// queueSplice queues file → pipe → socket for the next part of the body
// (io_uring_prep_splice(3)), or only pipe → socket when a short chain left
// bytes in the pipe.
func (l *loop) queueSplice(cn *conn, fd int, off, n int64) {
	p := &l.pipes.p[cn.carrier]
	if cn.pipeBytes > 0 {
		e := l.sqe()
		e.PrepareSplice(p.r, -1, cn.fd, -1, uint32(cn.pipeBytes), spliceMore(cn.pipeBytes < n))
		l.queue(e, opBodyOut, cn)
		return
	}
	k := min(n, p.cap)
	e := l.sqe()
	// NONBLOCK: the pipe is empty, so this only keeps a bug from
	// blocking a kernel worker forever.
	e.PrepareSplice(fd, off, p.w, -1, uint32(k), unix.SPLICE_F_NONBLOCK)
	e.Flags = giouring.SqeIOLink
	l.queue(e, opBodyIn, cn)
	cn.bodyLen = int32(k)
	e = l.sqe()
	e.PrepareSplice(p.r, -1, cn.fd, -1, uint32(k), spliceMore(k < n))
	l.queue(e, opBodyOut, cn)
}

func spliceMore(more bool) uint32 {
	if more {
		return unix.SPLICE_F_MORE
	}
	return 0
}

// chainStep accounts for one CQE of the chain; the last one releases the
// pinned memory, and the carrier unless bytes wait in its pipe (then the
// pipe stays with the connection, whose next chain sends them first).
func (l *loop) chainStep(cn *conn) {
	if cn.chain--; cn.chain > 0 {
		return
	}
	cn.pin.Unpin()
	if cn.pipeBytes == 0 {
		l.releaseCarrier(cn)
	}
}

func (l *loop) releaseCarrier(cn *conn) {
	switch {
	case cn.carrier < 0:
		return
	case cn.pipeBytes > 0:
		l.carriers.drop(cn.carrier)
	default:
		l.carriers.put(cn.carrier)
	}
	cn.carrier, cn.pipeBytes = -1, 0
}

func (l *loop) onSend(cn *conn, res int32) {
	cn.memSend = false
	cn.pin.Unpin() // the kernel is done with Mem
	switch {
	case res > 0 && !cn.closing:
		cn.c.Sent(int64(res))
		if cn.lateBody > 0 {
			cn.c.Sent(cn.lateBody)
			cn.lateBody = 0
		}
	case res > 0:
	default:
		l.close(cn) // EPIPE, ECONNRESET; 0 would mean no progress ever
	}
	l.chainStep(cn)
}

func (l *loop) onBodyIn(cn *conn, res int32) {
	switch {
	case res == -int32(unix.ECANCELED):
		// The Mem send before it came up short.
	case l.pipes != nil && res > 0:
		// A splice may move less than asked (a pipe holds a bounded
		// number of pages); the link is broken and the next chain
		// drains the pipe.
		cn.pipeBytes += int64(res)
	case l.pipes == nil && res == cn.bodyLen:
	default:
		// A short read, or no bytes at all: the file shrank since it was
		// opened, and the promised length cannot be sent; only closing
		// tells the client.
		l.close(cn)
	}
	l.chainStep(cn)
}

func (l *loop) onBodyOut(cn *conn, res int32) {
	switch {
	case res > 0:
		cn.pipeBytes = max(cn.pipeBytes-int64(res), 0)
		switch {
		case cn.closing:
		case cn.memSend:
			// Linked CQEs arrive in order; should they not, Sent must
			// still see the Mem bytes first.
			cn.lateBody += int64(res)
		default:
			cn.c.Sent(int64(res))
		}
	case res == -int32(unix.ECANCELED):
	default:
		l.close(cn)
	}
	l.chainStep(cn)
}

// serveCarrierWaiters drives the connections waiting for a carrier, oldest
// first, while carriers are free.
func (l *loop) serveCarrierWaiters() {
	for len(l.carrierWait) > 0 && l.carriers.available() {
		_, gen, slot := unpack(l.carrierWait[0])
		l.carrierWait = l.carrierWait[1:]
		cn := l.conns[slot]
		if !cn.live || cn.gen != gen || !cn.waiting {
			continue
		}
		cn.waiting = false
		l.drive(cn)
		if cn.waiting {
			return // get failed after all (no pipe could be made): wait for a put
		}
	}
}

// chunks are the buffers file bodies are read into before they are sent:
// one mmap'd region (MAP_NORESERVE: a page costs memory only once used),
// count chunks of size bytes, each owned by at most one connection's
// read → send chain at a time.
type chunks struct {
	mem  []byte
	sz   int
	free []int32
}

func newChunks(count, size int) (*chunks, error) {
	mem, err := unix.Mmap(-1, 0, count*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	c := &chunks{mem: mem, sz: size, free: make([]int32, 0, count)}
	for i := count - 1; i >= 0; i-- {
		c.free = append(c.free, int32(i))
	}
	return c, nil
}

func (c *chunks) get() int32 {
	n := len(c.free)
	if n == 0 {
		return -1
	}
	i := c.free[n-1]
	c.free = c.free[:n-1]
	return i
}

func (c *chunks) put(i int32)        { c.free = append(c.free, i) }
func (c *chunks) drop(i int32)       { c.put(i) }
func (c *chunks) available() bool    { return len(c.free) > 0 }
func (c *chunks) size(int32) int64   { return int64(c.sz) }
func (c *chunks) buf(i int32) []byte { return c.mem[int(i)*c.sz : int(i+1)*c.sz : int(i+1)*c.sz] }

func (c *chunks) close() {
	if c != nil && c.mem != nil {
		unix.Munmap(c.mem)
		c.mem = nil
	}
}

// pipes are the pipes file bodies are spliced through, made on demand up
// to max, each sized to size bytes when the per-user pipe limits
// (fs.pipe-user-pages-soft) allow it, else left at the default 64 KiB.
// A pipe belongs to one connection's chain, and past its end while bytes
// wait in it.
type pipes struct {
	p    []pipe // r < 0: not open (never made, or dropped)
	free []int32
	max  int
	sz   int
}

type pipe struct {
	r, w int
	cap  int64
}

func newPipes(max, size int) *pipes { return &pipes{max: max, sz: size} }

func (ps *pipes) available() bool { return len(ps.free) > 0 || len(ps.p) < ps.max }

func (ps *pipes) get() int32 {
	var i int32
	if n := len(ps.free); n > 0 {
		i, ps.free = ps.free[n-1], ps.free[:n-1]
	} else if len(ps.p) < ps.max {
		i = int32(len(ps.p))
		ps.p = append(ps.p, pipe{r: -1, w: -1})
	} else {
		return -1
	}
	if ps.p[i].r < 0 {
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			ps.free = append(ps.free, i)
			return -1
		}
		unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, ps.sz) // best effort
		c, err := unix.FcntlInt(uintptr(fds[1]), unix.F_GETPIPE_SZ, 0)
		if err != nil || c <= 0 {
			c = 64 << 10
		}
		ps.p[i] = pipe{r: fds[0], w: fds[1], cap: int64(c)}
	}
	return i
}

func (ps *pipes) put(i int32)        { ps.free = append(ps.free, i) }
func (ps *pipes) size(i int32) int64 { return ps.p[i].cap }
func (ps *pipes) closeOne(i int32) {
	unix.Close(ps.p[i].r)
	unix.Close(ps.p[i].w)
	ps.p[i] = pipe{r: -1, w: -1}
}
func (ps *pipes) drop(i int32) { ps.closeOne(i); ps.put(i) }
func (ps *pipes) close() {
	for i := range ps.p {
		if ps.p[i].r >= 0 {
			ps.closeOne(int32(i))
		}
	}
}
