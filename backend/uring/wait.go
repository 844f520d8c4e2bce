package uring

// Wait is how a pass that found nothing to do waits for completions
// (--uring-wait). The Go runtime's own syscalls around a blocking wait are
// what it is about: a thread that sleeps in io_uring_enter through
// Syscall6 for more than sysmon's 20 µs tick has its P taken away
// (handoffp, a futex wake of another thread, sysmon's nanosleep), and
// gets one back when it returns. results/2026-11-30_abfcf8e_ladder and
// results/2026-11-30_d874b41_uring-wait measured each mode (results/STUDY.md
// sums them up).
type Wait uint8

const (
	// WaitBatch (the default) sleeps in a raw enter as WaitRaw does, and
	// after a pass that reaped at least batchOf/2 CQEs asks for batchOf
	// completions, settling for one after batchWait
	// (IORING_ENTER_EXT_ARG's min_wait_usec, IORING_FEAT_MIN_TIMEOUT,
	// Linux 6.12; one completion without it): fewer, fuller passes under
	// load, for up to batchWait of latency.
	WaitBatch Wait = iota
	// WaitBlock submits and sleeps in one io_uring_enter through
	// Syscall6.
	WaitBlock
	// WaitSpin submits through a raw, non-blocking enter, then spins for
	// up to spinFor watching the CQ and the SQ ring's TASKRUN flag (set by
	// the kernel when completion work is deferred to this thread: ring set
	// up with IORING_SETUP_TASKRUN_FLAG). Work found: one raw enter runs
	// it, and the loop never sleeps. Nothing: it sleeps as WaitBlock.
	WaitSpin
	// WaitRaw submits and sleeps in a raw enter (RawSyscall6, invisible to
	// the scheduler) for up to rawFor, and only after that through
	// Syscall6. Before it the loop lends its P to goroutines that would
	// otherwise wait for it (yield, loop_linux.go).
	WaitRaw
)
