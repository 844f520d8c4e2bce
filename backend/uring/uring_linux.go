package uring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// Backend is the io_uring backend. The zero value is ready to use; each
// switch is an ablation (results/STUDY.md and results/uring-doc-tables.md
// say what each costs), set from the command line through backend.Options.
type Backend struct {
	// OneShot arms one-shot accepts and recvs instead of multishot ones
	// (--uring-multishot=off): an accept is armed again by the pass after
	// each connection, a recv after each completion, with buffers from
	// the same buffer ring.
	OneShot bool

	// SubmitEach enters the kernel right after each SQE is queued (after
	// the last SQE of a linked chain, which must go in whole), instead of
	// once per pass for everything queued (--uring-batch=off): at least
	// one io_uring_enter per request.
	SubmitEach bool

	// RawSubmit makes a pass that has SQEs hand them in through a raw,
	// non-blocking io_uring_enter first, and sleep (through Syscall6) only
	// when that yields no CQE, instead of one Syscall6 submit-and-wait per
	// pass (--uring-enter=raw).
	RawSubmit bool

	// Wait is how a pass with nothing to do sleeps (--uring-wait):
	// WaitBatch (the zero value), WaitBlock, WaitSpin or WaitRaw
	// (wait.go, wait_linux.go).
	Wait Wait

	// Body is how file bodies go out (--uring-body): BodySendfile (the
	// zero value) or one of the ablations (bodymode.go).
	Body BodyMode

	// Features are the newer io_uring features, each off by default
	// (features.go).
	Features Features

	// PipeBudget, when above 0, is the number of pipe pages the loops may
	// hold, instead of three quarters of fs.pipe-user-pages-soft; the CGI
	// scripts' share comes out of it (splice_budget_linux.go). Tests lower it to
	// make bodies take the fallback.
	PipeBudget int64

	// Buffer count and size; zero means the defaults in loop_linux.go.
	// Tests shrink them to run the buffer ring dry.
	bufCount, bufSize int

	// workers bounds each loop's io_uring worker threads, per kind
	// (Serve sets it from maxWorkers and the number of loops).
	workers int

	// onSetup, when set, is called on each loop's thread at the end of
	// its Setup (tests reach the loop's FileCalls through it).
	onSetup func(l *loop)
}

// New returns the io_uring backend with its defaults.
func New() *Backend { return &Backend{} }

// withDefaults fills the zero sizes.
func (b Backend) withDefaults() Backend {
	if b.bufCount == 0 {
		b.bufCount = bufCount
		if b.Features.BufInc {
			b.bufCount = incBufCount
		}
	}
	if b.bufSize == 0 {
		b.bufSize = bufSize
		if b.Features.BufInc {
			b.bufSize = incBufSize
		}
	}
	if b.workers == 0 {
		b.workers = maxWorkers / 2
	}
	return b
}

// Name is the --backend value.
func (*Backend) Name() string { return "uring" }

// Probe sets up a small ring the way a loop does, with the Features
// asked for (and a small table of direct descriptors for FixedFiles),
// checks the opcodes and features the loop uses, and runs a
// multishot recv with a provided buffer ring on a socket pair, which no
// opcode probe can vouch for.
func (b *Backend) Probe() error {
	if err := b.checkFeatures(); err != nil {
		return err
	}
	runtime.LockOSThread() // SINGLE_ISSUER: the thread that made the ring submits
	defer runtime.UnlockOSThread()
	r, err := newRing(8, 16, 0, b.Features)
	if err != nil {
		return err
	}
	err = r.checkOps(b.Body == BodyViewZC, b.Features)
	if err == nil && b.Features.FixedFiles {
		err = r.setUpFixedFiles(8) // fixedfd_linux.go; a loop's is --max-conns large
	}
	var br *bufRing
	if err == nil {
		if br, err = selfTest(r, b.Features); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			err = fmt.Errorf("multishot recv with a provided buffer ring (Linux 6.0): %v: %w", err, errors.ErrUnsupported)
		}
	}
	r.exit() // uncounted: Probe
	if br != nil {
		br.unmap() // after the ring: the kernel held the buffers till then
	}
	return err
}

// selfTest arms a multishot recv on one end of a socket pair, writes a
// byte into the other, and expects it back in a provided buffer with
// IORING_CQE_F_MORE; then it cancels the recv and waits for its end.
func selfTest(r *ring, f Features) (*bufRing, error) {
	b, err := newBufRing(r, 2, 64, f)
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0) // uncounted: Probe runs before any loop
	if err != nil {
		return b, os.NewSyscallError("socketpair", err)
	}
	defer unix.Close(fds[1]) // uncounted: Probe
	defer unix.Close(fds[0]) // uncounted: Probe
	const recvData, cancelData = 1, 2
	e := r.GetSQE()
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareRecvMultishot(fds[0], 0, 0, 0)
	e.Flags |= giouring.SqeBufferSelect
	e.BufIG = bufGroup
	e.UserData = recvData
	if _, err := unix.Write(fds[1], []byte{'x'}); err != nil { // uncounted: Probe
		return b, os.NewSyscallError("write", err)
	}
	cqe, err := r.waitOne()
	if err != nil {
		return b, err
	}
	switch {
	case cqe.res < 0:
		return b, unix.Errno(-cqe.res)
	case cqe.res != 1 || cqe.flags&giouring.CQEFBuffer == 0:
		return b, fmt.Errorf("unexpected completion res=%d flags=%#x", cqe.res, cqe.flags)
	case cqe.flags&giouring.CQEFMore == 0:
		return b, errors.New("the recv did not stay armed (no IORING_CQE_F_MORE)")
	}
	e = r.GetSQE()
	*e = giouring.SubmissionQueueEntry{}
	e.PrepareCancel64(recvData, 0)
	e.UserData = cancelData
	for done := 0; done < 2; done++ {
		if cqe, err = r.waitOne(); err != nil {
			return b, err
		}
		if cqe.ud == cancelData && cqe.res < 0 {
			return b, fmt.Errorf("cancel: %v", unix.Errno(-cqe.res))
		}
	}
	return b, nil
}

type cqeCopy struct {
	ud    uint64
	res   int32
	flags uint32
}

// waitOne submits what is queued and waits up to a second for one CQE.
func (r *ring) waitOne() (cqeCopy, error) {
	var w waitArg
	w.ts = unix.NsecToTimespec(1e9)
	for r.CQReady() == 0 {
		_, errno := r.enter(r.v.flushSQ(), 1, giouring.EnterGetEvents, &w, true) // with SQPOLL, waking its thread
		switch errno {
		case 0, unix.EINTR:
		case unix.ETIME:
			return cqeCopy{}, errors.New("no completion within 1s")
		default:
			return cqeCopy{}, os.NewSyscallError("io_uring_enter", errno)
		}
	}
	var one [1]*giouring.CompletionQueueEvent
	r.PeekBatchCQE(one[:])
	c := cqeCopy{one[0].UserData, one[0].Res, one[0].Flags}
	r.CQAdvance(1)
	return c, nil
}

// Serve runs one loop per listener set until ctx is cancelled.
func (b *Backend) Serve(ctx context.Context, srv *core.Server, ls *core.Listeners) error {
	all := make([]loops.Loop, len(ls.FDs))
	cfg := b.withDefaults()
	cfg.workers = max(1, maxWorkers/2/len(all))
	scripts := 0
	if srv.Config.CGIDir != "" {
		scripts = srv.Config.CGIMax
	}
	budget := newPipeBudget(b.PipeBudget, scripts)
	for i := range all {
		all[i] = newLoop(srv, i, ls.FDs[i], cfg, budget)
	}
	return loops.Serve(ctx, all)
}
