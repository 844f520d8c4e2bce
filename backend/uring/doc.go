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
//     spliced on io_uring's workers, the default's carrier in the cold
//     window (core.Server.Cold), within the one budget that the server's
//     pipes and chunks share, and the line that waits for it.
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
// # Techniques, buffers and switches
//
// The kernel each technique needs (Probe checks each, not the version),
// the rule that every buffer an SQE names stays mapped or pinned until its
// CQE, and the ablations and off-by-default Features: docs/uring.md.
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
//
// The functions under backend/ these run, as make path measures them
// (scripts/pathwidth) and checks, kind by kind: small is the 1.5 KB GET,
// large the 1 MiB one, miss a warm miss. "every" lists what all three
// run, each kind what it adds; a file without a slash is this package's.
//
//	every:
//	  accept_linux.go: loop.admitting, loop.armAccept, loop.admit,
//	    fdQueue.len
//	  body_linux.go: loop.send, loop.chainStep, bodies.done, heapMem,
//	    sendVec.sent, loop.onSend
//	  cgi_linux.go: loop.watchStdout
//	  complete_linux.go: loop.complete, loop.ended, loop.completeConn
//	  conn_linux.go: conn.live, conn.closing, loop.drive, loop.watch,
//	    loop.watchReset, loop.onRecv
//	  loop_linux.go: pack, unpack, loop.Run, loop.enterAndWait,
//	    loop.enterFailed, loop.setTimeout, loop.reap, loop.queue,
//	    loop.queueAs, queuedOnly
//	  ring_linux.go: loop.sqe, loop.reserve, bufRing.buf, bufRing.feed,
//	    bufRing.recycle, bufRing.publish
//	  splice_linux.go: loop.servePipeWaiters
//	  sys_linux.go: addrOf, ringView.flushSQ, enter, loop.uringEnter,
//	    loop.uringEnterFlags, heldPins.cover
//	  wait_linux.go: loop.yield, waitNow, loop.waitBatch, loop.waitRaw
//	  internal/loops/lifecycle_linux.go: Lifecycle.Stopping,
//	    Lifecycle.Resume, Lifecycle.Timeout
//	  internal/loops/loops.go: WaitErrno
//	small:
//	  sys_linux.go: arrayEnd
//	large:
//	  sendfile_linux.go: sendfiles.plan, loop.residency
//	  socket_linux.go: plainSockets.sysFd
//	  internal/loops/residency_linux.go: Residency.Range, Residency.Body
//	  internal/loops/sys_linux.go: Sys.SendfileResident, Sys.sendfile,
//	    Sys.Cachestat
//	miss:
//	  sys_linux.go: arrayEnd
package uring
