package uring

// Features are io_uring's newer networking features (issue 28), each off
// by default until the lab has measured what it buys, each chosen by a
// flag of its own. Probe refuses a feature this kernel lacks, naming the
// kernel that has it (checkFeatures, features_linux.go), so that
// --backend=auto falls back instead of failing. Each enters the loop at
// one place, named below; with all of them off the loop runs as it did
// before them.
type Features struct {
	// RegRing registers the ring's fd with the loop's thread
	// (IORING_REGISTER_RING_FDS, Linux 5.18) and enters the kernel by
	// its index (IORING_ENTER_REGISTERED_RING), which spares every
	// io_uring_enter the fd-table lookup and its reference count
	// (--uring-reg-ring; ring.enterFd).
	RegRing bool

	// SkipSend sets IOSQE_CQE_SKIP_SUCCESS (Linux 5.17) on the sends
	// whose success needs no completion: a response's header SEND with
	// body steps linked behind it (--uring-skip-send; skipsend_linux.go
	// says which sends and why only those).
	SkipSend bool

	// Bundle makes each recv a bundle (IORING_RECVSEND_BUNDLE, Linux
	// 6.10): one completion for as many provided buffers as the data
	// filled, instead of one per buffer (--uring-recv-bundle;
	// bufspan_linux.go).
	Bundle bool

	// BufInc registers the provided buffer ring with IOU_PBUF_RING_INC
	// (Linux 6.12): the kernel consumes a buffer a recv at a time, so a
	// small request takes only its bytes of it, and the loop has fewer,
	// larger buffers for the same memory (incBufCount of incBufSize)
	// (--uring-buf-inc; bufspan_linux.go).
	BufInc bool

	// SQPoll sets the ring up with a kernel thread that polls the SQ
	// (IORING_SETUP_SQPOLL, unprivileged since Linux 5.11), pinned to
	// CPU SQPollCPU (IORING_SETUP_SQ_AFF): submitting costs no system
	// call while the thread is awake, at the cost of a thread that spins
	// for sqPollIdle after the last submission. It excludes
	// DEFER_TASKRUN, COOP_TASKRUN and --uring-wait=spin
	// (--uring-sqpoll=CPU; sqpoll_linux.go).
	SQPoll    bool
	SQPollCPU int

	// WaitRegion registers the loop's wait arguments with the ring
	// (IORING_REGISTER_MEM_REGION with IORING_MEM_REGION_REG_WAIT_ARG,
	// Linux 6.13) and waits with IORING_ENTER_EXT_ARG_REG: the kernel
	// reads the timeout and min-wait from memory it has mapped, instead
	// of copying a struct io_uring_getevents_arg and its timespec in
	// on every wait (--uring-wait-region; sys_linux.go, enter).
	WaitRegion bool

	// NAPI registers the ring for NAPI busy polling (IORING_REGISTER_NAPI,
	// Linux 6.9): a wait in io_uring_enter first polls the NAPI contexts
	// of the ring's sockets for up to NAPIBusyPollUsec microseconds (and
	// no longer than the wait's own timeout), running their receive path
	// on the loop's CPU, and sleeps only if that brought nothing; with
	// SQPOLL the poll thread polls them instead. Loopback has no NAPI
	// context, so there it registers and polls nothing; a NIC has, and so
	// has a veth with GRO on (scripts/veth.sh measures it). It enters the
	// loop at one place, the ring's setup (setUp, features_linux.go);
	// registerNAPI (sys_linux.go) says why dynamic tracking and no
	// prefer_busy_poll (--uring-napi=USEC).
	NAPI             bool
	NAPIBusyPollUsec uint32

	// SendZC, when not 0, sends bodies of SendZC bytes or more
	// zero-copy: by IORING_OP_SENDMSG_ZC (Linux 6.1) where the loop
	// gathers a response's pieces around the cache's memory bodies, and
	// by IORING_OP_SEND_ZC (6.0) for the parts of a file body in the
	// page cache, from the File's mapping (--uring-send-zc=SIZE). A
	// zero-copy send's memory is the kernel's until its second
	// completion, the notification: its Files stay held till then. It
	// enters the loop as the sender bodies.init chooses (sendZC, which
	// asks zcSends.send); sendzc_linux.go says what goes zero-copy, how the
	// notification is waited for, what it saves on a NIC and why
	// loopback copies anyway, and why registered buffers are not used.
	SendZC int64

	// FixedFiles gives each loop's ring a sparse table of direct
	// descriptors (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE,
	// Linux 5.19), accepts connections into it (IORING_FILE_INDEX_ALLOC)
	// instead of into the process's fd table, and names each socket by
	// its index (IOSQE_FIXED_FILE) in every recv, send, poll and shutdown,
	// and closes it with IORING_OP_CLOSE's file_index: no fd-table lookup
	// and reference count per operation. The system calls that need an
	// fd (sendfile(2), getsockopt, getpeername) get one by
	// IORING_OP_FIXED_FD_INSTALL (Linux 6.8), which Probe requires
	// (--uring-fixed-files; it enters the loop as the sockets Setup
	// chooses, directSockets, and by the SQE flags queueAs adds on a
	// socket; fixedfd_linux.go says what each real-fd need does and
	// costs).
	FixedFiles bool
}
