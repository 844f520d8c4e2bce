// Package uring is twinloop's completion-based backend on io_uring, through
// github.com/pawelgaczynski/giouring: one ring per --loops, each created on
// its own locked OS thread, with its own SO_REUSEPORT listeners. A loop
// queues SQEs as its connections ask, and enters the kernel once per pass
// to submit them all and wait for completions.
//
// What each technique and switch costs is in results/STUDY.md (this
// file's old tables: results/uring-doc-tables.md), not in comments.
//
// # Files, one mechanism each
//
//   - loop_linux.go: the loop: setup, a pass (reap, dispatch by op, one
//     enter), the once-a-second timeouts, shutdown and teardown; the
//     user_data layout (op | generation | slot).
//   - accept_linux.go: listeners, their multishot accepts, and the queue of
//     accepted sockets of which each pass admits a batch (admit).
//   - conn_linux.go: a connection's life: accepted, driven by its core.Conn
//     (drive), its recv kept in line with core.Interest (watch), closed
//     once no request can still look its fd up (close), freed at its last
//     CQE (free).
//   - body_linux.go: a response's send chain, [send Mem] → [poll POLLOUT]
//     → [body in → body out], and the planner and carrier a file body goes
//     through. With sendfile_linux.go (sendfiles: a part in the page cache
//     by sendfile(2) on the loop's thread, a full socket waited for by a
//     poll) and chunk_linux.go (chunks: a cold part by READ into a chunk,
//     then SEND), the default body path.
//   - splice_linux.go, splice_budget_linux.go: bodies spliced file → pipe →
//     socket on io_uring's workers, within a pipe budget the loops share:
//     the default's carrier while the server's cold window is open
//     (core.Server.Cold), and every body's with --uring-body=splice.
//   - variant_view_linux.go: the --uring-body=view and view-zc ablations, a
//     SEND (or SEND_ZC) from the File's read-only shared mapping.
//   - bodymode.go: BodyMode, the --uring-body values; bodies.init
//     (body_linux.go) is the one place that chooses among them.
//   - cgi_linux.go: reads of a CGI script's stdout pipe.
//   - file_linux.go: the helpers' file-system calls (core.FileCalls: a cold
//     miss's open, statx, read, close), each an SQE on the loop's ring.
//   - ring_linux.go: the ring's setup and SQEs (sqe, reserve, submit), and
//     the provided-buffer ring the recvs take their buffers from.
//   - wait.go, wait_linux.go: how a pass waits in io_uring_enter
//     (--uring-wait), and how the loop lends its P before a raw wait.
//   - sys_linux.go: the package's unsafe: SQE addresses, the view of
//     giouring's internals, the raw io_uring_enter, and the pins that
//     hold a connection's send memory still (heldPins).
//   - uring_linux.go: Backend and its switches, Probe, Serve.
//   - features.go, features_linux.go: Features, io_uring's newer
//     features (issue 28), each off by default and behind a flag of its
//     own, and how each is checked and set up; the ones that change a
//     request's path live in files of their own: skipsend_linux.go
//     (--uring-skip-send), bufspan_linux.go (--uring-recv-bundle,
//     --uring-buf-inc), sqpoll_linux.go (--uring-sqpoll), sendzc_linux.go
//     (--uring-send-zc: zero-copy sends, held until their notification;
//     --uring-body=view-zc's too), fixedfd_linux.go (--uring-fixed-files:
//     connections as direct descriptors, and the fds installed for the
//     calls that need one); the registered ring fd and wait region are
//     the ring's (ring.enterFd, enter), and NAPI busy polling
//     (--uring-napi) is registered with it (registerNAPI) and runs in the
//     kernel's wait.
//
// # Techniques, and the kernel each needs
//
// Probe checks what the ring needs (opcode probe, IORING_FEAT_ bits, and a
// multishot recv on a socket pair) instead of parsing the kernel version.
//
//   - IORING_SETUP_SINGLE_ISSUER|DEFER_TASKRUN (6.1): completion work runs
//     only when the loop enters the kernel, on its own thread; else
//     COOP_TASKRUN (5.19), else neither. SUBMIT_ALL (5.18).
//   - IORING_SETUP_CQSIZE and IORING_FEAT_NODROP (5.5): a CQ slot per
//     connection, up to maxCQ; beyond that the kernel keeps completions
//     on its overflow list.
//   - IORING_FEAT_FAST_POLL (5.7): a recv or send that would block is
//     polled, not handed to a kernel worker.
//   - IORING_ENTER_EXT_ARG (5.11): a wait with a timeout and no timeout
//     SQE; its min_wait_usec (6.12) lets --uring-wait=batch ask for
//     several completions.
//   - multishot accept (5.19). A pass that leaves accepted sockets to
//     admit ends with a catch-up enter, not a wait (catchUp: from 6.13 an
//     enter runs a bounded share of a DEFER_TASKRUN ring's deferred work).
//   - multishot recv (6.0) into a provided buffer ring (5.19): a buffer
//     goes back once Conn.Feed returns; a recv that ends with ENOBUFS is
//     re-armed, its data waiting in the socket.
//   - IORING_OP_SEND, READ, CLOSE, OPENAT2 and STATX (5.6), SPLICE (5.7),
//     POLL_ADD (5.1; multishot, for a reset after the peer's FIN, 5.13),
//     ASYNC_CANCEL (5.5), IOSQE_IO_LINK (5.3) and IOSQE_IO_HARDLINK
//     (5.5); SEND_ZC (6.0) and SENDMSG_ZC (6.1) for --uring-send-zc and
//     --uring-body=view-zc only.
//   - IORING_REGISTER_IOWQ_MAX_WORKERS (5.15): the process's io_uring
//     workers stay few, split between the loops. Splices and STATX run on
//     them; none waits there for a client.
//   - sendfile(2), made raw on the loop's thread, after cachestat(2)
//     (6.5, optional) says the part is in the page cache, so that the loop
//     never waits for the disk; without cachestat every part goes by
//     chunk.
//   - shutdown(2) made on the loop, not IORING_OP_SHUTDOWN, which a worker
//     runs, looking the fd up late (issue 10; conn_linux.go, shutdown);
//     with --uring-fixed-files a connection without an fd takes it all
//     the same, and its close waits for it (fixedfd_linux.go).
//
// Every buffer an SQE names is mmap'd outside the Go heap or pinned, and
// is the kernel's from the SQE to its CQE (to its notification, for a
// zero-copy send): recv buffers, the response's Mem and a SENDMSG's
// msghdr and iovecs (heldPins; a Mem the core lent from its mapped slab,
// core.Out.Mapped, needs no pin), cached bodies (mapped by the core, held
// by the Conn until Sent), chunks, File views, file-call
// slots and CGI read buffers. A loop unmaps them only after its last CQE,
// and leaves them mapped when the kernel misses the exit deadline
// (Teardown).
//
// The switches of Backend (--uring-multishot=off, --uring-batch=off,
// --uring-enter=raw, --uring-wait other than batch, --uring-body other
// than sendfile) are ablations, kept to measure what the default buys.
// Its Features are off: measured one by one against the default
// (results/STUDY.md, "What each io_uring feature buys an HTTP server"),
// none saved more than the run's noise, and SQPOLL, zero-copy sends (on
// loopback) and NAPI busy polling (over veth) cost more. They are: a
// registered ring fd (IORING_REGISTER_RING_FDS, 5.18),
// IOSQE_CQE_SKIP_SUCCESS on a header with body steps linked behind it
// (5.17), recv bundles (6.10), incremental buffer consumption
// (IOU_PBUF_RING_INC, 6.12), SQPOLL with a pinned thread, a registered
// wait region (6.13), zero-copy sends of large bodies (SEND_ZC 6.0,
// SENDMSG_ZC 6.1), direct descriptors (a sparse registered file table
// and IORING_FILE_INDEX_ALLOC, 5.19, with IORING_OP_FIXED_FD_INSTALL,
// 6.8, for what needs an fd), and NAPI busy polling
// (IORING_REGISTER_NAPI, 6.9; loopback has no NAPI, so it is measured
// over a veth pair, scripts/veth.sh). Probe refuses one this kernel
// lacks, naming the kernel it needs.
//
// # Life of a request
//
// A cached 1.5 KB GET on a keep-alive connection, default flags. The
// core copies the body into Out.Mem behind its header.
//
//  1. Run → reap → complete: the multishot recv's CQE, dispatched by the op
//     in its user_data.
//  2. onRecv: Conn.Feed parses the request in the provided buffer and
//     answers it from the cache; the buffer goes back to the ring.
//  3. drive: Conn.Next says write → send: one SEND of Conn.Out's Mem, its
//     array pinned → watch: the recv is still armed, nothing to queue.
//  4. Run → enterAndWait: the pass's one io_uring_enter submits the SEND
//     and waits.
//  5. The next pass: reap → complete → onSend: Conn.Sent → chainStep →
//     drive: Conn.Next says read → watch: nothing to queue.
//
// A cached 1 MiB GET, default flags, outside the cold window. The body,
// above --mem-body-max, goes from the file.
//
//  1. Run → reap → complete → onRecv → drive, as above → send asks the
//     planner, sendfiles.plan, which lets the header go first: the chain
//     is one SEND of Mem (MSG_MORE|MSG_WAITALL) → watch → Run →
//     enterAndWait.
//  2. Its CQE: reap → complete → onSend → chainStep → drive → send →
//     sendfiles.plan: residency (one cachestat per pass for the file) says
//     the next part, up to 1 MiB, is in the page cache, so sendfile(2)
//     moves what the socket takes, and Conn.Sent. With bytes left the chain
//     is one POLL_ADD for POLLOUT → watch → Run → enterAndWait.
//  3. The poll's CQE: reap → complete → onBodyPoll → chainStep → drive →
//     send → sendfiles.plan: the next sendfile(2), and so on until the
//     body is out; then plan queues nothing, and drive asks Conn.Next at
//     once, which says read → watch.
//
// A cold part takes chunks.planRead instead (READ, then SEND, on the
// ring), and a body in the cold window pipes.plan (splice_linux.go). A
// miss is probed on the loop as on epoll (core/fsop.go); a cold one goes
// through file_linux.go.
package uring
