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
//   - loop_linux.go: the loop: setup, a pass (reap, one enter), the
//     once-a-second timeouts, shutdown and teardown; the user_data layout
//     (op | generation | slot). complete_linux.go: a CQE to its op's
//     handler, from tables set at Setup.
//   - accept_linux.go: listeners, their multishot accepts, and the queue of
//     accepted sockets of which each pass admits a batch (admit).
//     socket_linux.go: what kind of socket a connection is, chosen at
//     Setup (sockets): by default the process's fds.
//   - conn_linux.go: a connection's life: accepted, driven by its core.Conn
//     (drive), its recv kept in line with core.Interest (watch), closed
//     once no request can still look its fd up (close), freed at its last
//     CQE (free).
//   - body_linux.go: a response's send chain, [send Mem] → [poll POLLOUT]
//     → [body in → body out], its senders, planners and carriers, and
//     bodies.init, the one place that chooses them. With sendfile_linux.go
//     (a part in the page cache by sendfile(2) on the loop's thread) and
//     chunk_linux.go (a cold part by READ into a chunk, then SEND), the
//     default body path. splice_linux.go, splice_budget_linux.go: bodies
//     spliced on io_uring's workers within a shared pipe budget, the
//     default's carrier in the cold window (core.Server.Cold).
//   - cgi_linux.go: reads of a CGI script's stdout pipe. file_linux.go:
//     the helpers' file-system calls (core.FileCalls), each an SQE.
//   - ring_linux.go: the ring's setup, its SQEs (sqe, reserve, submit)
//     and the provided-buffer ring. wait.go, wait_linux.go: how a pass
//     waits (--uring-wait, chosen at Setup). sys_linux.go: the package's
//     unsafe. uring_linux.go: Backend, Probe, Serve.
//   - The ablations and Features (features.go, off by default), each in
//     its own file and entering through what Setup chose: bodymode.go and
//     variant_view_linux.go (--uring-body), submiteach_linux.go
//     (--uring-batch=off), skipsend_linux.go (bodies.linkHeader and the
//     op table), bufspan_linux.go (recvBufs), sqpoll_linux.go
//     (ring.enterVia, submitVia, waitFirst), sendzc_linux.go
//     (bodies.send, closing, the op table), fixedfd_linux.go (sockets,
//     the op table); features_linux.go sets up the ring's (registered fd,
//     wait region, NAPI).
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
//     runs, looking the fd up late (issue 10; conn_linux.go, shutdown).
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
//  1. Run → reap → complete → completeConn: the multishot recv's CQE,
//     found by the op in its user_data → onRecv → bufRing.feed:
//     Conn.Feed parses and answers the request from the cache; the
//     buffer goes back to the ring (recycle).
//  2. completeConn → drive: Conn.Next says write → send: one SEND of
//     Out.Mem, its array pinned (heldPins.cover) → queue → watch: the
//     recv is still armed.
//  3. Run → enterAndWait (waitNow, publish, setTimeout) → waitBatch →
//     waitRaw → uringEnter → enter: the pass's one io_uring_enter submits
//     the SEND and waits.
//  4. The next pass: reap → complete → completeConn → onSend: Conn.Sent,
//     chainStep; then drive: Conn.Next says read → watch.
//
// A cached 1 MiB GET, default flags, outside the cold window. The body,
// above --mem-body-max, goes from the file.
//
//  1. As above to drive → send → sendfiles.plan, which lets the header
//     go first: one SEND of Mem (MSG_MORE|MSG_WAITALL) → watch.
//  2. Its CQE: completeConn → onSend → chainStep → drive → send →
//     sendfiles.plan: residency (one cachestat per pass for the file)
//     says the part, up to 1 MiB, is in the page cache;
//     plainSockets.sysFd gives the socket's fd, and sendfile(2)
//     (SendfileResident) moves what the socket takes (Conn.Sent). With bytes left the chain is one
//     POLL_ADD for POLLOUT → watch → enterAndWait.
//  3. The poll's CQE: completeConn → onBodyPoll → chainStep → drive →
//     send → sendfiles.plan, and so on until the body is out; then plan
//     queues nothing, and drive asks Conn.Next at once: read → watch.
//
// A cold part takes chunks.planRead instead (READ, then SEND), a body
// in the cold window pipes.plan. A miss is probed on the loop as on
// epoll (core/fsop.go); a cold one goes through file_linux.go.
package uring
