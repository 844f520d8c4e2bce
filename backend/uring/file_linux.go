package uring

import (
	"runtime"
	"strings"
	"sync"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// fileCalls is core.FileCalls through the loop's ring: the core's helper
// goroutines call it for what the loop's probe found cold (a warm miss is
// loaded on the loop, core/fsop.go), and each call becomes one SQE (IORING_OP_OPENAT2,
// IORING_OP_STATX, IORING_OP_READ, IORING_OP_CLOSE) that the loop prepares
// and submits, since with SINGLE_ISSUER only its thread may touch the
// ring. The calling goroutine waits for the CQE; no thread of ours waits
// for the disk (the kernel tries an open's lookup and a buffered read
// inline, and runs the rest on io-wq).
//
//	helper goroutine                          loop thread
//	take a slot, fill its mmap'd memory
//	queue it, core.Loop.Post(issue)  ──────▶  issue: prepare the SQE by hand
//	wait on the reply                         ... CQE (opFile, gen, slot)
//	                                 ◀──────  copy the statx out, reply, free the slot
//
// A slot's memory (the NUL-terminated path, the open_how, the statx the
// kernel writes) is mmap'd, outside the Go heap; a Pread's buffer is the
// caller's, pinned by the caller until the reply. giouring's
// PrepareOpenat2 would issue IORING_OP_OPENAT, dropping open_how and with
// it RESOLVE_BENEATH, and its Openat and Statx helpers pass the address of
// the slice header: prepFile fills each field as liburing's
// io_uring_prep_openat2(3), io_uring_prep_statx(3) and
// io_uring_prep_read(3) do.
//
// Shutdown (Teardown → shutdown): calls not yet issued are answered
// ECANCELED; issued ones are cancelled (ASYNC_CANCEL); an open or statx,
// whose memory is the slot's, is answered ECANCELED at once, and its CQE
// still awaited by drain, which closes the fd an open made after its
// caller gave up; a read, whose memory is the caller's, is answered when
// its CQE comes. Calls after that get ECANCELED, and Close a close(2).
type fileCalls struct {
	l     *loop
	mem   []byte     // fileSlots slots of fileSlotSize bytes, mmap'd
	slots []*fileReq // by index; immutable

	mu     sync.Mutex
	cond   sync.Cond  // a slot is free, or closed
	free   []*fileReq // guarded by mu
	q      []*fileReq // guarded by mu: filled, not yet issued
	posted bool       // guarded by mu: an issue is posted and has not run
	closed bool       // guarded by mu: the loop is tearing down

	spare  []*fileReq // loop thread: issue's other queue
	issued int        // loop thread: slots whose CQE has not come
}

// fileSlots bounds the calls in flight per loop; callers beyond it wait
// for a slot. The core's helper pool has 32 goroutines for all loops.
// A slot holds the open_how, the statx, then a path of up to PATH_MAX
// bytes with its NUL: touched as used, one page for a path shorter than
// 3.7 KiB. With the path first, every slot used took its second page
// for the statx: 256 KiB more of a loop after a burst of misses
// (results/2026-12-02_b966187_c10k-rss).
const (
	fileSlots    = 64
	fileSlotSize = 8 << 10
	pathMax      = 4096
	howOff       = 0
	statxOff     = 64
	pathOff      = statxOff + 256 // after the statx (struct statx is 256 bytes)
)

type fileKind uint8

const (
	fileOpen fileKind = iota + 1
	fileStatx
	fileRead
	fileClose
)

// fileReq is one slot. Its call fields are written by the caller under
// mu before it is queued, then read by the loop; the rest is the loop's.
type fileReq struct {
	idx  uint32
	mem  []byte // the slot's part of fileCalls.mem
	kind fileKind
	fd   int32
	off  uint64
	n    uint32
	flag uint32 // statx flags
	mask uint32 // statx mask
	p    []byte // read: the caller's buffer, pinned by the caller
	st   *unix.Statx_t
	rep  chan fileReply

	gen  uint32 // loop: user_data generation of the issued SQE
	gone bool   // loop: the caller was answered; the CQE only frees the slot
}

// fileReply is a call's answer. leak: the loop went away with the read
// still in the kernel (drain timed out), so the caller must keep its
// buffer pinned for good.
type fileReply struct {
	res  int32
	leak bool
}

var replies = sync.Pool{New: func() any { return make(chan fileReply, 1) }}

// leaked keeps the Pinners of reads the kernel may still write into after
// their loop gave up waiting (an unpinned Pinner that is collected while
// pinning is a fatal error, and the memory must stay put anyway).
var leaked struct {
	sync.Mutex
	pins []*runtime.Pinner
}

func newFileCalls(l *loop) (*fileCalls, error) {
	mem, err := l.sys.Mmap(fileSlots * fileSlotSize)
	if err != nil {
		return nil, err
	}
	f := &fileCalls{l: l, mem: mem, slots: make([]*fileReq, fileSlots)}
	f.cond.L = &f.mu
	for i := range f.slots {
		off := i * fileSlotSize
		r := &fileReq{idx: uint32(i), mem: mem[off : off+fileSlotSize : off+fileSlotSize]}
		f.slots[i] = r
		f.free = append(f.free, r)
	}
	return f, nil
}

var _ core.FileCalls = (*fileCalls)(nil)

// Openat2 is openat2(2) through IORING_OP_OPENAT2. The kernel tries it
// first on the loop's thread, where it calls the file system's open
// (FUSE's OPEN goes to its daemon): the core asks only for opens confined
// to a local mount (core.FileCalls), which wait for nothing there.
func (f *fileCalls) Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	res, err := f.call(nil, func(r *fileReq) error {
		if err := r.setPath(path); err != nil {
			return err
		}
		r.kind, r.fd = fileOpen, int32(dirfd)
		*openHowAt(r.mem[howOff:]) = *how
		return nil
	})
	return int(res), err
}

// Statx is statx(2) through IORING_OP_STATX.
func (f *fileCalls) Statx(dirfd int, path string, flags, mask int, st *unix.Statx_t) error {
	_, err := f.call(nil, func(r *fileReq) error {
		if err := r.setPath(path); err != nil {
			return err
		}
		r.kind, r.fd, r.flag, r.mask, r.st = fileStatx, int32(dirfd), uint32(flags), uint32(mask), st
		return nil
	})
	return err
}

// Pread is pread(2) through IORING_OP_READ into p, which stays pinned
// until the kernel is done with it. A READ of a file opened O_NONBLOCK on
// a file system without FMODE_NOWAIT (FUSE, NFS, 9p) completes with
// -EAGAIN instead of going to a worker; the caller is a helper goroutine,
// which may wait, so the read is then made by pread(2) on its thread.
func (f *fileCalls) Pread(fd int, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var pin runtime.Pinner
	pin.Pin(&p[0])
	res, err := f.call(&pin, func(r *fileReq) error {
		r.kind, r.fd, r.p, r.n, r.off = fileRead, int32(fd), p, uint32(min(len(p), 1<<30)), uint64(off)
		return nil
	})
	pin.Unpin()
	if err == unix.EAGAIN {
		return core.DirectCalls{}.Pread(fd, p, off)
	}
	return int(res), err
}

// Close is close(2) through IORING_OP_CLOSE, or directly once the loop
// has gone: an fd must not outlive its loop.
func (f *fileCalls) Close(fd int) error {
	_, err := f.call(nil, func(r *fileReq) error {
		r.kind, r.fd = fileClose, int32(fd)
		return nil
	})
	if err == unix.ECANCELED {
		return core.DirectCalls{}.Close(fd)
	}
	return err
}

func (r *fileReq) setPath(path string) error {
	if len(path) >= pathMax {
		return unix.ENAMETOOLONG
	}
	if strings.IndexByte(path, 0) >= 0 {
		return unix.EINVAL
	}
	copy(r.mem[pathOff:], path)
	r.mem[pathOff+len(path)] = 0
	return nil
}

// call makes one call (once), again while the kernel answers EINTR, as
// core.FileCalls asks: an io-wq worker's wait on a file system can be cut
// short by a signal, as a thread's can. A close is never made again: its
// fd is gone whatever it returns (close(2)).
func (f *fileCalls) call(pin *runtime.Pinner, fill func(*fileReq) error) (int32, error) {
	for {
		var kind fileKind
		res, err := f.once(pin, func(r *fileReq) error {
			err := fill(r)
			kind = r.kind
			return err
		})
		if err != unix.EINTR || kind == fileClose {
			return res, err
		}
	}
}

// once takes a slot, fills it, queues it for the loop and waits for the
// reply. pin, when given, holds the caller's buffer: on a leaked reply it
// is kept pinned.
func (f *fileCalls) once(pin *runtime.Pinner, fill func(*fileReq) error) (int32, error) {
	rep := replies.Get().(chan fileReply)
	f.mu.Lock()
	for !f.closed && len(f.free) == 0 {
		f.cond.Wait()
	}
	if f.closed {
		f.mu.Unlock()
		replies.Put(rep)
		return 0, unix.ECANCELED
	}
	r := f.free[len(f.free)-1]
	f.free = f.free[:len(f.free)-1]
	if err := fill(r); err != nil {
		r.reset()
		f.free = append(f.free, r)
		f.mu.Unlock()
		replies.Put(rep)
		return 0, err
	}
	r.rep = rep
	f.q = append(f.q, r)
	post := !f.posted
	f.posted = true
	f.mu.Unlock()
	if post {
		f.l.core.Post(f.issue)
	}
	a := <-rep
	replies.Put(rep)
	if a.leak && pin != nil {
		p := new(runtime.Pinner)
		*p = *pin // the Pinner's pins move with its value
		*pin = runtime.Pinner{}
		leaked.Lock()
		leaked.pins = append(leaked.pins, p)
		leaked.Unlock()
	}
	if a.res < 0 {
		return 0, unix.Errno(-a.res)
	}
	return a.res, nil
}

func (r *fileReq) reset() {
	r.kind, r.p, r.st, r.rep, r.gone = 0, nil, nil, nil, false
}

// issue runs on the loop's thread (posted by call): it prepares an SQE
// for every queued slot; the pass's enter submits them.
func (f *fileCalls) issue() {
	f.mu.Lock()
	q := f.q
	f.q, f.posted = f.spare[:0], false
	f.mu.Unlock()
	for i, r := range q {
		f.prep(r)
		q[i] = nil
	}
	f.spare = q[:0]
}

// prep fills r's SQE field by field (the kernel's struct io_uring_sqe).
func (f *fileCalls) prep(r *fileReq) {
	l := f.l
	e := l.sqe() // zeroed: ioprio, buf_index, personality, file_index 0
	e.Fd = r.fd
	switch r.kind {
	case fileOpen: // io_uring_prep_openat2(3)
		e.OpCode = giouring.OpOpenat2
		e.Addr = uint64(addrOf(r.mem[pathOff:]))
		e.Len = openHowSize
		e.Off = uint64(addrOf(r.mem[howOff:]))
	case fileStatx: // io_uring_prep_statx(3)
		e.OpCode = giouring.OpStatx
		e.Addr = uint64(addrOf(r.mem[pathOff:]))
		e.Len = r.mask
		e.Off = uint64(addrOf(r.mem[statxOff:]))
		e.OpcodeFlags = r.flag
	case fileRead: // io_uring_prep_read(3)
		e.OpCode = giouring.OpRead
		e.Addr = uint64(addrOf(r.p))
		e.Len = r.n
		e.Off = r.off
	case fileClose: // io_uring_prep_close(3)
		e.OpCode = giouring.OpClose
	}
	r.gen = (r.gen + 1) & genMask
	f.issued++
	l.queueAs(e, opFile, r.gen, r.idx)
}

// complete handles an opFile CQE: it answers the caller, or, when the
// caller was answered at shutdown, closes the fd an open made for no one.
func (f *fileCalls) complete(gen, slot uint32, res int32) {
	if int(slot) >= len(f.slots) || f.slots[slot].gen != gen || f.slots[slot].kind == 0 {
		return // a bug: a CQE for a slot not in flight
	}
	r := f.slots[slot]
	f.issued--
	switch {
	case r.gone:
		if r.kind == fileOpen && res >= 0 {
			f.l.sys.Close(int(res))
		}
	default:
		if r.kind == fileStatx && res >= 0 {
			*r.st = *statxAt(r.mem[statxOff:])
		}
		r.rep <- fileReply{res: res}
	}
	f.mu.Lock()
	r.reset()
	f.free = append(f.free, r)
	f.cond.Signal()
	f.mu.Unlock()
}

// shutdown runs on the loop's thread in Teardown, before drain: no call
// is taken any more, those not issued are answered, and (cancel: the ring
// works) issued ones are cancelled, and their callers answered unless the
// kernel may still write into their buffer or a close's outcome is open.
func (f *fileCalls) shutdown(cancel bool) {
	f.mu.Lock()
	f.closed = true
	q := f.q
	f.q = nil
	for _, r := range q {
		r.rep <- fileReply{res: -int32(unix.ECANCELED)}
		r.reset()
		f.free = append(f.free, r)
	}
	f.cond.Broadcast()
	f.mu.Unlock()
	for _, r := range f.slots {
		if !cancel || r.kind == 0 || r.gone || r.rep == nil {
			continue
		}
		f.l.cancelLoopOp(pack(opFile, r.gen, r.idx))
		// A close is answered by its CQE: ECANCELED makes the caller
		// close the fd itself, which must not happen twice.
		if r.kind == fileOpen || r.kind == fileStatx {
			r.rep <- fileReply{res: -int32(unix.ECANCELED)}
			r.gone = true
		}
	}
}

// abandon runs when the loop leaves without the last CQEs (drain timed
// out, or the ring failed): the calls still in the kernel are answered,
// a read's buffer pinned for good, and the slots' memory stays mapped.
func (f *fileCalls) abandon() {
	for _, r := range f.slots {
		if r.kind != 0 && !r.gone && r.rep != nil {
			r.rep <- fileReply{res: -int32(unix.ECANCELED), leak: true}
			r.gone = true
		}
	}
}

// unmap releases the slots' memory; no SQE may be in flight.
func (f *fileCalls) unmap() {
	if f.mem != nil {
		f.l.sys.Munmap(f.mem)
		f.mem = nil
	}
}
