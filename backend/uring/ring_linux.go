package uring

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// setupFlags are tried in order until the kernel accepts one set.
// SINGLE_ISSUER|DEFER_TASKRUN (Linux 6.1) runs completion work only when
// the loop enters the kernel, on its own thread, instead of interrupting
// it; COOP_TASKRUN (5.19) at least avoids the IPI. SUBMIT_ALL (5.18) keeps
// submitting past an SQE that fails early.
var setupFlags = []uint32{
	giouring.SetupSubmitAll | giouring.SetupSingleIssuer | giouring.SetupDeferTaskrun,
	giouring.SetupSubmitAll | giouring.SetupCoopTaskrun,
	giouring.SetupSubmitAll,
	0,
}

// neededOps are the opcodes the loop issues.
var neededOps = []struct {
	op   uint8
	name string
}{
	{giouring.OpAccept, "IORING_OP_ACCEPT"},
	{giouring.OpRecv, "IORING_OP_RECV"},
	{giouring.OpSend, "IORING_OP_SEND"},
	{giouring.OpRead, "IORING_OP_READ"},
	{giouring.OpClose, "IORING_OP_CLOSE"},
	{giouring.OpSplice, "IORING_OP_SPLICE"},
	{giouring.OpAsyncCancel, "IORING_OP_ASYNC_CANCEL"},
	{giouring.OpPollAdd, "IORING_OP_POLL_ADD"},
	{giouring.OpOpenat2, "IORING_OP_OPENAT2"},
	{giouring.OpStatx, "IORING_OP_STATX"},
}

// neededFeatures are the IORING_FEAT_ bits the loop relies on.
var neededFeatures = []struct {
	bit  uint32
	name string
}{
	{giouring.FeatNoDrop, "IORING_FEAT_NODROP (Linux 5.5): a full CQ would lose completions"},
	{giouring.FeatFastPoll, "IORING_FEAT_FAST_POLL (Linux 5.7): every idle recv would occupy a kernel worker"},
	{giouring.FeatExtArg, "IORING_FEAT_EXT_ARG (Linux 5.11): no wait timeout without a timeout SQE"},
}

// ring is one io_uring instance with the view of giouring's internals that
// the loop needs (see sys_linux.go).
type ring struct {
	*giouring.Ring
	v     *ringView
	fd    int
	flags uint32
	// enterFd and enterFlags are what enter passes: the ring's fd and
	// 0, or with --uring-reg-ring its registered index and
	// IORING_ENTER_REGISTERED_RING (registerRingFd).
	enterFd    int
	enterFlags uint32
	// submitVia is how the loop submits (submit, reserve), making room
	// for want SQEs: (*loop).enterSubmit, or with --uring-sqpoll
	// (*loop).handOver.
	submitVia func(l *loop, want uint32)
	// st counts the loop's enters and the SQEs they submitted (enter);
	// nil: Probe's ring, which counts none.
	st *core.Stats
	// sqpoll: a kernel thread takes the SQEs (--uring-sqpoll,
	// sqpoll_linux.go); sqCounted is the SQ tail up to which they were
	// counted.
	sqpoll    bool
	sqCounted uint32
	// waitMem is the region registered for the wait arguments
	// (--uring-wait-region), mmap'd; waitSlots its slots. nil: none.
	waitMem   []byte
	waitSlots []regWait
}

// newRing sets up a ring with sq SQEs and cq CQEs (IORING_SETUP_CQSIZE,
// Linux 5.5) and the best flags this kernel accepts; extra (TASKRUN_FLAG,
// for WaitSpin) is added to the DEFER_TASKRUN set. Features that belong
// to the ring (--uring-sqpoll, --uring-wait-region, --uring-reg-ring) are
// set up here (setUp, features_linux.go), or refused. Call it on the
// thread that will submit: with SINGLE_ISSUER only that thread may, and a
// registered ring fd belongs to that thread.
func newRing(sq, cq, extra uint32, f Features) (*ring, error) {
	var err error
	sets, add, cpu, idle := setupFlags, uint32(giouring.SetupCQSize), uint32(0), uint32(0)
	if f.SQPoll {
		sets, cpu, idle = sqPollSetupFlags, uint32(f.SQPollCPU), sqPollIdle
	}
	if f.WaitRegion {
		add |= setupRDisabled // the region is registered before the ring runs
	}
	for i, flags := range sets {
		if i == 0 {
			flags |= extra
		}
		flags |= add
		r := giouring.NewRing()
		if err = r.QueueInitParams(sq, ringParams(flags, cq, cpu, idle)); err == nil { // uncounted: setup (io_uring_setup, mmap)
			rg := &ring{Ring: r, v: viewOf(r), fd: r.RingFd(), flags: flags, enterFd: r.RingFd(), sqpoll: f.SQPoll, submitVia: (*loop).enterSubmit}
			if f.SQPoll {
				rg.submitVia = (*loop).handOver
			}
			if !rg.v.check(r, flags) {
				r.QueueExit() // uncounted: setup
				return nil, fmt.Errorf("giouring's Ring layout differs from the one this package reads (sys_linux.go): %w", errors.ErrUnsupported)
			}
			if f == (Features{}) {
				return rg, nil
			}
			if err := rg.setUp(f); err != nil {
				rg.exit()
				return nil, err
			}
			return rg, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			break
		}
	}
	if f.SQPoll {
		return nil, explainSQPoll(err, f.SQPollCPU)
	}
	return nil, explainSetup(err)
}

// exit tears the ring down (uncounted: setup and teardown): the
// registered fd first, on the thread that registered it, then the ring,
// then the wait region the kernel read.
func (r *ring) exit() {
	r.unregisterRingFd()
	r.QueueExit() // uncounted: setup and teardown
	if r.waitMem != nil {
		unix.Munmap(r.waitMem) // uncounted: as its mmap in setUp
		r.waitMem, r.waitSlots = nil, nil
	}
}

// explainSetup names the reason io_uring_setup failed, in one line.
func explainSetup(err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("io_uring_setup: ENOSYS: this kernel has no io_uring (Linux 5.1 or later, CONFIG_IO_URING): %w", errors.ErrUnsupported)
	case errors.Is(err, unix.EPERM):
		b, rerr := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
		switch v := strings.TrimSpace(string(b)); {
		case rerr == nil && v == "2":
			return fmt.Errorf("io_uring_setup: EPERM: kernel.io_uring_disabled=2 disables io_uring for everyone: %w", errors.ErrUnsupported)
		case rerr == nil && v == "1":
			return fmt.Errorf("io_uring_setup: EPERM: kernel.io_uring_disabled=1 and this process is not in kernel.io_uring_group: %w", errors.ErrUnsupported)
		}
		return fmt.Errorf("io_uring_setup: EPERM: blocked by seccomp or the container runtime (kernel.io_uring_disabled is 0): %w", errors.ErrUnsupported)
	case errors.Is(err, unix.ENOMEM):
		return fmt.Errorf("io_uring_setup: ENOMEM: ring memory is limited (RLIMIT_MEMLOCK on Linux before 5.12): %w", errors.ErrUnsupported)
	}
	return fmt.Errorf("io_uring_setup: %v: %w", err, errors.ErrUnsupported)
}

// checkOps checks the opcodes and features the loop uses; zc: and
// IORING_OP_SEND_ZC (BodyViewZC, Linux 6.0); f.SendZC: and SEND_ZC and
// IORING_OP_SENDMSG_ZC (Linux 6.1).
func (r *ring) checkOps(zc bool, f Features) error {
	for _, f := range neededFeatures {
		if r.v.features&f.bit == 0 {
			return fmt.Errorf("io_uring lacks %s: %w", f.name, errors.ErrUnsupported)
		}
	}
	p, err := r.GetProbeRing() // uncounted: setup
	if err != nil {
		return fmt.Errorf("io_uring opcode probe (Linux 5.6): %v: %w", err, errors.ErrUnsupported)
	}
	for _, o := range neededOps {
		if !p.IsSupported(o.op) {
			return fmt.Errorf("io_uring lacks opcode %s: %w", o.name, errors.ErrUnsupported)
		}
	}
	if zc && !p.IsSupported(giouring.OpSendZC) {
		return fmt.Errorf("io_uring lacks opcode IORING_OP_SEND_ZC (Linux 6.0), which --uring-body=view-zc needs: use --uring-body=view: %w", errors.ErrUnsupported)
	}
	if f.SendZC > 0 && !p.IsSupported(giouring.OpSendZC) {
		return fmt.Errorf("io_uring lacks opcode IORING_OP_SEND_ZC: --uring-send-zc needs Linux 6.1 (SEND_ZC 6.0, SENDMSG_ZC 6.1): %w", errors.ErrUnsupported)
	}
	if f.SendZC > 0 && !p.IsSupported(giouring.OpSendMsgZC) {
		return fmt.Errorf("io_uring lacks opcode IORING_OP_SENDMSG_ZC: --uring-send-zc needs Linux 6.1: %w", errors.ErrUnsupported)
	}
	return nil
}

// bufRing is the provided-buffer ring that multishot recvs take their
// buffers from (IORING_REGISTER_PBUF_RING, Linux 5.19). Both the ring and
// the buffers are mmap'd, outside the Go heap: the kernel writes into them
// whenever data arrives. A buffer belongs to the kernel until a CQE names
// it, then to the loop until recycle gives it back.
type bufRing struct {
	br      *giouring.BufAndRing
	ringMem []byte  // the ring of io_uring_buf entries
	mem     []byte  // count buffers of size bytes
	base    uintptr // mem's address (addrOf), for the ring's entries
	size    int
	count   int
	mask    int
	pending int // recycled since the last publish

	// spans, when set, lays a recv's bytes over several buffers or part
	// of one (--uring-recv-bundle, --uring-buf-inc: bufspan_linux.go).
	spans *bufSpans
}

const bufGroup = 0

// newBufRing maps and registers count buffers of size bytes; with
// Features.BufInc the ring is registered for incremental consumption, and
// with it or Features.Bundle the buffers' spans are tracked
// (bufspan_linux.go).
func newBufRing(r *ring, count, size int, f Features) (*bufRing, error) {
	b := &bufRing{size: size, count: count, mask: giouring.BufRingMask(uint32(count))}
	if f.Bundle || f.BufInc {
		b.spans = newBufSpans(b, f.BufInc)
	}
	var err error
	// uncounted (the calls marked so in this function and in unmap):
	// setup, also Probe's, which has no loop to count them.
	b.ringMem, err = unix.Mmap(-1, 0, count*int(giouring.RingBufStructSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS) // uncounted
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	b.mem, err = unix.Mmap(-1, 0, count*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS) // uncounted
	if err != nil {
		b.unmap()
		return nil, os.NewSyscallError("mmap", err)
	}
	b.base = addrOf(b.mem)
	b.br = bufRingAt(b.ringMem)
	b.br.BufRingInit()
	reg := giouring.BufReg{RingAddr: uint64(addrOf(b.ringMem)), RingEntries: uint32(count), Bgid: bufGroup}
	if f.BufInc {
		reg.Pad = pbufRingInc // the field is the flags
	}
	if _, err := r.RegisterBufferRing(&reg, 0); err != nil { // uncounted: setup
		b.unmap()
		if f.BufInc && errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("provided buffer ring with IOU_PBUF_RING_INC: %v: --uring-buf-inc needs Linux 6.12: %w", err, errors.ErrUnsupported)
		}
		return nil, fmt.Errorf("provided buffer ring (Linux 5.19): %w", err)
	}
	for i := range count {
		b.recycle(uint16(i))
	}
	b.publish()
	return b, nil
}

// buf is buffer id's memory.
func (b *bufRing) buf(id uint16) []byte {
	off := int(id) * b.size
	return b.mem[off : off+b.size : off+b.size]
}

// unmap releases the memory; the ring must be gone (or the group
// unregistered) first.
func (b *bufRing) unmap() {
	if b.mem != nil {
		unix.Munmap(b.mem) // uncounted: as in newBufRing
		b.mem = nil
	}
	if b.ringMem != nil {
		unix.Munmap(b.ringMem) // uncounted
		b.ringMem = nil
	}
}
