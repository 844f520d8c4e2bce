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
// The default request runs in four files: the loop, the conn, the body
// and the unsafe. What a feature, an ablation or a rare case adds is in
// its own file, entered through what Setup chose (a nil func, a table
// entry, an interface) or when a count says it has work.
//
//   - loop_linux.go: the loop: setup, a pass (reap, one enter: enterAndWait,
//     waitRaw, yield), the once-a-second timeouts, the SQEs (sqe, queue,
//     reserve, submit); the user_data layout (op | generation | slot).
//     stop_linux.go: the wake read, the shutdown and teardown.
//     complete_linux.go: the tables of each op's CQE handler, set at Setup.
//   - conn_linux.go: a connection's life: accepted, its CQEs (completeConn),
//     driven by its core.Conn (drive), its recv kept in line with
//     core.Interest (watch), its recv buffers given back (bufRing.feed,
//     publish), closed once no request can still look its fd up (close),
//     freed at its last CQE (free).
//   - body_linux.go: a response's send chain, [send Mem] → [poll POLLOUT]
//     → [body in → body out], its senders, planners and carriers,
//     bodies.init, the one place that chooses them, and the default
//     planner (sendfiles: a part in the page cache by sendfile(2) on the
//     loop's thread). chunk_linux.go: a cold part by READ into a chunk,
//     then SEND. splice_linux.go, splice_budget_linux.go: bodies spliced
//     on io_uring's workers within a shared pipe budget, the carrier in
//     the cold window (core.Server.Cold).
//   - sys_linux.go: the package's unsafe, and the ring's enter.
//   - accept_linux.go: listeners, their multishot accepts, the queue of
//     accepted sockets a pass admits (admit, catchUp), entered when it
//     holds one. socket_linux.go: what kind of socket a connection is,
//     chosen at Setup (sockets): by default the process's fds.
//   - cgi_linux.go: reads of a CGI script's stdout pipe, entered by watch
//     while Interest asks. file_linux.go: the helpers' file-system calls
//     (core.FileCalls), each an SQE.
//   - ring_linux.go: the ring's and the buffer ring's setup. wait.go,
//     wait_linux.go: the other --uring-wait modes. uring_linux.go:
//     Backend, Probe, Serve.
//   - The ablations and Features (features.go, off by default), each in
//     its own file and entering through what Setup chose: bodymode.go and
//     variant_view_linux.go (--uring-body), submiteach_linux.go
//     (loop.queued), skipsend_linux.go (bodies.linkHeader, the op
//     table), bufspan_linux.go (recvBufs), sqpoll_linux.go (ring.enter,
//     submitVia, waitFirst), sendzc_linux.go (bodies.send, closing, the
//     op table), fixedfd_linux.go (sockets, bodies.sysFd, the op table);
//     features_linux.go sets up the ring's (registered fd, wait region,
//     NAPI).
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
//  1. Run → reap → completeConn: the multishot recv's CQE, its op's
//     handler found by reap in the op table → onRecv → bufRing.feed:
//     Conn.Feed parses and answers the request from the cache; the
//     buffer goes back to the ring.
//  2. completeConn → drive: Conn.Next says write → send: one SEND of
//     Out.Mem (sqe, queue), its array pinned (heldPins.cover, addrOf) →
//     watch: the recv is still armed.
//  3. Run → enterAndWait (publish, the timeout, flushSQ) → waitRaw
//     (yield) → ring.enter: the pass's one io_uring_enter submits the
//     SEND and waits.
//  4. The next pass: reap → completeConn → onSend: Conn.Sent,
//     chainStep; then drive: Conn.Next says read → watch.
//
// A cached 1 MiB GET, default flags, outside the cold window. The body,
// above --mem-body-max, goes from the file.
//
//  1. As above to drive → send → sendfiles.plan, which lets the header
//     go first: one SEND of Mem (MSG_MORE|MSG_WAITALL) → watch.
//  2. Its CQE: completeConn → onSend → chainStep → drive → send →
//     sendfiles.plan: residency (one cachestat per pass for the file)
//     says the part, up to 1 MiB, is in the page cache, and sendfile(2)
//     (SendfileResident) moves what the socket takes (Conn.Sent). With
//     bytes left the chain is one POLL_ADD for POLLOUT → watch →
//     enterAndWait.
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
//	  body_linux.go: loop.send, loop.chainStep, loop.onSend
//	  conn_linux.go: loop.drive, loop.watch, loop.onRecv,
//	    loop.completeConn, bufRing.feed, bufRing.publish
//	  loop_linux.go: loop.Run, loop.enterAndWait, loop.yield, loop.waitRaw,
//	    loop.reap, loop.sqe, loop.queue
//	  sys_linux.go: addrOf, ringView.flushSQ, ring.enter, heldPins.cover
//	  internal/loops/lifecycle_linux.go: Lifecycle.Stopping,
//	    Lifecycle.Resume, Lifecycle.Timeout
//	  internal/loops/loops.go: WaitErrno
//	small: nothing of its own
//	large:
//	  body_linux.go: sendfiles.plan
//	  internal/loops/residency_linux.go: Residency.Range, Residency.Body
//	  internal/loops/sys_linux.go: Sys.SendfileResident, Sys.sendfile,
//	    Sys.Cachestat
//	miss: nothing of its own
package uring
