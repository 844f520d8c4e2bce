// Package poll is twinloop's poll(2) backend (--backend=poll): a study
// baseline beside blocking, never chosen by --backend=auto. It is the
// ladder's rung between the blocking server and epoll, the event loop the
// seed write-ups climbed through: one level-triggered ppoll per pass over
// every fd the loop has, so that what epoll saves (the walk of every
// connection on every wait, in the kernel and in the loop) can be
// measured through the same core and the same core.Backend contract.
//
// One loop per --loops, each on its own locked OS thread with its own
// SO_REUSEPORT listeners, as epoll's. A loop keeps one pollfd array: the
// wake-up eventfd (shutdown, core.Loop.Post), then its listeners, then one
// pollfd per connection and one per CGI script's pipe, in no order. Each
// connection knows its pollfds' indexes; closing one moves the last pollfd
// into its place (remove), so the array stays dense and a pass never
// walks a hole. ppoll hands back only revents in that array, read in the
// same pass: no event outlives its connection, so no generation is
// needed, where epoll's event data must carry one.
//
// What a request costs on a keep-alive connection, and why:
//
//   - ppoll, twice when the loop has nothing to do: a pass first polls
//     with a zero timeout, raw, as epoll's loop does, and sleeps in a
//     second ppoll through the runtime only when nothing is ready. Each
//     walks every pollfd of the loop: the kernel calls each socket's poll
//     and queues a wait entry on it, and the loop then walks the array
//     for revents. That cost grows with the connections, not the
//     requests.
//   - one read: level-triggered, the loop reads once per POLLIN; a read
//     that comes back short has emptied the socket, and a read that finds
//     nothing is never made.
//   - one write for the header and an in-memory body, writev for bodies
//     from the cache entry, and for a file body a header with MSG_MORE,
//     then sendfile chunks, each probed for residency first and read
//     ahead on a helper when cold, exactly as on epoll (loops.Bodies).
//   - no registration: what ppoll watches is a field of the array. POLLIN
//     is asked for while core.Interest.Read holds (a socket at EOF would
//     otherwise be reported on every pass), POLLOUT only after a write
//     found the socket full, while bytes are unsent.
//
// The file-system rule is epoll's, by the same code: a cache miss is
// probed on the loop with calls that fail rather than wait
// (the core decides, for every backend: core/fsop.go), the rest goes to the core's helpers, and a
// file body is sent by loops.Bodies, which keeps every read of a range
// not in the page cache, and every read of a file that is not local, off
// the loop. accept4's errors are loops.Accepts, as on epoll. Every call is
// made and counted by loops.Sys, ppoll as "ppoll", so that syscalls per
// request compare with the other backends' (--stats, the exit line).
//
// # Life of a request
//
// A cached 1.5 KB GET on a keep-alive connection, default flags, the loop
// idle: Run's ppoll (zero timeout) finds nothing, the second one sleeps
// (waitMillis: until the next second) and reports POLLIN → dispatch walks
// the array to its pollfd → drive → Conn.Next says read: one read(2),
// Conn.Feed, which answers from the cache into Out.Mem → watch →
// Conn.Next says write → write → sendBytes: one write(2), Conn.Sent →
// watch (POLLIN stays asked for) → Conn.Next says read, and drive
// returns: one read per POLLIN.
//
// A cached 1 MiB GET, its body from the file: as far as write, whose
// sendBytes sends the header with MSG_MORE; then write again:
// loops.Bodies.WriteFile → sendfile asks cachestat about the next chunk
// (up to 1 MiB; Residency.Range), and the chunk resident, sendfile(2)
// moves what the socket takes (on loopback, all of it in one call),
// Conn.Sent, and Conn.Next says read. A body the socket cannot take at
// once is sent until EAGAIN: then full is set, watch asks for POLLOUT,
// and drive returns; each POLLOUT runs the same functions again (Run →
// dispatch → drive → watch → write → sendfile(2)) until the body is out,
// and watch drops POLLOUT.
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
//	  loop_linux.go: loop.Run, loop.dispatch, loop.waitMillis, loop.drive,
//	    loop.watch, loop.write, loop.sendBytes, loop.sendFailed
//	  internal/loops/filebody_linux.go: Body.Waiting, SendStep
//	  internal/loops/lifecycle_linux.go: Lifecycle.Stopping,
//	    Lifecycle.Resume, Lifecycle.Timeout
//	  internal/loops/loops.go: WaitErrno
//	  internal/loops/sys_linux.go: Sys.Read, Sys.PollWait
//	small:
//	  internal/loops/sys_linux.go: Sys.Write
//	large:
//	  internal/loops/filebody_linux.go: Body.NewPart, Bodies.WriteFile,
//	    Bodies.Sendfile, Bodies.resident
//	  internal/loops/residency_linux.go: Residency.Range
//	  internal/loops/sys_linux.go: Sys.SendMore, Sys.SendfileResident,
//	    Sys.sendfile, Sys.Cachestat
//	miss:
//	  internal/loops/sys_linux.go: Sys.Write
package poll
