package uring

import (
	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// pipes are the loop's pipes for file bodies, and the carrier that splices
// through them: file range → pipe, then pipe → socket, copying no byte,
// on io_uring's workers. They carry the default's bodies while the
// server's cold window is open (sendfiles.plan), and every body with
// --uring-body=splice. Nothing of them runs otherwise: no pipe is made,
// no budget is taken, no body is counted.
//
// The chain for a part:
//
//	[poll POLLOUT] → [splice file → pipe] → [splice pipe → socket]
//
// A chain takes a pipe for no more bytes than the socket's send buffer
// takes now (sockRoom), so the pipe is empty when the chain ends and goes
// back to the loop at once; a socket without room is waited for by poll,
// holding no pipe. Pipes are made on demand within the pipe budget that
// the server's loops share (splice_budget_linux.go), sized to the body
// (64 KiB, 256 KiB or 1 MiB, at most fs.pipe-max-size), and kept while
// free until trim finds them idle. When the budget is spent, a body waits
// in line while a chain that waits for no client holds a pipe (it comes
// back within a splice), else takes the fallback until the body is out
// (counted in ownBodyFallbacks).
//
// Sockets are non-blocking. IORING_OP_SPLICE always runs on an io_uring
// worker (the kernel punts it, REQ_F_FORCE_ASYNC), and a splice to a
// blocking socket would keep the worker until the client has read the
// lot. To a non-blocking one it moves what the socket takes and returns:
// a short count or -EAGAIN. Should that leave bytes in the pipe, the pipe
// stays with the connection (those bytes are its client's), and the next
// chain waits for room by poll, not on a worker:
//
//	[poll POLLOUT] → [splice pipe → socket]
//
// Each splice reports the bytes the socket took, so Sent, and with it the
// write timeout, follow progress.
type pipes struct {
	p        []pipe // r < 0: closed
	free     []int32
	budget   *pipeBudget
	st       *core.Stats
	sys      loops.Sys // the loop's (l.sys)
	fallback planner   // what a body takes when no pipe can come back soon

	slots   []spliced // by connection slot, grown as slots are first seen here
	counted int       // slots counted in budget.bodies
	active  int       // pipes held by chains that wait for no client
	wait    []uint64  // connections waiting for one of them, oldest first
}

// spliced is a connection's state in the pipes: what its body under way
// left in a pipe, and where it stands with the budget.
type spliced struct {
	inPipe  int64 // body bytes in the pipe, not yet in the socket
	pollOut bool  // the socket was full: the next chain waits for POLLOUT first
	polled  bool  // a chain that held no pipe waited for POLLOUT: the socket has room now
	active  bool  // its chain holds a pipe and waits for no client (pipes.active)
	waiting bool  // in line for a pipe (pipes.wait)
	counted bool  // counted in pipeBudget.bodies, from its first chain here to its body's end
}

// of is cn's state, the slot grown on first use.
func (ps *pipes) of(cn *conn) *spliced {
	for int(cn.slot) >= len(ps.slots) {
		ps.slots = append(ps.slots, spliced{})
	}
	return &ps.slots[cn.slot]
}

// bodyDone: cn's body is out, or never will be: it is no longer counted.
func (ps *pipes) bodyDone(cn *conn) {
	if ps.counted == 0 || int(cn.slot) >= len(ps.slots) {
		return
	}
	if s := &ps.slots[cn.slot]; s.counted {
		s.counted = false
		ps.counted--
		ps.budget.bodies.Add(-1)
	}
}

// forget clears cn's state when its slot is freed.
func (ps *pipes) forget(cn *conn) {
	if int(cn.slot) < len(ps.slots) {
		ps.bodyDone(cn)
		ps.slots[cn.slot] = spliced{}
	}
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

// plan: a pipe the connection holds still has bytes a short chain left
// (an empty one went back when its chain ended): the chain only drains
// it, after a POLLOUT wait when the socket was full. Otherwise the chain
// fills a new pipe with no more than the socket takes now: then the pipe
// is empty again when the chain ends, and goes back at once. A socket
// with no room is waited for without a pipe.
func (ps *pipes) plan(l *loop, cn *conn, n int64, header bool) chainPlan {
	b, s := &cn.body, ps.of(cn)
	if s.waiting {
		return planNone // servePipeWaiters drives it
	}
	if !s.counted {
		s.counted = true
		ps.counted++
		ps.budget.bodies.Add(1)
	}
	if b.via == ps {
		if header {
			// Out never has header bytes while a body is under way:
			// the core parses no further request until the body is out.
			l.close(cn)
			return planNone
		}
		p := chainPlan{steps: 1}
		if s.pollOut {
			p.poll, s.pollOut = 1, false
		}
		return p
	}
	room, wait := ps.sockRoom(l, cn, s)
	if wait {
		return planNone // fixedfd_linux.go: the fd getsockopt takes is on its way
	}
	if room <= 0 {
		s.polled = true // once its CQE has come (the next plan), the socket has room
		return planPoll
	}
	if !ps.resident(l, cn, min(room, n, pipeSizes[0])) {
		// Not in the page cache: the body goes by chunk (read and send)
		// till its end. The file → pipe splice always runs on an io-wq
		// worker, and would hold it while the disk reads; the worker
		// is one of the few (maxWorkers) that every warm client's pipe
		// → socket splice and every shutdown also need. A READ of a
		// regular file on ext4, xfs or btrfs waits for its pages
		// without a worker (async buffered reads).
		ps.st.Own[ownBodyCold]++
		l.srv.Cold.Note(l.core.Now()) // and sendfiles splice meanwhile
		ps.bodyDone(cn)               // it holds a chunk to its end
		return l.bodies.chunks.planRead(l, cn, n)
	}
	switch i := ps.get(min(room, n)); {
	case i >= 0:
		b.via, b.idx, s.active = ps, i, true
		ps.active++
		ps.budget.held.Add(1)
		b.asked = int32(min(n, ps.p[i].cap, room))
		return chainPlan{steps: 2}
	case ps.active > 0:
		// The budget is spent, but a chain that waits for no client
		// holds a pipe: it comes back within a splice.
		s.waiting = true
		ps.wait = append(ps.wait, pack(0, cn.gen, cn.slot))
		return planNone
	default:
		// Every pipe waits for its client: the fallback.
		ps.st.Own[ownBodyFallbacks]++
		ps.bodyDone(cn)
		return ps.fallback.plan(l, cn, n, header)
	}
}

// resident reports whether the next n bytes of cn's body are all in the
// page cache (residency). Where the kernel cannot tell (before Linux 6.5:
// ENOSYS; some file systems: EOPNOTSUPP), bodies splice.
func (ps *pipes) resident(l *loop, cn *conn, n int64) bool {
	cached, known := l.residency(cn, n)
	return cached || !known
}

// queue queues file → pipe → socket for the next part of the body
// (io_uring_prep_splice(3)), or only pipe → socket when a short chain left
// bytes in the pipe. SPLICE_F_NONBLOCK makes the pipe side never wait; the
// socket side never waits because the socket is non-blocking.
func (ps *pipes) queue(l *loop, cn *conn, fd int, off, n int64) {
	b, s := &cn.body, ps.of(cn)
	p := &ps.p[b.idx]
	if s.inPipe > 0 {
		e := l.sqe()
		e.PrepareSplice(p.r, -1, cn.fd, -1, uint32(s.inPipe), spliceFlags(s.inPipe < n))
		l.queue(e, opBodyOut, cn)
		return
	}
	k := int64(b.asked)
	e := l.sqe()
	e.PrepareSplice(fd, off, p.w, -1, uint32(k), unix.SPLICE_F_NONBLOCK)
	e.Flags = giouring.SqeIOLink
	l.queue(e, opBodyIn, cn)
	cn.c.BodyWait() // to its CQE: held to --fs-timeout (onBodyIn)
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

// in: a splice may move less than asked (a pipe holds a bounded number of
// pages); the link is broken and the next chain drains the pipe. No bytes
// at all: the file shrank since it was opened.
func (ps *pipes) in(cn *conn, res int32) bool {
	if res <= 0 {
		return false
	}
	ps.of(cn).inPipe += int64(res)
	return true
}

// out: a short splice means the socket is full, and -EAGAIN that it took
// nothing; either way the next chain waits for room first.
func (ps *pipes) out(cn *conn, res int32) bool {
	s := ps.of(cn)
	switch {
	case res > 0:
		s.inPipe = max(s.inPipe-int64(res), 0)
		s.pollOut = s.inPipe > 0
	case res == -int32(unix.EAGAIN):
		s.pollOut = true
	default:
		return false
	}
	return true
}

// ended gives the pipe back as soon as it is empty; one that holds bytes
// stays with the connection, whose next chain sends them first.
func (ps *pipes) ended(cn *conn) {
	s := ps.of(cn)
	if s.active {
		s.active = false
		ps.active--
	}
	if s.inPipe == 0 {
		cn.releaseBody()
	}
}

// release gives the pipe back; one that still holds bytes is closed.
func (ps *pipes) release(cn *conn) {
	s := ps.of(cn)
	ps.budget.held.Add(-1)
	ps.put(cn.body.idx, s.inPipe > 0)
	s.inPipe = 0
}

// sockRoom is how many body bytes the socket's send buffer takes now:
// half of its size less what is queued, as the kernel counts them
// (SO_MEMINFO). The kernel counts each packet's overhead too, so the
// whole difference overshoots: with a small margin, clients that do not
// read kept bytes in their pipes in a scripts/stall run; with half, none
// did. After a poll said POLLOUT there is room for at least some bytes,
// whatever the estimate. wait: the connection is a direct descriptor
// whose fd is being installed (sysFd).
func (ps *pipes) sockRoom(l *loop, cn *conn, s *spliced) (room int64, wait bool) {
	fd, wait := l.sock.sysFd(l, cn)
	switch {
	case wait:
		return 0, true
	case fd < 0:
		return defaultPipe, false // no fd to be had: the splice will tell
	}
	sndbuf, queued, err := l.sockMem(fd)
	if err != nil {
		return defaultPipe, false // the splice will tell
	}
	room = (sndbuf - queued) / 2
	if s.polled {
		room = max(room, defaultPipe)
		s.polled = false
	}
	return room &^ (pageSize - 1), false
}

// servePipeWaiters drives the connections waiting for a pipe, oldest
// first, while a pipe may be had or none will come back (then they take
// the fallback). The loop calls it once per pass, after the pass's CQEs,
// which are what give pipes back.
func (l *loop) servePipeWaiters() {
	ps := &l.bodies.pipes
	for len(ps.wait) > 0 && (ps.available() || ps.active == 0) {
		_, gen, slot := unpack(ps.wait[0])
		ps.wait = ps.wait[1:]
		cn := l.conns[slot]
		if cn.life == lifeFree || cn.gen != gen || !ps.of(cn).waiting {
			continue
		}
		ps.of(cn).waiting = false
		l.drive(cn)
	}
}

// want is the pipe size for a body of n bytes: the smallest size that
// holds it whole, else the largest allowed, where a size past the
// smallest is allowed only while the budget has room for the bodies in
// flight (pipeBudget.roomFor).
func (ps *pipes) want(n int64) int64 {
	w := int64(0)
	for _, s := range pipeSizes {
		if s <= ps.budget.maxSize && (w == 0 || s >= n) && ps.budget.roomFor(s) {
			w = s
		}
	}
	if w == 0 {
		w = pipeSizes[len(pipeSizes)-1]
	}
	return w
}

// get returns a pipe for a body of n bytes: the smallest free one of at
// least the size it wants, else a new one within the budget (smaller when
// the budget is short), else the largest free one, else -1.
func (ps *pipes) get(n int64) int32 {
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
		if c := ps.p[fit].cap; c > want && !ps.budget.roomFor(c) {
			ps.shrink(fit, want)
		}
		return ps.take(fit)
	}
	if i := ps.make(want); i >= 0 {
		return i
	}
	if largest >= 0 {
		return ps.take(largest)
	}
	return -1
}

// shrink makes free (so empty) pipe i size bytes, giving the pages back
// to the budget: pipes made while few bodies were in flight (a ramp-up's
// first clients) are kept while in use, and at 10,000 clients of a 1 MiB
// file the 1 MiB pipes of the first ones stayed, holding the whole budget,
// and every later body took the fallback (results/2026-12-01_uring-c10k).
func (ps *pipes) shrink(i int32, size int64) {
	p := &ps.p[i]
	got, err := ps.sys.Fcntl(p.w, unix.F_SETPIPE_SZ, int(size))
	if err != nil || int64(got) >= p.cap {
		return
	}
	c := int64(got)
	ps.budget.give(p.pages - c/pageSize)
	ps.st.Own[ownPipeBytes] -= p.cap - c
	p.cap, p.pages = c, c/pageSize
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
func (ps *pipes) make(want int64) int32 {
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
	if err := ps.sys.Pipe2(&fds, unix.O_CLOEXEC); err != nil {
		ps.budget.give(size / pageSize)
		return -1
	}
	c := int64(defaultPipe)
	if size > defaultPipe {
		// F_SETPIPE_SZ returns the size it set. It fails when the user's
		// pipes already exceed fs.pipe-user-pages-soft (other processes
		// took the share the budget leaves them); the pipe keeps its
		// 64 KiB.
		if got, err := ps.sys.Fcntl(fds[1], unix.F_SETPIPE_SZ, int(size)); err == nil {
			c = int64(got)
		}
	}
	ps.budget.give((size - c) / pageSize)
	pp := pipe{r: fds[0], w: fds[1], cap: c, pages: c / pageSize, used: true}
	ps.st.Own[ownPipes]++
	ps.st.Own[ownPipeBytes] += c
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
func (ps *pipes) put(i int32, dirty bool) {
	if dirty {
		ps.closeOne(i, true)
		return
	}
	ps.free = append(ps.free, i)
}

// closeOne closes pipe i; counted says whether the loop's counters still
// count (not at teardown).
func (ps *pipes) closeOne(i int32, counted bool) {
	if counted {
		ps.sys.Close(ps.p[i].r)
		ps.sys.Close(ps.p[i].w)
	} else {
		unix.Close(ps.p[i].r) // uncounted: teardown
		unix.Close(ps.p[i].w) // uncounted: teardown
	}
	ps.budget.give(ps.p[i].pages)
	ps.st.Own[ownPipes]--
	ps.st.Own[ownPipeBytes] -= ps.p[i].cap
	ps.p[i] = pipe{r: -1, w: -1}
}

func (ps *pipes) trim() {
	keep := ps.free[:0]
	for _, i := range ps.free {
		if ps.p[i].used {
			ps.p[i].used = false
			keep = append(keep, i)
			continue
		}
		ps.closeOne(i, true)
	}
	ps.free = keep
}

// close closes every pipe; no splice may be in flight.
func (ps *pipes) close() {
	for i := range ps.p {
		if ps.p[i].r >= 0 {
			ps.closeOne(int32(i), false)
		}
	}
	ps.free = nil
}
