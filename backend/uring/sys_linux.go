package uring

// unsafe is confined to this file. It does six things:
//
//   - turns memory the kernel reads or writes into the addresses an SQE
//     carries (addrOf). The memory is either mmap'd outside the Go heap, or
//     heap memory pinned with runtime.Pinner for as long as the operation
//     is in flight (heldPins, below, for a connection's sends);
//   - overlays giouring's buffer-ring header, and a zero-copy SENDMSG's
//     msghdr and iovecs (zcLayout), on mmap'd memory;
//   - sets two unexported fields of giouring.Params (ringParams), for the
//     CQ's size;
//   - reads three unexported fields of giouring.Ring (ringView), because the
//     pinned giouring exposes no way to publish the SQ tail without entering
//     the kernel through syscall.Syscall6, nor the ring's features;
//   - enters the kernel (enter), raw when the call cannot block,
//     registers the worker bound (maxWorkers), the ring's fd, the wait
//     region, NAPI busy polling and the table of direct descriptors
//     (Features), and reads a socket's send-buffer use (sockMem).
//
// The loop's io_uring_enter calls and its getsockopt are counted here
// (ring.enter, sockMem), its other system calls by loops.Sys (l.sys).

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// addrOf is the address of p's first byte, for an SQE. p is mmap'd or
// pinned by the caller.
func addrOf(p []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(p))) }

// bufRingAt is the provided-buffer ring laid over mmap'd memory.
func bufRingAt(mem []byte) *giouring.BufAndRing {
	return (*giouring.BufAndRing)(unsafe.Pointer(unsafe.SliceData(mem)))
}

// sqView and ringView mirror giouring v0.0.0-20230826085535-69588b89acb9's
// SubmissionQueue and Ring field for field (the size checks below fail the
// build if a field is added or removed; checkView fails setup if the
// values do not match what the exported API reports).
type sqView struct {
	head, tail, ringMask, ringEntries, flags, dropped, array *uint32
	sqes                                                     unsafe.Pointer
	ringSize                                                 uint
	ringPtr                                                  unsafe.Pointer
	sqeHead, sqeTail                                         uint32
	_                                                        [2]uint32
}

type ringView struct {
	sq          *sqView
	cq          unsafe.Pointer
	flags       uint32
	ringFd      int
	features    uint32
	enterRingFd int
	intFlags    uint8
	_           [3]uint8
	_           uint32
}

var (
	_ [unsafe.Sizeof(ringView{}) - unsafe.Sizeof(giouring.Ring{})]byte
	_ [unsafe.Sizeof(giouring.Ring{}) - unsafe.Sizeof(ringView{})]byte
	_ [unsafe.Sizeof(sqView{}) - unsafe.Sizeof(giouring.SubmissionQueue{})]byte
	_ [unsafe.Sizeof(giouring.SubmissionQueue{}) - unsafe.Sizeof(sqView{})]byte
)

func viewOf(r *giouring.Ring) *ringView { return (*ringView)(unsafe.Pointer(r)) }

// checkView reports whether the mirror reads what giouring itself reports
// for a ring just set up with flags.
func (v *ringView) check(r *giouring.Ring, flags uint32) bool {
	return v.ringFd == r.RingFd() && v.enterRingFd == r.RingFd() && v.flags == flags &&
		v.sq != nil && v.sq.ringEntries != nil && *v.sq.ringEntries == r.SQSpaceLeft() &&
		v.sq.sqeTail == v.sq.sqeHead
}

// flushSQ publishes the SQEs queued since the last flush to the kernel and
// returns how many it has not consumed yet (liburing's __io_uring_flush_sq).
func (v *ringView) flushSQ() uint32 {
	sq := v.sq
	if sq.sqeHead != sq.sqeTail {
		sq.sqeHead = sq.sqeTail
		atomic.StoreUint32(sq.tail, sq.sqeTail)
	}
	return sq.sqeTail - atomic.LoadUint32(sq.head)
}

// paramsHead mirrors the head of giouring.Params, which is struct
// io_uring_params (120 bytes): its fields are unexported, and giouring's
// QueueInit sets only flags, so a CQ larger than twice the SQ
// (IORING_SETUP_CQSIZE) and the SQPOLL thread's CPU and idle time are
// asked for through this.
type paramsHead struct {
	sqEntries, cqEntries, flags uint32
	sqThreadCPU, sqThreadIdle   uint32
}

// giouring.Params is struct io_uring_params, 120 bytes.
var (
	_ [unsafe.Sizeof(giouring.Params{}) - 120]byte
	_ [120 - unsafe.Sizeof(giouring.Params{})]byte
)

// ringParams is a giouring.Params with flags, cqEntries and, for
// IORING_SETUP_SQPOLL, the poll thread's CPU and idle time (ms) set.
func ringParams(flags, cqEntries, sqCPU, sqIdle uint32) *giouring.Params {
	p := new(giouring.Params)
	h := (*paramsHead)(unsafe.Pointer(p))
	h.flags, h.cqEntries = flags, cqEntries
	h.sqThreadCPU, h.sqThreadIdle = sqCPU, sqIdle
	return p
}

// getEventsArg is struct io_uring_getevents_arg (IORING_ENTER_EXT_ARG,
// Linux 5.11): the wait's timeout without an IORING_OP_TIMEOUT SQE.
type getEventsArg struct {
	sigmask     uint64
	sigmaskSz   uint32
	minWaitUsec uint32
	ts          uint64
}

// waitArg holds the argument and its timespec; it lives in the loop struct
// on the heap, which does not move, and the kernel reads it only during
// the call. With --uring-wait-region, enter copies them into reg, the
// argument's slot in the region registered with the ring, which the
// kernel reads in place.
type waitArg struct {
	arg    getEventsArg
	ts     unix.Timespec
	reg    *regWait // nil: no registered region
	regOff uintptr  // reg's offset in the region
}

// regWait is struct io_uring_reg_wait (Linux 6.13), one 64-byte slot of
// a registered wait region.
type regWait struct {
	ts          unix.Timespec
	minWaitUsec uint32
	flags       uint32
	sigmask     uint64
	sigmaskSz   uint32
	_           [3]uint32
	_           [2]uint64
}

const regWaitSize = unsafe.Sizeof(regWait{})

var (
	_ [unsafe.Sizeof(regWait{}) - 64]byte
	_ [64 - unsafe.Sizeof(regWait{})]byte
)

const (
	// enterExtArgReg is IORING_ENTER_EXT_ARG_REG: the argument is an
	// offset into the registered wait region.
	enterExtArgReg = 1 << 6
	// regWaitTS is IORING_REG_WAIT_TS: the slot's ts is set.
	regWaitTS = 1 << 0
)

// getEvents is IORING_ENTER_GETEVENTS, the flag of every enter but
// handOver's.
const getEvents = giouring.EnterGetEvents

// enter is io_uring_enter(2), with the enter flags given. With block
// false it uses RawSyscall6: the call must not sleep long (minComplete 0,
// or a short timeout: a raw wait's rawFor, catchUp's zero), and skipping
// the runtime's entersyscall/exitsyscall is what makes it cheap. With
// block true it goes through Syscall6, so that the runtime can hand this
// thread's P to other goroutines (GC workers, the shutdown goroutine)
// while the loop sleeps.
//
// It enters by rg.enterFd with rg.enterFlags: the ring's fd, or with
// --uring-reg-ring its registered index. With --uring-sqpoll it wakes the
// poll thread if it sleeps, and passes the SQEs published since the last
// enter as the ones to submit (sqpoll_linux.go). Every enter of a loop
// (submit, waitVia, spin, catchUp, handOver) is counted in rg.st, the
// loop's, once, and so are the SQEs the kernel took (its result, when the
// call succeeded); Probe's ring counts nothing (st nil).
func (rg *ring) enter(toSubmit, minComplete, flags uint32, w *waitArg, block bool) (int, unix.Errno) {
	if rg.sqpoll {
		toSubmit, flags = rg.sqNew(), flags|rg.sqWake()
	}
	flags |= rg.enterFlags
	var arg, argSz uintptr
	switch {
	case w == nil:
	case w.reg != nil:
		w.reg.ts, w.reg.minWaitUsec, w.reg.flags = w.ts, w.arg.minWaitUsec, regWaitTS
		arg, argSz = w.regOff, unsafe.Sizeof(*w.reg)
		flags |= giouring.EnterExtArg | enterExtArgReg
	default:
		w.arg.ts = uint64(uintptr(unsafe.Pointer(&w.ts)))
		arg, argSz = uintptr(unsafe.Pointer(&w.arg)), unsafe.Sizeof(w.arg)
		flags |= giouring.EnterExtArg
	}
	var r uintptr
	var e unix.Errno
	fd := uintptr(rg.enterFd)
	if block {
		r, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, fd, uintptr(toSubmit), uintptr(minComplete), uintptr(flags), arg, argSz)
	} else {
		r, _, e = unix.RawSyscall6(unix.SYS_IO_URING_ENTER, fd, uintptr(toSubmit), uintptr(minComplete), uintptr(flags), arg, argSz)
	}
	if rg.st != nil {
		rg.st.Syscalls[core.SysUringEnter]++
		if e == 0 {
			rg.st.Own[ownSQEs] += int64(r)
		}
	}
	return int(r), e
}

// maxWorkers (uncounted: setup) caps this ring's io_uring worker threads at n bounded and n
// unbounded ones (IORING_REGISTER_IOWQ_MAX_WORKERS, Linux 5.15;
// io_uring_register_iowq_max_workers(3)). The workers belong to the
// thread that submits, so the cap is the loop's. giouring's wrapper
// passes 64-bit values where the kernel reads two __u32, hence the raw
// call.
func (r *ring) maxWorkers(n int) error {
	const registerIOWQMaxWorkers = 19
	v := [2]uint32{uint32(n), uint32(n)}
	if _, e := r.register(registerIOWQMaxWorkers, unsafe.Pointer(&v), 2); e != 0 {
		return fmt.Errorf("io_uring_register(IORING_REGISTER_IOWQ_MAX_WORKERS) (Linux 5.15): %w: %w", e, errors.ErrUnsupported)
	}
	return nil
}

// register is io_uring_register(2) on the ring's own fd (uncounted:
// setup and teardown), for the calls giouring's pinned version lacks or
// gets wrong.
func (r *ring) register(op uint32, arg unsafe.Pointer, n uint32) (int, unix.Errno) {
	v, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uintptr(op), uintptr(arg), uintptr(n), 0, 0)
	return int(v), e
}

// registerRingFd registers the ring's fd with the calling thread
// (IORING_REGISTER_RING_FDS, Linux 5.18; io_uring_register_ring_fd(3)) at
// an index the kernel picks, and from then on enters by that index
// (IORING_ENTER_REGISTERED_RING). giouring's RegisterRingFd would also
// route giouring's own register calls through the index, which needs
// Linux 6.3, and its UnregisterRingFd never unregisters: hence the raw
// calls.
func (r *ring) registerRingFd() error {
	const registerRingFds, enterRegisteredRing = 20, 1 << 4
	u := giouring.RsrcUpdate{Offset: ^uint32(0), Data: uint64(r.fd)}
	if n, e := r.register(registerRingFds, unsafe.Pointer(&u), 1); e != 0 || n != 1 {
		return fmt.Errorf("io_uring_register(IORING_REGISTER_RING_FDS): %v: --uring-reg-ring needs Linux 5.18: %w", e, errors.ErrUnsupported)
	}
	r.enterFd, r.enterFlags = int(u.Offset), enterRegisteredRing
	return nil
}

// unregisterRingFd undoes registerRingFd, on the same thread: the
// registered index holds a reference to the ring, which closing its fd
// would not drop.
func (r *ring) unregisterRingFd() {
	const unregisterRingFds = 21
	if r.enterFlags == 0 {
		return
	}
	u := giouring.RsrcUpdate{Offset: uint32(r.enterFd)}
	r.register(unregisterRingFds, unsafe.Pointer(&u), 1)
	r.enterFd, r.enterFlags = r.fd, 0
}

// registerWaitRegion registers mem (mmap'd, page-aligned) as the ring's
// wait region (IORING_REGISTER_MEM_REGION with
// IORING_MEM_REGION_REG_WAIT_ARG, Linux 6.13; io_uring_register_region(3)),
// which the ring must still be disabled for (IORING_SETUP_R_DISABLED), and
// returns its slots.
func (r *ring) registerWaitRegion(mem []byte) ([]regWait, error) {
	const registerMemRegion, memRegionTypeUser, memRegionRegWaitArg = 34, 1, 1
	// struct io_uring_region_desc, on the heap (which does not move)
	// since reg carries its address as a number.
	desc := new(struct {
		userAddr, size uint64
		flags, id      uint32
		mmapOffset     uint64
		_              [4]uint64
	})
	desc.userAddr, desc.size, desc.flags = uint64(addrOf(mem)), uint64(len(mem)), memRegionTypeUser
	reg := struct { // struct io_uring_mem_region_reg
		regionUptr, flags uint64
		_                 [2]uint64
	}{regionUptr: uint64(uintptr(unsafe.Pointer(desc))), flags: memRegionRegWaitArg}
	_, e := r.register(registerMemRegion, unsafe.Pointer(&reg), 1)
	runtime.KeepAlive(desc)
	if e != 0 {
		return nil, fmt.Errorf("io_uring_register(IORING_REGISTER_MEM_REGION): %v: --uring-wait-region needs Linux 6.13: %w", e, errors.ErrUnsupported)
	}
	return unsafe.Slice((*regWait)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/int(unsafe.Sizeof(regWait{}))), nil
}

// registerNAPI turns on NAPI busy polling for the ring
// (IORING_REGISTER_NAPI, Linux 6.9; io_uring_register_napi(3)), polling
// for up to usec microseconds per wait (0: one pass over the NAPI
// contexts, then sleep).
//
// Tracking is dynamic (IO_URING_NAPI_TRACKING_DYNAMIC, op_param 0, which
// on Linux 6.9-6.12 is padding that must be zero): the kernel adds a
// socket's NAPI id to the ring's list when it arms a poll on the socket,
// and drops an id not seen for 60 s. Static tracking (Linux 6.13) would
// have the loop learn each connection's id (getsockopt
// SO_INCOMING_NAPI_ID, a system call per accepted connection) and
// register new ones itself, to spare the kernel a hash lookup per armed
// poll; a multishot recv arms its poll once, not per request, so that
// saving is small, and dynamic tracking also runs on 6.9-6.12.
//
// prefer_busy_poll stays off: it asks the device to leave its queue to
// the busy poller, which pays only with the device's
// napi_defer_hard_irqs and gro_flush_timeout set, a tuning of the NIC
// that the server does not own.
func (r *ring) registerNAPI(usec uint32) error {
	const registerNAPI = 27
	napi := struct { // struct io_uring_napi
		busyPollTo     uint32
		preferBusyPoll uint8
		opcode         uint8 // IO_URING_NAPI_REGISTER_OP (0)
		_              [2]uint8
		opParam        uint32 // IO_URING_NAPI_TRACKING_DYNAMIC (0)
		_              uint32
	}{busyPollTo: usec}
	if _, e := r.register(registerNAPI, unsafe.Pointer(&napi), 1); e != 0 {
		return napiRefused(e)
	}
	return nil
}

// registerFiles registers a sparse table of n direct descriptors
// (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE, Linux 5.19;
// io_uring_register_files_sparse(3)) for --uring-fixed-files
// (fixedfd_linux.go). giouring's RegisterFilesSparse reports no error
// when the kernel refuses, hence the raw call.
func (r *ring) registerFiles(n uint32) unix.Errno {
	reg := giouring.RsrcRegister{Nr: n, Flags: giouring.RsrcRegisterSparse}
	_, e := r.register(uint32(giouring.RegisterFiles2), unsafe.Pointer(&reg), uint32(unsafe.Sizeof(reg)))
	return e
}

// enable starts a ring set up with IORING_SETUP_R_DISABLED
// (IORING_REGISTER_ENABLE_RINGS, Linux 5.10); with SINGLE_ISSUER the
// calling thread becomes its submitter.
func (r *ring) enable() error {
	const registerEnableRings = 12
	if _, e := r.register(registerEnableRings, nil, 0); e != 0 {
		return os.NewSyscallError("io_uring_register(IORING_REGISTER_ENABLE_RINGS)", e)
	}
	return nil
}

// sockMem is a socket's send buffer size and the bytes queued in it, as
// the kernel counts them for sk_stream_memory_free (getsockopt SO_MEMINFO,
// Linux 4.7: SK_MEMINFO_SNDBUF and SK_MEMINFO_WMEM_QUEUED).
func (l *loop) sockMem(fd int) (sndbuf, queued int64, err error) {
	l.stats.Syscalls[core.SysGetsockopt]++
	const soMeminfo, skMeminfoSndbuf, skMeminfoWmemQueued, skMeminfoVars = 55, 3, 5, 9
	var v [skMeminfoVars]uint32
	n := uint32(unsafe.Sizeof(v))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soMeminfo, uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, 0, e
	}
	return int64(v[skMeminfoSndbuf]), int64(v[skMeminfoWmemQueued]), nil
}

// openHowAt and statxAt lay struct open_how and struct statx over mmap'd
// memory, where the kernel reads or writes them (file_linux.go).
func openHowAt(mem []byte) *unix.OpenHow {
	return (*unix.OpenHow)(unsafe.Pointer(unsafe.SliceData(mem)))
}
func statxAt(mem []byte) *unix.Statx_t { return (*unix.Statx_t)(unsafe.Pointer(unsafe.SliceData(mem))) }

// openHowSize is sizeof(struct open_how), the len of an IORING_OP_OPENAT2.
const openHowSize = uint32(unsafe.Sizeof(unix.OpenHow{}))

// A slot's open_how and statx fit before its path (file_linux.go).
var (
	_ [statxOff - howOff - unsafe.Sizeof(unix.OpenHow{})]byte
	_ [pathOff - statxOff - unsafe.Sizeof(unix.Statx_t{})]byte
)

// heldPins pins, for as long as they stay the same, the Go memory that
// every send of a connection hands the kernel: the conn, whose msghdr a
// SENDMSG reads, its iovec array, and the Conn's out array, where the
// response headers (and the bodies up to 4 KiB copied with them) are.
// runtime.Pinner allocates its pinner, with a finalizer, on the first Pin
// after an Unpin unless its P's cache of one has one, so pinning them per
// send, as before, allocated at nearly every send once more than one
// connection had a send in flight: at 10,000 connections, a heap profile
// showed the pinners (results/2026-12-01_c10k-accept). Pinned once, they
// are re-pinned only when the out or iov array grew, and released when the
// slot is freed. Bodies referenced from the cache are mapped outside the
// Go heap (core.Out) and need no pin.
type heldPins struct {
	p      runtime.Pinner
	iov    *syscall.Iovec // the iov array pinned, nil none
	outEnd uintptr        // the end of the out array pinned, 0 none
	held   bool           // the conn is pinned
}

// cover pins cn, its iov array and the array of out (a slice of the
// Conn's out buffer, whose capacity runs to the array's end) unless they
// are the ones pinned already.
func (h *heldPins) cover(cn *conn, out []byte) {
	var iov *syscall.Iovec
	if cap(cn.vec.iov) > 0 {
		iov = unsafe.SliceData(cn.vec.iov[:1])
	}
	end := h.outEnd
	if cap(out) > 0 {
		// The address just past the array out's capacity runs to: the
		// same for every slice of one array that runs to its end.
		end = uintptr(unsafe.Pointer(unsafe.SliceData(out))) + uintptr(cap(out))
	}
	if h.held && iov == h.iov && end == h.outEnd {
		return
	}
	h.p.Unpin()
	h.p.Pin(cn)
	if iov != nil {
		h.p.Pin(iov)
	}
	h.held, h.iov, h.outEnd = true, iov, 0
	if cap(out) > 0 {
		h.p.Pin(unsafe.SliceData(out))
		h.outEnd = end
	}
}

// release unpins all. The Pinner stays, for the slot's next connection
// (newConn keeps it): Unpin leaves it its pinner unless the P's cache of
// one was empty, and a Pinner dropped with its pinner leaves that pinner,
// with its finalizer, to the GC. At 10,000 connections closed at once that
// was a pinner and a finalizer record per connection, waiting two GC
// cycles, and a new pair for each next connection
// (results/2026-12-02_b966187_c10k-rss).
func (h *heldPins) release() {
	h.p.Unpin()
	*h = heldPins{p: h.p}
}

// zcLayout lays a zero-copy SENDMSG's msghdr and zcIovs iovecs over the
// start of mem, a record's mmap'd memory (sendzc_linux.go), and returns
// them with the rest of mem, for the bytes the send copies. The kernel
// reads all of it until the send's result, and the bytes until its
// notification; none of it is on the Go heap.
func zcLayout(mem []byte) (*syscall.Msghdr, []syscall.Iovec, []byte) {
	const msgSize, iovSize = unsafe.Sizeof(syscall.Msghdr{}), unsafe.Sizeof(syscall.Iovec{})
	base := unsafe.Pointer(unsafe.SliceData(mem))
	msg := (*syscall.Msghdr)(base)
	*msg = syscall.Msghdr{}
	iov := unsafe.Slice((*syscall.Iovec)(unsafe.Add(base, msgSize)), zcIovs)
	clear(iov)
	return msg, iov, mem[msgSize+zcIovs*iovSize:]
}
