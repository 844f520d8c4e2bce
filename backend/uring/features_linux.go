package uring

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The Features (features.go): how each is checked and set up. Each is
// refused with the kernel it needs when this one lacks it: by the
// setup or register call's EINVAL, or by its IORING_FEAT_ bit.

const (
	// setupRDisabled is IORING_SETUP_R_DISABLED (Linux 5.10): the ring
	// takes no SQE until IORING_REGISTER_ENABLE_RINGS.
	setupRDisabled = 1 << 6
	// featCQESkip is IORING_FEAT_CQE_SKIP (Linux 5.17),
	// featRecvSendBundle IORING_FEAT_RECVSEND_BUNDLE (Linux 6.10).
	featCQESkip        = 1 << 11
	featRecvSendBundle = 1 << 14
)

// check refuses combinations of the features and the other switches that
// cannot work.
func (b *Backend) checkFeatures() error {
	if b.Features.SQPoll && b.Wait == WaitSpin {
		return fmt.Errorf("--uring-sqpoll excludes --uring-wait=spin, which watches the TASKRUN flag a SQPOLL ring has not: %w", errors.ErrUnsupported)
	}
	return nil
}

// setUp sets up the features that belong to the ring, on the thread that
// made it: the wait region, registered while the ring is still disabled,
// which is then enabled; the registered fd; NAPI busy polling; and it
// checks the feature bits the others need.
func (r *ring) setUp(f Features) error {
	if f.WaitRegion {
		mem, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS) // uncounted: setup
		if err != nil {
			return os.NewSyscallError("mmap", err)
		}
		r.waitMem = mem
		if r.waitSlots, err = r.registerWaitRegion(mem); err != nil {
			return err
		}
		if err := r.enable(); err != nil {
			return err
		}
	}
	if f.RegRing {
		if err := r.registerRingFd(); err != nil {
			return err
		}
	}
	if f.NAPI {
		if err := r.registerNAPI(f.NAPIBusyPollUsec); err != nil {
			return err
		}
	}
	if f.SkipSend && r.v.features&featCQESkip == 0 {
		return fmt.Errorf("io_uring lacks IOSQE_CQE_SKIP_SUCCESS: --uring-skip-send needs Linux 5.17: %w", errors.ErrUnsupported)
	}
	if f.Bundle && r.v.features&featRecvSendBundle == 0 {
		return fmt.Errorf("io_uring lacks IORING_RECVSEND_BUNDLE: --uring-recv-bundle needs Linux 6.10: %w", errors.ErrUnsupported)
	}
	return nil
}

// useWaitRegion points the loop's two wait arguments at their slots of
// the registered region, if there is one.
func (r *ring) useWaitRegion(wait, catch *waitArg) {
	if len(r.waitSlots) < 2 {
		return
	}
	wait.reg, wait.regOff = &r.waitSlots[0], 0
	catch.reg, catch.regOff = &r.waitSlots[1], uintptr(regWaitSize)
}

// explainSQPoll names the reason a SQPOLL ring was refused.
func explainSQPoll(err error, cpu int) error {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil && (cpu < 0 || !set.IsSet(cpu)) { // uncounted: setup
		return fmt.Errorf("--uring-sqpoll=%d: CPU %d is not one this process may run on: %w", cpu, cpu, errors.ErrUnsupported)
	}
	return fmt.Errorf("io_uring_setup with IORING_SETUP_SQPOLL|SQ_AFF: %v: --uring-sqpoll needs Linux 5.11 (5.13 for SINGLE_ISSUER with it): %w", err, errors.ErrUnsupported)
}

// napiRefused names the reason IORING_REGISTER_NAPI failed: a kernel
// before 6.9 knows no such opcode (EINVAL), one built without
// CONFIG_NET_RX_BUSY_POLL has it but refuses it (EOPNOTSUPP).
func napiRefused(e unix.Errno) error {
	if e == unix.EOPNOTSUPP {
		return fmt.Errorf("io_uring_register(IORING_REGISTER_NAPI): %v: this kernel is built without busy polling (CONFIG_NET_RX_BUSY_POLL), which --uring-napi needs: %w", e, errors.ErrUnsupported)
	}
	return fmt.Errorf("io_uring_register(IORING_REGISTER_NAPI): %v: --uring-napi needs Linux 6.9: %w", e, errors.ErrUnsupported)
}
