// Package epoll is twinloop's readiness-based backend: one edge-triggered
// epoll loop per --loops, each on its own locked OS thread with its own
// SO_REUSEPORT listeners, no state shared between loops on the hot path.
//
// What a request costs on a keep-alive connection, and why:
//
//   - epoll_wait, shared by every connection that became ready in the same
//     pass. Connections are registered once, EPOLLIN|EPOLLOUT|EPOLLRDHUP with
//     EPOLLET, so no epoll_ctl is ever made per request (a level-triggered
//     server toggling EPOLLOUT pays one or two per request).
//   - one read. Edge-triggered epoll asks to read until EAGAIN, but a read
//     that returns less than the buffer has emptied the socket, and any byte
//     that arrives later raises a new edge; so the EAGAIN read is skipped
//     unless EPOLLRDHUP says a FIN is there too.
//   - one write for the header and an in-memory body (pipelined requests:
//     one write for all their responses); a writev when a body over 4 KiB
//     is sent from the cache entry itself (core.Out.Vec), sendmsg with
//     MSG_MORE when a file body follows. A large body goes by sendfile
//     after a header sent with MSG_MORE, so both share the first segment.
//     Each sendfile chunk (1 MiB) is probed first with one cachestat; a
//     range not in the page cache is read by a core helper while the
//     connection waits and the loop serves the others (loops.Bodies, shared
//     with the poll backend).
//   - EPOLLOUT is waited for only after a write came up short.
//
// The fast calls (read, write, accept4, and a first epoll_wait with a zero
// timeout) are made with RawSyscall: they never block, so the runtime's
// entersyscall/exitsyscall would be a cost for nothing. A wait that
// may block goes through Syscall, so the runtime can give the P to other
// goroutines meanwhile; so does sendfile, which blocks on the disk when the
// file is not in the page cache (results/cold-sendfile) and the read of the
// part could not be handed off. Every call a
// request causes is made through loops.Sys, which counts it (setup and
// teardown calls are marked uncounted where they are made).
//
// What a connection waits for (core.Conn.Interest) is brought in line with
// the epoll set in one function, watch: the socket is registered once, and
// a CGI script's stdout pipe when Interest names a new one, edge-triggered,
// with its connection's slot and generation (and a pipe bit); the pipe is
// read like the socket and left to the core to close. The wake-up eventfd that starts the
// shutdown also brings the CGI goroutines' posts and the file-system
// helpers' (core.Loop.RunPosted).
//
// A cache miss is probed on the loop, by the core's rule for every
// backend (core/fsop.go, fsMode): openat2 with RESOLVE_CACHED and
// preadv2 with RWF_NOWAIT load a warm file there and then; one that
// would wait for the disk, and every listing, goes to the core's helper
// goroutines (nginx's thread_pool), and its connection is driven again
// when the load lands.
//
// # Life of a request
//
// A cached 1.5 KB GET on a keep-alive connection, default flags, the loop
// idle: Run's raw epoll_wait finds nothing, the second sleeps (waitMillis:
// until the next second) and reports EPOLLIN → conn finds the slot →
// drive (note) → Conn.Next says read: one read(2) (read), Conn.Feed,
// which answers from the cache into Out.Mem (the read came back short:
// the socket is empty) → watch → Conn.Next says write → write →
// plainSends.bytes (the sends chosen at Setup; corkSends is
// --epoll-cork's): one write(2), Conn.Sent → watch → Conn.Next says read,
// and drive returns without the read that would say EAGAIN.
//
// A cached 1 MiB GET, its body from the file: as far as write, whose
// plainSends.bytes sends the header with MSG_MORE; then write again:
// loops.Bodies.WriteFile → sendfile asks cachestat about the next chunk
// (up to 1 MiB; Residency.Range), and the chunk resident, sendfile(2)
// moves what the socket takes (on loopback, all of it in one call),
// Conn.Sent, and Conn.Next says read. A body the socket cannot take at
// once is sent until EAGAIN, when drive returns; each EPOLLOUT edge then
// runs the same functions again: Run → conn → drive → watch → write →
// sendfile(2).
//
// A warm miss (a file not in the loop's cache, in the page cache) runs the
// small GET's functions: the core loads it on the loop (core/fsop.go).
//
// The functions under backend/ these run, as make path measures them
// (scripts/pathwidth) and checks, kind by kind: small is the 1.5 KB GET,
// large the 1 MiB one, miss the warm miss. "every" lists what all three
// run, each kind what it adds; a file without a slash is this package's.
//
//	every:
//	  loop_linux.go: loop.Run, loop.conn, loop.waitMillis, loop.drive,
//	    loop.note, loop.read, loop.watch, loop.sendFailed, loop.write,
//	    plainSends.bytes
//	  internal/loops/filebody_linux.go: Body.Waiting, SendStep
//	  internal/loops/lifecycle_linux.go: Lifecycle.Stopping,
//	    Lifecycle.Resume, Lifecycle.Timeout
//	  internal/loops/loops.go: WaitErrno
//	  internal/loops/sys_linux.go: Sys.Read, Sys.EpollWait
//	small:
//	  internal/loops/sys_linux.go: Sys.Write
//	large:
//	  loop_linux.go: plainSends.bodySent
//	  internal/loops/filebody_linux.go: Body.NewPart, Bodies.WriteFile,
//	    Bodies.Sendfile, Bodies.resident
//	  internal/loops/residency_linux.go: Residency.Range
//	  internal/loops/sys_linux.go: Sys.SendMore, Sys.SendfileResident,
//	    Sys.sendfile, Sys.Cachestat
//	miss:
//	  internal/loops/sys_linux.go: Sys.Write
package epoll
