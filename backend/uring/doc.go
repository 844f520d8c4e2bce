// Package uring is twinloop's completion-based backend on io_uring, through
// github.com/pawelgaczynski/giouring: one ring per --loops, each created on
// its own locked OS thread, with its own SO_REUSEPORT listeners.
//
// # Files, one mechanism each
//
//   - loop_linux.go: the loop: setup, a pass (reap, dispatch by op, enter),
//     the once-a-second timeouts, shutdown and teardown.
//   - accept_linux.go: listeners and their multishot accepts.
//   - conn_linux.go: a connection's life: accept, drive, recv, shutdown,
//     close, free.
//   - body_linux.go: a response's send chain, and the carrier interface
//     its file body goes through; sendfile_linux.go: sendfile(2) on the
//     loop (sendfiles, the default, which plans and holds nothing);
//     pipe_linux.go and chunk_linux.go: the two carriers, splice through
//     a pipe (pipes, --uring-body=splice, and the default while the disk
//     is in play) and send from the File's view or read + send by chunk
//     (chunks); budget_linux.go: the process's pipe budget.
//   - cgi_linux.go: reads of a CGI script's stdout.
//   - file_linux.go: the core's file-system calls (core.FileCalls: a
//     miss's open, stat, read and close) through the ring; see File-system
//     calls.
//   - ring_linux.go, wait_linux.go, sys_linux.go: the ring, the ways the
//     loop waits in io_uring_enter, and the few raw syscalls.
//
// # Techniques, and the kernel each needs
//
// Probe checks every one of them (opcode probe, IORING_FEAT_ bits, and a
// multishot recv on a socket pair) instead of parsing the kernel version.
//
//   - IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN (6.1): completions are
//     posted only when the loop enters the kernel, on its own thread, with
//     no interrupting task work; falls back to COOP_TASKRUN (5.19), then to
//     none. SUBMIT_ALL (5.18).
//   - IORING_FEAT_NODROP and IORING_SETUP_CQSIZE (5.5): the CQ has a slot
//     per connection (--max-conns, up to 65,536 CQEs) and the SQ at most
//     4,096 SQEs (ringEntries); beyond that the kernel keeps completions on
//     its overflow list.
//   - IORING_FEAT_FAST_POLL (5.7): a recv or send that would block is
//     polled, not handed to a kernel worker.
//   - IORING_ENTER_EXT_ARG (5.11): the wait has a timeout (the loop wakes
//     at least once a second for timeouts) without a timeout SQE.
//   - multishot accept (5.19), re-armed when a CQE comes without
//     IORING_CQE_F_MORE. --uring-multishot=off (Backend.OneShot) arms a
//     one-shot accept instead, again by the pass after each connection.
//     Accepted sockets wait in the loop's queue, and each pass admits at
//     most 128 of them, none while 256 IORING_OP_CLOSEs are in flight
//     (admit, accept_linux.go): a multishot accept takes a whole backlog
//     at once. A pass that leaves sockets it may admit ends with a catch-up enter
//     instead of a wait: it asks for 512 completions with a zero timeout,
//     since from Linux 6.13 an enter runs at most max(20, min_complete)
//     items of a DEFER_TASKRUN ring's deferred work (catchUp).
//   - multishot recv (6.0) into a provided buffer ring (5.19); with
//     --uring-multishot=off a one-shot recv from the same ring, armed
//     again after each completion: 2.0 SQEs per request instead of 1.0,
//     at no CPU cost one run could see (11.1 CPU-µs per request against
//     11.9, setup as below; multishot pays with many short connections,
//     and in simpler re-arming). A buffer
//     goes back to the ring as soon as Conn.Feed returns (Feed copies what
//     it keeps), and recycled buffers are published before every enter. A
//     recv that ends with ENOBUFS is re-armed; its data waits in the socket.
//     While Conn.WantRead is false the recv is cancelled, and re-armed once
//     the output has drained.
//   - IORING_OP_SEND (5.6), IORING_OP_READ (5.6), IORING_OP_SPLICE (5.7),
//     IORING_OP_POLL_ADD (5.1),
//     IORING_OP_CLOSE (5.6), IORING_OP_ASYNC_CANCEL (5.5), IOSQE_IO_LINK
//     (5.3) and IOSQE_IO_HARDLINK (5.5); IORING_OP_OPENAT2 (5.6) and
//     IORING_OP_STATX (5.6) for the core's file-system calls.
//   - cachestat(2) (6.5, optional): whether a body's next part is in the
//     page cache before it is sent by sendfile, spliced or sent from the
//     File's view; without it every body goes by chunk (read + send),
//     spliced bodies splice as before, and the pipes' fallback reads into
//     a chunk instead of sending from the view.
//   - IORING_REGISTER_IOWQ_MAX_WORKERS (5.15): the io_uring worker
//     threads of the process stay within 16, split between the loops
//     (8 bounded and 8 unbounded with one loop, 4 and 4 each with two;
//     past 8 loops, one of each per loop).
//     Splices run on them (the kernel punts every IORING_OP_SPLICE to a
//     worker; shutdown(2) is made on the loop instead), but none ever waits there for a
//     client (see File bodies); only a read from disk may block one.
//   - What a connection waits for (core.Conn.Interest) is brought in line
//     with the ring in one function, watch (conn_linux.go): a recv armed
//     exactly while Interest.Read, a read of a CGI script's stdout in
//     flight while PipeRead (cgi_linux.go), and once Interest.Reset (the
//     peer's FIN while a script answers) a multishot poll for POLLERR,
//     whose reset closes the connection and so kills the script
//     (watchReset).
//   - CGI (cgi_linux.go): a script's stdout pipe is read
//     with IORING_OP_READ, one read in flight per connection, which the
//     kernel completes when the pipe has data (it polls the pipe, which is
//     left non-blocking). What the scripts' goroutines post to the loop
//     (core.Loop.Post) wakes it through the shutdown's eventfd read, and
//     runs (core.Loop.RunPosted) when that read completes.
//
// # A pass of the loop
//
// Drain every ready CQE (PeekBatchCQE on at most CQReady entries), handle
// each, queueing SQEs as the connections ask; call core.Loop.Tick, and
// once a second CheckTimeout on every connection; then enter the kernel
// once, to submit everything queued and wait (with a timeout at the next
// second) in the same io_uring_enter. By default (--uring-wait=batch) that
// enter is raw (RawSyscall6) for up to 200 µs, after the loop has lent its
// P to any goroutine waiting for one, and through Syscall6 after that, so
// that the runtime can give this thread's P to the GC or other goroutines
// while the loop sleeps long (see --uring-wait below). EINTR (the runtime's
// preemption signal) just ends the pass.
//
// --uring-batch=off (Backend.SubmitEach) enters the kernel right after
// each SQE is queued (after the last SQE of a linked chain, which must go
// in whole), as a loop written one request at a time would: at least one
// io_uring_enter per request, and the pass's enter only waits. One run
// (setup as below): 1.02 enters per request against 0.10, 12.4 CPU-µs
// per request against 11.9.
//
// --uring-enter=raw (Backend.RawSubmit) hands queued SQEs in
// through a raw, non-blocking enter (RawSyscall6, min_complete 0) and
// sleeps through Syscall6 only when that yields no CQE. Measured with a
// 1500-byte file, keep-alive, wrk -t1 -c50 on CPU 1, one loop on CPU 0, on
// a 2-vCPU VM shared with other benchmarks (so: medians of 25 interleaved
// runs, and differences under 5% are noise):
//
//	                            CPU-µs/req  enters/req  involuntary ctx sw/req
//	one enter per pass, block wait 11.0        0.165         0.05
//	RawSubmit                      10.9        0.255         0.017
//	epoll (2.2 syscalls/req)       12.0          -           0.01
//
// RawSubmit spares the runtime most of its P hand-offs (probably because a
// Syscall6 that runs the inline sends for tens of µs looks blocked to
// sysmon), but its loop rarely sleeps: each raw submit also collects what
// completed meanwhile, so its batches are smaller and it enters half again
// as often, for no CPU that this machine can measure. The counters agree with
// strace -c -f over a whole run (12356 io_uring_enter seen by strace,
// 12354 counted, the difference being Probe's).
//
// --uring-wait (Backend.Wait, wait.go, wait_linux.go) is about the Go
// runtime's own syscalls. A wait through Syscall6 that lasts more than
// sysmon's 20 µs tick has its P handed off (a futex wake, sysmon's
// nanosleep), and these are real syscalls the loop's counters never see:
// about 0.04 per request at c=50 on top of 0.06 enters (perf stat, whole
// process). block waits that way; spin watches the rings (CQ, and the SQ's
// TASKRUN flag) for 20 µs after a raw submit; raw sleeps up to 200 µs in a
// RawSyscall6 enter first; batch (the default) does that, and after a pass
// that reaped 8 CQEs or more asks for 16 completions, settling for one
// after 50 µs (min_wait_usec, Linux 6.12). One interleaved run (make
// ladder, results/2026-11-30_abfcf8e_ladder; c=50, 1500 B, keep-alive;
// batch then asked for 16 after every pass):
//
//	--uring-wait    CPU-µs/req  enters/req  process syscalls/req  runtime's  ctx sw/req
//	block              6.20       0.064          0.105             0.041      0.060
//	spin               5.64       0.264          0.268             0.004      0.008
//	raw                5.49       0.166          0.169             0.003      0.007
//	batch              5.58       0.066          0.070             0.003      0.011
//
// A raw wait holds the thread's P: the scheduler cannot hand it to a
// runnable goroutine, and when every P is a loop's (GOMAXPROCS 1, or
// --loops as many as Ps, the default) the goroutines of CGI scripts, the
// --metrics server and the signal handler waited for sysmon's 10 ms
// preemption. So before each raw wait the loop reads the scheduler's
// counts (runtime/metrics, about 60 ns) and, when a goroutine is runnable
// and every P runs Go code, or 2 ms have passed, yields its P
// (runtime.Gosched, about 2.4 µs on a locked thread). What that changed
// (scripts/uring-wait.sh, medians of 3 interleaved rounds; CGI is a
// two-line #!/bin/sh script under wrk -c4, "beside" is with wrk -c50 on a
// 1500 B page at the same time; /metrics is 40 sequential scrapes under
// that load):
//
//	                                 CGI alone  CGI beside  CGI beside  /metrics  SIGTERM
//	                                   req/s      req/s      p99 ms     p50 ms    → exit ms
//	one CPU, block                      978        459        21.5        4.3        6
//	one CPU, batch, no yield            663        216        34.9       31.0       23
//	one CPU, batch                     1024        807        12.1        9.3        6
//	2 CPUs, 2 loops, block             1517        937         9.5        3.8        8
//	2 CPUs, 2 loops, batch, no yield   1361        240        34.3       25.0       46
//	2 CPUs, 2 loops, batch             1363        911        11.3        5.6        9
//	2 CPUs, 1 loop, block              1518        984        10.0        2.8        8
//	2 CPUs, 1 loop, batch              1436        984        10.0        3.4        9
//
// (results/2026-11-30_d874b41_uring-wait; "no yield" is
// results/2026-11-30_8c540b3_uring-wait.) With one P, batch now serves CGI
// beside static load faster than block, since the loop hands its P over
// at once where block waited for sysmon; the static clients beside it got
// 84k req/s instead of 130k, the CPU those CGI requests took. With two Ps
// a CGI script alone costs batch 5-10% of block's req/s (a request's
// passes wait up to 50 µs for a batch when 8 or more CQEs came). A scrape
// waits longer at the median, 0.6-1.8 ms with two Ps and 5 ms with one
// (its p99 is lower with one: 15 ms against 25): the netpoller's
// goroutines become runnable only when sysmon polls (every 10 ms) or a P
// schedules.
// For 5-10% less CPU per static request (two ladder runs; 4.18 against
// 4.38 CPU-µs in results/2026-11-30_e64edd7_ladder), batch is the default;
// block stays as an ablation, and as the choice for a server whose other
// goroutines matter more than its static files.
//
// # user_data
//
//	 63      56 55          32 31           0
//	+----------+--------------+--------------+
//	|    op    |  generation  |     slot     |
//	+----------+--------------+--------------+
//
// slot indexes the loop's connections (the listener for accepts), the
// generation changes whenever a slot gets a new connection. A slot is
// reused only after the last CQE of every request its previous connection
// made, so a CQE of an earlier generation cannot occur; should one, it is
// dropped (its buffer recycled).
//
// # Who owns the memory the kernel uses
//
//   - Recv buffers and the buffer ring: mmap'd, outside the Go heap. The
//     kernel owns a buffer from its publication to the CQE naming it; the
//     loop from then until it recycles it, right after Feed.
//   - Response bytes (Out().Mem): a Go slice owned by the Conn, unchanged
//     until Sent. It is sent in place, its array pinned with runtime.Pinner
//     (Go's heap does not move today; the pin keeps that a promise rather
//     than an assumption). The pin is the conn's (heldPins, sys_linux.go):
//     made at the first send and kept while the array stays the same, since
//     a Pinner pinned per send allocated its pinner, with a finalizer, at
//     nearly every send at high concurrency. Copying into an mmap'd buffer
//     would cost a copy per response and a buffer per connection (up to
//     OutBufMax plus one response) for nothing the pin does not give.
//   - Memory bodies over 4 KiB (Out().Body, Out().Vec): the cache entry's
//     own bytes (a directory listing's too), mmap'd by the core outside the
//     Go heap and unmapped with the File's last reference, which the Conn
//     holds until Sent. They go out by SENDMSG; its msghdr and iovec array
//     are the conn's (msgFor), pinned with it and the out array by
//     heldPins, and cleared at the CQE so that no pointer into an unmapped
//     body stays.
//   - File chunks (the fallback, and ReadBodies): mmap'd 128 KiB each,
//     made on demand, owned by one connection from the start of a body to
//     its end (the kernel writes into it from a read's SQE to its CQE,
//     and reads it from a send's SQE to its CQE), then kept for reuse,
//     and unmapped when a second passes without use.
//   - File views (the pipes' fallback, --uring-body=view): a File's
//     read-only shared mapping of its file (core.Conn.BodyView), made on
//     first use and unmapped with the File's last reference, which the
//     Conn holds until Sent; the kernel reads it from a send's SQE to its
//     CQE (SEND_ZC: it holds the page cache's pages themselves until its
//     notification). The loop never reads it (SIGBUS past a truncated
//     file's end); a resident range only (cachestat) is sent from it.
//   - File-system call slots (file_linux.go): 64 of 8 KiB per loop,
//     mmap'd once (a path of up to PATH_MAX, an open_how, a statx), each
//     the kernel's from its SQE to its CQE; a Pread's buffer is the
//     caller's, pinned by the caller for as long.
//   - Pipes: not memory of ours, but the kernel's, counted per user
//     (see File bodies).
//   - CGI pipe reads: mmap'd 64 KiB buffers, made on demand and kept,
//     one owned by the kernel per read in flight (from its SQE to its CQE),
//     so at most one per connection running a script.
//   - The wake-up eventfd's 8-byte counter: an mmap'd page.
//   - The wait's io_uring_getevents_arg and timespec: in the loop struct on
//     the heap; the kernel reads them only during the call.
//
// # File bodies: no client holds what another needs
//
// Bodies above --mem-body-max go from the file. By default (sendfiles,
// sendfile_linux.go) the part that is in the page cache goes by
// sendfile(2) on the loop's thread, after a cachestat, and a socket that
// is full is waited for by IORING_OP_POLL_ADD; a cold part goes by READ
// into a chunk and SEND, as below. io_uring has no sendfile opcode, and
// the splice pair that stood in for it cost more: at 10,000 clients of a
// 1 MiB file 663 CPU-ms per GiB against sendfile's 528, at c=50 233.0
// CPU-µs per response against 200.9 (results/2026-12-01_uring-sendfile).
// What follows describes the splice path (--uring-body=splice,
// Backend.SpliceBodies), the default until then, and the chunks, which
// both paths share.
//
// What a request cost on each (1 MiB file, one loop on CPU 0, wrk -t1
// -c50 keep-alive on CPU 1, medians of 7 interleaved 3 s runs on a
// shared 2-vCPU machine whose runs varied by 3x, so only the ratios
// mean much; results/2026-11-30_1965a64_bodies, made by
// scripts/bodies.sh, which says how to rerun it):
//
//	                                     CPU-µs/req  syscalls/req  iou-wrk
//	splice through a pipe (default)         228.5        1.85          9
//	read into a chunk, send (fallback)      848.6        0.25          1
//	epoll's sendfile, for comparison        336.8        3.09          -
//	before: shared pipes, blocking sockets  230.7        0.57         19
//
// With 64 KiB and 1500-byte files (bodies from memory: the same path as
// before) uring took 18.2 and 5.5 CPU-µs per request, the design before
// it 18.7 and 5.4, epoll 14.7 and 5.1 (results/2026-11-30_4c30b9d_bodies,
// 3 runs each). The syscalls are io_uring_enter and the one getsockopt
// per chain (see below).
//
// The paths are planners behind one interface (planner, in
// body_linux.go): sendfiles, and the two carriers (carrier: a planner
// that a body holds between chains), pipes (pipe_linux.go) and chunks
// (chunk_linux.go), the loop's own, in its bodies. A connection's body state is one field
// (conn.body, a fileBody): the carrier it holds and that carrier's
// bookkeeping. The send chain asks the carrier held, or the one a body
// tries first (bodies.first: sendfiles; pipes with --uring-body=splice,
// chunks with --uring-body=read or view),
// to plan and queue the body's steps, and hands it each body CQE and the
// chain's end; no caller asks which carrier it has. The pipes fall back
// to the chunks themselves.
//
// The splice path: after the header (MSG_MORE|MSG_WAITALL), the chain
// splices the file range into a pipe, then the pipe into the socket
// (SPLICE_F_MORE while more follows). It copies no byte; the chunk path
// copies each byte twice (page cache to chunk, chunk to socket). The
// chunk path is taken for a body only when the pipe budget is spent and
// no pipe can come back soon, and counted (ownBodyFallbacks, printed as
// body_fallbacks); --uring-body=read (Backend.ReadBodies) takes it always.
// A pipe smaller than the body costs more splices, each a trip through an
// io_uring worker, hence pipes sized to the body up to 1 MiB, but only
// while the budget has room for the bodies in flight (pipeBudget.roomFor:
// a larger pipe must leave a 64 KiB one for every other body under way
// that holds none). At 10,000 clients of a 1 MiB file, 1 MiB pipes spent
// the budget on 48 pipes and 86% of the bodies fell back, each with a
// 128 KiB chunk of its own (1.28 GB); 64 KiB pipes give 768.
//
// The fallback does not copy into a chunk of its own when it can help it:
// a body's next part (up to viewSend, 256 KiB) that is in the page cache
// (cachestat) goes by one SEND from the File's view, a read-only shared
// mapping of the whole file made once per File (so per loop) and
// unmapped with its last reference (core.Conn.BodyView): copied once, by
// the kernel, into the socket, with no memory per connection
// (ownBodyViews, body_views). A cold part still goes by READ into a
// chunk, so that the loop's thread never waits for the disk in a send's
// page fault; without cachestat the fallback always reads. A file
// truncated under its view cannot raise SIGBUS: no Go code reads the
// view, and the kernel's copy of a send gets EFAULT past the end (the
// connection is closed), while the residency check sends what is past the
// new end by READ, which comes up short (TestViewTruncatedMidSend).
//
// The rules, each for a failure seen (scripts/stall: clients that ask for
// a 4 MiB file through a 4 KiB receive buffer and never read, then a
// fresh client's downloads):
//
//   - Sockets are non-blocking. The kernel runs every IORING_OP_SPLICE on
//     an io_uring worker; to a blocking socket the pipe → socket splice
//     kept its worker until the client read, and 300 such clients made
//     64 workers (the old pipe pool's size). To a non-blocking socket it
//     moves what the socket takes and returns.
//   - A chain fills the pipe with no more than the socket takes now:
//     half of SO_SNDBUF minus what is queued (getsockopt SO_MEMINFO, one
//     syscall per chain; the kernel counts per-packet overhead in the
//     queue: with a margin of 1/16 instead of 1/2, stalled clients of a
//     scripts/stall run kept bytes in their pipes, and held them). So the
//     pipe is normally empty when the chain ends, and goes back to the
//     loop at once: a chain takes no pipe to wait for its client. A
//     socket without room is waited for by
//     IORING_OP_POLL_ADD (POLLOUT), holding no pipe. Should a splice
//     still come up short, its pipe stays with the connection (the bytes
//     in it are that client's) and the next chain is [poll POLLOUT] →
//     [splice pipe → socket].
//   - Pipes are made on demand, sized to the body (64 KiB, 256 KiB or
//     1 MiB, within fs.pipe-max-size), kept while free, and closed when a
//     second passes without use, so that a burst's pipes go back to the
//     budget that every loop shares.
//   - The pipe budget (budget_linux.go): three quarters of the lower of
//     fs.pipe-user-pages-soft and -hard, shared by the loops of the
//     server, less the CGI scripts' own share: 32 pages (their stdin and
//     stdout pipes) for each of the --cgi-max scripts, at most half, set
//     aside at start, so that silent scripts never spend what bodies
//     need (TestCGIPipesLeaveBodiesTheirShare). Past the
//     soft limit the kernel gives every new pipe of the user 8 KiB and
//     refuses F_SETPIPE_SZ, in this process (CGI included) and in the
//     user's others; the quarter left is theirs. When the budget has no
//     room for even a 64 KiB pipe, a body waits in line (pipes.wait,
//     oldest first) while some chain in flight holds a pipe, since that
//     one comes back within a splice; when none does, it takes the chunk
//     path at once.
//     Backend.PipeBudget lowers the budget for tests.
//   - Sent, and with it the write timeout, advances on every CQE that
//     moved bytes, so --write-timeout measures progress: a client reading
//     steadily is never dropped, a client that stops is dropped after it.
//   - A body whose next part is not in the page cache (cachestat(2), one
//     call per chain that would take a pipe) goes by chunk until its end,
//     counted in ownBodyCold (body_cold). A file → pipe splice of cold
//     data holds its io-wq worker while the disk reads. That worker is
//     unbounded, because the pipe is the request's file, as is every warm
//     client's pipe → socket splice, so no split of the worker limits keeps
//     them apart. A READ waits for the disk without a worker (async
//     buffered reads on ext4, xfs, btrfs). Measured
//     (results/2026-12-01_uring-cold, one loop, reads capped at 300/s and
//     80 MB/s, 16 clients on random cold 16 MiB files): a cached 1 MiB
//     file's 4 clients got 53-90 req/s at a p99 of 576-633 ms before, and
//     1,442-1,603 req/s at 10.4-10.9 ms after.
//   - A body-in that comes up short (-EAGAIN, which a kernel may report
//     for an O_NONBLOCK file on a file system without FMODE_NOWAIT, or a
//     short chunk read) is tried once more before the connection is
//     closed, so a FUSE, NFS or 9p docroot is not cut short after its full
//     Content-Length (retryBodyIn). On 6.18 a bindfs docroot's READs and
//     SPLICEs completed in full (TestFUSEDocroot).
//
// What it gives (results/2026-11-30_4c30b9d_bodies/stall.txt, one loop,
// default timeouts): beside 300 clients that do not read, a fresh 200 KB
// download took 0.5-5.2 ms and a 4 MiB one 7.9-24 ms (idle: 2.2 and
// 28.7 ms; epoll beside the same clients: 0.7-4.1 and 9.9-14.8 ms), with
// 8 io_uring workers. The design before it (one pool of 64 shared pipes,
// blocking sockets) served neither within 10 s, and ran 64 workers.
//
// # File-system calls
//
// The core makes a miss's file-system calls from its helper goroutines
// (core/offload.go) through core.FileCalls; this backend's (fileCalls,
// file_linux.go) turns each into one SQE on the loop's ring: the caller
// fills an mmap'd slot, posts to the loop (core.Loop.Post: only the
// loop's thread may touch a SINGLE_ISSUER ring), the loop prepares the
// SQE by hand (user_data: opFile, the slot's generation and index), and
// the CQE answers the caller. The SQEs are filled field by field as
// liburing's io_uring_prep_openat2(3), io_uring_prep_statx(3) and
// io_uring_prep_read(3) do: giouring's PrepareOpenat2 issues
// IORING_OP_OPENAT, which ignores open_how and with it RESOLVE_BENEATH
// (TestFileCallsThroughRing opens "../x" and a symlink out of the root
// with it, and is refused EXDEV with ours), and its Openat and Statx pass
// the address of the slice header. The kernel tries an OPENAT2's lookup
// inline and a buffered READ on ext4, xfs and btrfs without a worker
// (async buffered reads); a STATX always runs on an io-wq worker. A READ
// that completes with -EAGAIN (an O_NONBLOCK file on a file system
// without FMODE_NOWAIT, on kernels that report it) is made again by
// pread(2) on the helper goroutine, which may block.
//
// At teardown, calls not yet issued are answered ECANCELED, issued ones
// are cancelled (ASYNC_CANCEL); an open or stat is answered at once and
// its CQE still awaited, and an fd that an open made for a caller who
// was answered is closed when it arrives; a read or close is answered by
// its CQE. Calls after that get ECANCELED, and Close closes directly
// (TestFileCallsShutdownInFlight).
//
// # Closing, and shutting down
//
// A socket is closed only when no request of its connection can still
// look its fd up (a linked request does so only when it starts, so closing
// under a chain could send to whichever socket gets the fd number next).
// With only the multishot recv armed, the recv is cancelled and the socket
// closed in one submission (cancel → hard link → IORING_OP_CLOSE; the recv
// holds its own reference). With a send chain in flight, shutdown(SHUT_RDWR)
// ends its sends (EPIPE) and the recv (EOF), and the close follows the
// chain's last CQE. shutdown(2) (the lingering close's SHUT_WR, and that
// SHUT_RDWR) is made on the loop, not by IORING_OP_SHUTDOWN: the kernel
// runs that on a worker, which looks the fd up only then, so a close had
// to wait for its CQE (a close under it let it shut down the next
// connection given that fd number, issue 10, TestBadRequestThenFresh),
// and each Connection: close woke a worker. A CGI pipe read in flight is
// cancelled, and so is the reset poll, which would never end: the core
// closes the pipe in FreeConn, which must not run under the read. The
// slot, the Conn (core.Loop.FreeConn) and any pipe or chunk are released
// at the last CQE.
//
// When ctx is cancelled the loop is woken through an eventfd it has a read
// armed on (the read is re-armed at each wake-up: CGI goroutines use it
// too, during the shutdown as well). It cancels its accepts and closes each listener when its accept
// has ended, calls core.Loop.Drain, closes idle connections, and lets the
// others finish until Config.ShutdownTimeout. Then it closes the rest, waits
// for every outstanding CQE, and only then closes its fds, pipes and ring,
// unmaps its buffers, calls core.Loop.Close and returns. Should the kernel
// not complete every request by the server's exit deadline
// (core.Server.ExitDeadline: the shutdown timeout plus
// core.ShutdownGrace), the loop returns anyway, says so on stderr and
// leaves the buffers mapped, so that no late completion can write into
// reused memory.
package uring
