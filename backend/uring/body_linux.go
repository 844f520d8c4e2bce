package uring

import (
	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// The send chain carries what Out says, linked (IOSQE_IO_LINK) so that it
// goes in with one enter and runs in order:
//
//	[send Mem, MSG_MORE if a body follows] → [body in] → [body out]
//
// The body goes through a pipe or a chunk:
//
//	pipe (default):   splice file range → pipe, then pipe → socket
//	chunk (fallback): read file range → chunk, then send chunk
//
// A chain takes a pipe for no more bytes than the socket's send buffer
// takes now (sockRoom), so the pipe is empty when the chain ends and goes
// back to the loop at once; a socket without room is waited for by poll,
// holding no pipe. Pipes are made on demand within the pipe budget that
// the server's loops share (budget_linux.go). When it is spent, a body
// waits in line while a chain that waits for no client holds a pipe (it
// comes back within a splice), else takes a chunk of its own until the
// body is out (counted in Stats.BodyFallbacks). With Backend.ReadBodies
// every body takes a chunk.
//
// Sockets are non-blocking. IORING_OP_SPLICE always runs on an io_uring
// worker (the kernel punts it, REQ_F_FORCE_ASYNC), and a splice to a
// blocking socket would keep the worker until the client has read the
// lot. To a non-blocking one it moves what the socket takes and returns:
// a short count or -EAGAIN. Should that leave bytes in the pipe, the
// pipe stays with the connection (those bytes are its client's), and the
// next chain waits for room by poll, not on a worker:
//
//	[poll POLLOUT] → [splice pipe → socket]
//
// Each splice reports the bytes the socket took, so Sent, and with it the
// write timeout, follow progress. The chunk path needs no such care: a
// send (MSG_WAITALL) that would block is polled by io_uring itself.
//
// A short send, read or splice breaks the link and cancels the rest. The
// chain's last CQE then drives the connection again, which resumes from
// Out at whatever offset Sent has reached; bytes a short chain left in the
// pipe go out first. See doc.go for the measurements.

// send starts the chain for what Out says.
func (l *loop) send(cn *conn) {
	o := cn.c.Out()
	var mem, poll, body uint32
	if len(o.Mem) > 0 {
		mem = 1
	}
	room := int64(0) // pipe: how much of the body the socket has room for
	switch {
	case o.N == 0:
	case cn.pipeBytes > 0 && mem > 0:
		// Out never has header bytes while a body is under way: the
		// core parses no further request until the body is out.
		l.close(cn)
		return
	case cn.pipeBytes > 0:
		body = 1 // only drain the pipe, when there is room
		if cn.pollOut {
			poll = 1
		}
	case cn.chunk >= 0:
		body = 2
	case l.pipes == nil:
		if !l.takeChunk(cn) {
			return
		}
		body = 2
	default:
		// Fill a pipe with no more than the socket takes now: then the
		// pipe is empty again when the chain ends, and goes back at
		// once. A socket with no room is waited for without a pipe.
		if room = l.sockRoom(cn); room <= 0 {
			poll = 1
			break
		}
		switch cn.bodyPipe = l.pipes.get(min(room, o.N), l.stats); {
		case cn.bodyPipe >= 0:
			cn.pipeActive = true
			l.pipesActive++
		case l.pipesActive > 0:
			// The budget is spent, but a chain that waits for no
			// client holds a pipe: it comes back within a splice.
			cn.waiting = true
			l.pipeWait = append(l.pipeWait, pack(0, cn.gen, cn.slot))
			return
		default:
			// Every pipe waits for its client: the fallback.
			l.stats.BodyFallbacks++
			if !l.takeChunk(cn) {
				return
			}
		}
		body = 2
	}
	l.reserve(mem + poll + body)
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
		if poll+body > 0 {
			e.Flags = giouring.SqeIOLink
		}
		l.queue(e, opSend, cn)
		cn.memSend = true
	}
	if poll > 0 {
		e := l.sqe()
		e.PreparePollAdd(cn.fd, unix.POLLOUT) // io_uring_prep_poll_add(3)
		if body > 0 {
			e.Flags = giouring.SqeIOLink
		}
		l.queue(e, opBodyPoll, cn)
		cn.pollOut = false
	}
	switch {
	case body == 0:
	case cn.bodyPipe >= 0:
		l.queueSplice(cn, o.File.Fd(), o.Off, o.N, room)
	default:
		l.queueRead(cn, o.File.Fd(), o.Off, o.N)
	}
	cn.chain = int(mem + poll + body)
}

// takeChunk gives the connection a chunk for its body, or closes it when
// no memory can be had for one (only closing tells the client).
func (l *loop) takeChunk(cn *conn) bool {
	if cn.chunk = l.chunks.get(); cn.chunk < 0 {
		l.close(cn)
		return false
	}
	return true
}

// sockRoom is how many body bytes the socket's send buffer takes now:
// half of its size less what is queued, as the kernel counts them
// (SO_MEMINFO). The kernel counts each packet's overhead too, so the
// whole difference overshoots: with a margin of 1/16, clients that do
// not read kept bytes in their pipes in a scripts/stall run; with half,
// none did. After a poll said POLLOUT
// there is room for at least some bytes, whatever the estimate.
func (l *loop) sockRoom(cn *conn) int64 {
	l.stats.Syscalls[core.SysGetsockopt]++
	sndbuf, queued, err := sockMem(cn.fd)
	if err != nil {
		return defaultPipe // the splice will tell
	}
	room := (sndbuf - queued) / 2
	if cn.polled {
		room = max(room, defaultPipe)
		cn.polled = false
	}
	return room &^ (pageSize - 1)
}

// queueRead queues read → send of the next chunk of the body.
func (l *loop) queueRead(cn *conn, fd int, off, n int64) {
	k := min(n, int64(chunkSize))
	buf := l.chunks.buf(cn.chunk)[:k]
	e := l.sqe()
	e.PrepareRead(fd, addrOf(buf), uint32(k), uint64(off)) // io_uring_prep_read(3)
	e.Flags = giouring.SqeIOLink
	l.queue(e, opBodyIn, cn)
	cn.bodyLen = int32(k)
	flags := unix.MSG_NOSIGNAL | unix.MSG_WAITALL
	if k < n {
		flags |= unix.MSG_MORE
	}
	e = l.sqe()
	e.PrepareSend(cn.fd, addrOf(buf), uint32(k), flags)
	l.queue(e, opBodyOut, cn)
}

// queueSplice queues file → pipe → socket for the next part of the body
// (io_uring_prep_splice(3)), or only pipe → socket when a short chain left
// bytes in the pipe. SPLICE_F_NONBLOCK makes the pipe side never wait; the
// socket side never waits because the socket is non-blocking.
func (l *loop) queueSplice(cn *conn, fd int, off, n, room int64) {
	p := &l.pipes.p[cn.bodyPipe]
	if cn.pipeBytes > 0 {
		e := l.sqe()
		e.PrepareSplice(p.r, -1, cn.fd, -1, uint32(cn.pipeBytes), spliceFlags(cn.pipeBytes < n))
		l.queue(e, opBodyOut, cn)
		return
	}
	k := min(n, p.cap, room)
	e := l.sqe()
	e.PrepareSplice(fd, off, p.w, -1, uint32(k), unix.SPLICE_F_NONBLOCK)
	e.Flags = giouring.SqeIOLink
	l.queue(e, opBodyIn, cn)
	cn.bodyLen = int32(k)
	e = l.sqe()
	e.PrepareSplice(p.r, -1, cn.fd, -1, uint32(k), spliceFlags(k < n))
	l.queue(e, opBodyOut, cn)
}

func spliceFlags(more bool) uint32 {
	if more {
		return unix.SPLICE_F_NONBLOCK | unix.SPLICE_F_MORE
	}
	return unix.SPLICE_F_NONBLOCK
}

// chainStep accounts for one CQE of the chain; the last one releases the
// pinned memory, and the carrier once the body is out of it and whole
// (until then the carrier stays with the connection, whose next chain
// sends what the pipe holds first).
func (l *loop) chainStep(cn *conn) {
	if cn.chain--; cn.chain > 0 {
		return
	}
	cn.pin.Unpin()
	if cn.pipeActive {
		cn.pipeActive = false
		l.pipesActive--
	}
	switch {
	case cn.pipeBytes > 0:
	case cn.bodyPipe >= 0, cn.closing, cn.c.Out().N == 0:
		// A pipe goes back as soon as it is empty, a chunk when the
		// body is out.
		l.releaseCarrier(cn)
	}
}

// releaseCarrier gives the connection's pipe or chunk back; a pipe that
// still holds bytes is closed.
func (l *loop) releaseCarrier(cn *conn) {
	if cn.bodyPipe >= 0 {
		l.pipes.put(cn.bodyPipe, cn.pipeBytes > 0, l.stats)
	}
	if cn.chunk >= 0 {
		l.chunks.put(cn.chunk)
	}
	cn.bodyPipe, cn.chunk, cn.pipeBytes = -1, -1, 0
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
	case cn.bodyPipe >= 0 && res > 0:
		// A splice may move less than asked (a pipe holds a bounded
		// number of pages); the link is broken and the next chain
		// drains the pipe.
		cn.pipeBytes += int64(res)
	case cn.bodyPipe < 0 && res == cn.bodyLen:
	default:
		// A short read, or no bytes at all: the file shrank since it was
		// opened, and the promised length cannot be sent; only closing
		// tells the client.
		l.close(cn)
	}
	l.chainStep(cn)
}

// onBodyPoll: the socket has room (or an error, which the splice linked
// behind the poll will meet).
func (l *loop) onBodyPoll(cn *conn, res int32) {
	switch {
	case res >= 0:
		cn.polled = true
	case res != -int32(unix.ECANCELED):
		l.close(cn)
	}
	l.chainStep(cn)
}

func (l *loop) onBodyOut(cn *conn, res int32) {
	switch {
	case res > 0:
		if cn.bodyPipe >= 0 {
			cn.pipeBytes = max(cn.pipeBytes-int64(res), 0)
			// A short splice: the socket is full. The next chain
			// waits for room first.
			cn.pollOut = cn.pipeBytes > 0
		}
		switch {
		case cn.closing:
		case cn.memSend:
			// Linked CQEs arrive in order; should they not, Sent must
			// still see the Mem bytes first.
			cn.lateBody += int64(res)
		default:
			cn.c.Sent(int64(res))
		}
	case res == -int32(unix.EAGAIN) && cn.bodyPipe >= 0:
		cn.pollOut = true // the socket took nothing: wait for room
	case res == -int32(unix.ECANCELED):
	default:
		l.close(cn)
	}
	l.chainStep(cn)
}

// servePipeWaiters drives the connections waiting for a pipe, oldest
// first, while a pipe may be had or none will come back (then they take
// the fallback).
func (l *loop) servePipeWaiters() {
	for len(l.pipeWait) > 0 && (l.pipes.available() || l.pipesActive == 0) {
		_, gen, slot := unpack(l.pipeWait[0])
		l.pipeWait = l.pipeWait[1:]
		cn := l.conns[slot]
		if !cn.live || cn.gen != gen || !cn.waiting {
			continue
		}
		cn.waiting = false
		l.drive(cn)
	}
}

// trim runs once a second: carriers that no connection took since the
// last call are closed or unmapped, so that a burst's pipes go back to the
// budget that every loop shares.
func (l *loop) trim() {
	if l.pipes != nil {
		l.pipes.trim(l.stats)
	}
	l.chunks.trim()
}

// chunks are the buffers file bodies are read into before they are sent:
// each chunkSize bytes, mmap'd on demand (the kernel writes into one from
// the read's SQE to its CQE, outside the Go heap), owned by one
// connection's chain from the body's start to its end, then kept for
// reuse until trim finds them idle.
type chunks struct {
	mem  [][]byte // nil: unmapped
	free []int32
	used []bool // taken since the last trim
}

func (c *chunks) get() int32 {
	if n := len(c.free); n > 0 {
		i := c.free[n-1]
		c.free = c.free[:n-1]
		c.used[i] = true
		return i
	}
	b, err := unix.Mmap(-1, 0, chunkSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return -1
	}
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

func (c *chunks) put(i int32)        { c.free = append(c.free, i) }
func (c *chunks) buf(i int32) []byte { return c.mem[i] }

func (c *chunks) trim() {
	keep := c.free[:0]
	for _, i := range c.free {
		if c.used[i] {
			c.used[i] = false
			keep = append(keep, i)
			continue
		}
		unix.Munmap(c.mem[i])
		c.mem[i] = nil
	}
	c.free = keep
}

// close unmaps every chunk; no read or send may be in flight.
func (c *chunks) close() {
	for i, m := range c.mem {
		if m != nil {
			unix.Munmap(m)
			c.mem[i] = nil
		}
	}
	c.free = nil
}

// pipes are the loop's pipes for file bodies, made on demand within the
// budget that every loop shares, sized to the body (64 KiB, 256 KiB or
// 1 MiB, at most fs.pipe-max-size), kept while free until trim finds them
// idle.
type pipes struct {
	p      []pipe // r < 0: closed
	free   []int32
	budget *pipeBudget
}

type pipe struct {
	r, w  int
	cap   int64
	pages int64 // taken from the budget
	used  bool  // taken since the last trim
}

// pipeSizes are the sizes a new pipe may get, largest first: a body gets
// the smallest that holds it whole, or the largest, and a smaller one when
// the budget has not room for it. A smaller pipe costs more splices per
// body, each a trip through an io_uring worker.
var pipeSizes = []int64{1 << 20, 256 << 10, 64 << 10}

const pageSize = 4096

// want is the pipe size for a body of n bytes: the smallest size that
// holds it whole, else the largest allowed.
func (ps *pipes) want(n int64) int64 {
	w := int64(0)
	for _, s := range pipeSizes {
		if s <= ps.budget.maxSize && (w == 0 || s >= n) {
			w = s
		}
	}
	return w
}

// get returns a pipe for a body of n bytes: the smallest free one of at
// least the size it wants, else a new one within the budget (smaller when
// the budget is short), else the largest free one, else -1.
func (ps *pipes) get(n int64, st *core.Stats) int32 {
	want := ps.want(n)
	fit, largest := int32(-1), int32(-1)
	for _, i := range ps.free {
		c := ps.p[i].cap
		if c >= want && (fit < 0 || c < ps.p[fit].cap) {
			fit = i
		}
		if largest < 0 || c > ps.p[largest].cap {
			largest = i
		}
	}
	if fit >= 0 {
		return ps.take(fit)
	}
	if i := ps.make(want, st); i >= 0 {
		return i
	}
	if largest >= 0 {
		return ps.take(largest)
	}
	return -1
}

// available reports whether get would find a pipe of some size.
func (ps *pipes) available() bool {
	return len(ps.free) > 0 || ps.budget.left.Load() >= pipeSizes[len(pipeSizes)-1]/pageSize
}

func (ps *pipes) take(i int32) int32 {
	for k, j := range ps.free {
		if j == i {
			ps.free = append(ps.free[:k], ps.free[k+1:]...)
			break
		}
	}
	ps.p[i].used = true
	return i
}

// make opens a pipe of size want, or of the largest smaller size the
// budget has room for; -1 when it has not room for the smallest.
func (ps *pipes) make(want int64, st *core.Stats) int32 {
	size := int64(-1)
	for _, s := range pipeSizes {
		if s <= want && ps.budget.take(s/pageSize) {
			size = s
			break
		}
	}
	if size < 0 {
		return -1
	}
	var fds [2]int
	st.Syscalls[core.SysPipe]++
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		ps.budget.give(size / pageSize)
		return -1
	}
	c := int64(defaultPipe)
	if size > defaultPipe {
		st.Syscalls[core.SysFcntl]++
		// F_SETPIPE_SZ returns the size it set. It fails when the user's
		// pipes already exceed fs.pipe-user-pages-soft (other processes
		// took the share the budget leaves them); the pipe keeps its
		// 64 KiB.
		if got, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, int(size)); err == nil {
			c = int64(got)
		}
	}
	ps.budget.give((size - c) / pageSize)
	pp := pipe{r: fds[0], w: fds[1], cap: c, pages: c / pageSize, used: true}
	for i := range ps.p {
		if ps.p[i].r < 0 {
			ps.p[i] = pp
			return int32(i)
		}
	}
	ps.p = append(ps.p, pp)
	return int32(len(ps.p) - 1)
}

// put gives pipe i back: to the free list, or closed when it may still
// hold bytes.
func (ps *pipes) put(i int32, dirty bool, st *core.Stats) {
	if dirty {
		ps.closeOne(i, st)
		return
	}
	ps.free = append(ps.free, i)
}

func (ps *pipes) closeOne(i int32, st *core.Stats) {
	if st != nil {
		st.Syscalls[core.SysClose] += 2
	}
	unix.Close(ps.p[i].r)
	unix.Close(ps.p[i].w)
	ps.budget.give(ps.p[i].pages)
	ps.p[i] = pipe{r: -1, w: -1}
}

func (ps *pipes) trim(st *core.Stats) {
	keep := ps.free[:0]
	for _, i := range ps.free {
		if ps.p[i].used {
			ps.p[i].used = false
			keep = append(keep, i)
			continue
		}
		ps.closeOne(i, st)
	}
	ps.free = keep
}

// close closes every pipe; no splice may be in flight.
func (ps *pipes) close() {
	for i := range ps.p {
		if ps.p[i].r >= 0 {
			ps.closeOne(int32(i), nil)
		}
	}
	ps.free = nil
}
