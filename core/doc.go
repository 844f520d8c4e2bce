// Package core is everything in twinloop that is not I/O: the HTTP/1.1
// parser, the connection state machine, path resolution, the file cache,
// the response builder, the Date line and the counters. It never touches a
// socket: the backends move the bytes.
//
// The life of a request, and the Conn's state (Conn.state, conn.go) in
// brackets:
//
//  1. A backend loop accepts a connection and takes a *Conn from its *Loop
//     [reading].
//  2. Received bytes go to Conn.Feed. ParseRequest works on them in place;
//     only an incomplete tail is copied into the Conn. ErrNeedMore is not an
//     error.
//  3. Each complete request is answered from the loop's file cache: a hit
//     makes no syscall (fd, stat and header block are cached, small bodies
//     are in memory, the Date line changes once a second; the first hit
//     of a second starts a re-stat off the loop and is served meanwhile).
//     Pipelined requests that hit memory are answered into one buffer
//     [writing]. A miss loads the file: on the loop when the probe finds
//     it warm, else off the loop while the request waits [file] and the
//     loop serves the others (fsop.go, load.go).
//  4. Conn.Out says what to send: bytes, then maybe a file range (fd,
//     offset, length). A memory body over 4 KiB is not copied but
//     referenced from the cache entry (Out.Body, and Out.Vec for a batch
//     of them, which a backend gathers into one writev or SENDMSG), held
//     by the File's refcount until it is sent. The backend sends them as
//     its kernel interface does best and reports with Conn.Sent how many
//     went out. A multipart range body from a file is a sequence of such
//     Outs, one per part.
//  5. Once all is sent, the requests waiting behind the response are
//     answered [writing again], or the connection waits for the next one
//     [reading], or it closes [closing; lingering first, when input may be
//     waiting, so that the close does not reset the response's tail].
//
// How the connection is to end is a second value beside its state, its
// end intent (Conn.end: keep-alive, close after the response, linger,
// abort), which only rises: a Connection: close, an error page, input that
// will not be read and an answer cut short each raise it, and closing
// reads it to choose between a lingering close and a plain one.
//
// Conn.Next turns the state into what the backend does now: read, write,
// linger or close; Conn.Interest, into what it watches while it waits
// (interest.go). To follow one request, read this file, conn.go, and one
// backend's drive function (backend/epoll/loop_linux.go is the shortest).
//
// Behind a balancer that sends the PROXY protocol (Config.ProxyProtocol),
// a connection starts in one more state [proxy] until its header is whole
// (proxy.go): the header's address becomes Conn.Remote, and a connection
// whose header cannot be trusted is closed before any request is read.
//
// A request body, Content-Length or chunked, is read in one place for
// every path (body.go), within its limit and timeout [body]: dropped on a
// static path, whose answer waits for it, or fed to a script's stdin.
//
// A request for /cgi-bin/NAME (Config.CGIDir) runs a script instead of step
// 3 [running]: its goroutines fork, feed stdin and reap, its stdout is one
// more fd the backend watches (Interest.Pipe), and what the goroutines learn
// comes back to the loop through Loop.Post (mailbox.go). All of it hangs off
// the Conn's cgiConn, which a static request never has.
//
// The only syscalls in this package are a load's (load.go, open_linux.go)
// and CGI's: pipe2 and kill on the loop, the rest on the scripts'
// goroutines (cgi_linux.go). A load, a re-stat, a listing and a script's
// lookup run where the one rule for every backend puts them (fsop.go,
// fsMode): on the loop and waiting when it has no waker (the blocking
// backend); else probed on the loop with calls that fail rather than wait
// (a miss beneath a local root); or on a helper goroutine (offload.go)
// through the loop's FileCalls (io_uring's ring, SetFileCalls): what the
// probe found cold, and the rest. Those on the loop are made and counted by
// sys_linux.go; the helpers' are counted in the loop's Stats when their
// operation lands.
package core
