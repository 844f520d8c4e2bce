// Package blocking is twinloop's baseline backend (--backend=blocking): one
// thread, blocking accept, read and write, one connection at a time, the
// way a first socket server is written. It exists for the syscall study
// (make ladder): it is the ladder's first row, the seed post's first
// server, measured through the same core and the same core.Backend
// contract as epoll and io_uring, so that every later step is compared
// with the same HTTP work. It is also a third implementation of that
// contract, which shows the contract does not lean on either event loop.
//
// It is never chosen by --backend=auto and is no server to deploy: while
// one client holds a keep-alive connection, every other client waits in the
// listen backlog. --loops opens that many SO_REUSEPORT listeners, all
// served by the same one thread.
//
// How it waits without an event loop:
//
//   - The listener and, inherited by every accepted socket (the kernel
//     copies sk_rcvtimeo and sk_sndtimeo when it clones the listener),
//     SO_RCVTIMEO and SO_SNDTIMEO of one second. A blocking accept, read or
//     write returns EAGAIN after a second without progress; the loop then
//     ticks the core's clock, applies the timeouts and looks for a shutdown
//     request, as the event loops do once a second. A client that trickles
//     never lets a read wait that long, so after a second of reads that
//     made progress the loop applies them too (a head trickled in is held
//     to --header-timeout from its first byte). No setsockopt is made
//     per connection, but for those queued before the loop set its
//     listeners' timeouts, which Setup sets by hand, and those that lack
//     them: one getsockopt per connection finds a connection that moved
//     over from another server's closing listener (--takeover,
//     tcp_migrate_req), made by that listener with its options (an epoll
//     or io_uring server's have no timeout).
//   - With one listener, accept4 blocks on it. With several (--loops > 1,
//     or IPv4 and IPv6), ppoll(2) waits for any of them first.
//   - The calls that may block go through Syscall (loops.Sys's …Blocking
//     calls, which count them as every call is counted), so the Go runtime
//     can run other goroutines (the GC, the shutdown) meanwhile.
//
// A request on a keep-alive connection costs one read and one write (a
// large body: a write of the header, then sendfile; a memory body over
// 4 KiB: a write of the header, then one of the body), as on epoll, but
// without epoll_wait; each connection adds accept4, the getsockopt and
// close.
//
// # Life of a request
//
// A cached 1.5 KB GET on a keep-alive connection, default flags: serve,
// which runs the connection to its end, finds Conn.Next says read →
// ReadBlocking: one read(2), which returns with the request → tick sets
// the core's clock → Conn.Feed, which answers from the cache into Out.Mem
// → Conn.Next says write → write → WriteBlocking: one write(2) → tick →
// Conn.Sent → Conn.Next says read, and serve blocks in the next read.
//
// A cached 1 MiB GET, its body from the file: as far as write, which
// sends the header; then write again: sendfile(2) on the loop's thread,
// through the runtime, with no residency probe (the baseline alone waits
// for the disk), up to 1 MiB a call (here, one call), until the body is
// out.
//
// A warm miss (a file not in the loop's cache, in the page cache) runs the
// small GET's functions: the core loads the file.
//
// The functions under backend/ these run, as make path measures them
// (scripts/pathwidth) and checks, kind by kind: small is the 1.5 KB GET,
// large the 1 MiB one, miss the warm miss. "every" lists what all three
// run, each kind what it adds; a file without a slash is this package's.
//
//	every:
//	  blocking_linux.go: loop.tick, loop.serve, loop.write
//	  internal/loops/sys_linux.go: Sys.ReadBlocking, Sys.WriteBlocking,
//	    Sys.blocking
//	small: nothing of its own
//	large:
//	  internal/loops/sys_linux.go: Sys.Sendfile, Sys.sendfile
//	miss: nothing of its own
package blocking
