package core

import (
	"bytes"
	"strconv"
	"sync"
	"time"
)

// CGI/1.1 (RFC 3875) without blocking the loop. A request for
// /cgi-bin/NAME[/PATH_INFO] runs NAME from Config.CGIDir:
//
//	loop thread                               job goroutines
//	───────────                               ──────────────
//	serveCGI: lookup, pipe2, env ──start──▶   fork+exec (Setsid)
//	request body ──chunks (≤64 KiB)──▶        write to the script's stdin
//	         ◀──Post(ack)── (one in flight)
//	backend reads Conn.Pipe ─▶ FeedPipe:      wait for the exit, kill the
//	  CGI header → HTTP/1.1 head,             process group and what else
//	  body → chunks (1.0: until close)        it left (sweep), reap
//	PipeEOF: last chunk, or 502, or           ──Post(exit)──▶ Loop.jobs
//	  the local redirect
//
// The loop never waits for a script: the script's stdout is one more fd the
// backend watches, as Conn.Interest names it, and what the goroutines learn
// comes back through Loop.Post. A Conn serves no other
// request while its script's output is being answered; a script's
// process group is killed when its connection closes (a reset, a failed
// write, or for HTTP/1.0 a FIN before the answer: cgiPeerEOF), at its
// deadline, when it exits, and at shutdown; when it exits, what it left
// running is killed too, daemonized or not (cgi_sweep_linux.go). At most
// Config.CGIMax scripts run at once in the process (cgiAcquire).
//
// A Conn's CGI fields are in its cgiConn, which exists only from the
// start of a script to the end of its output (PipeEOF), so that the
// static path (conn.go) never meets them; the Conn is in running while
// the script answers (in body first, while its request body is read).
//
// The backend's side of a script's stdout (Interest.Pipe, PipeRead):
//
//   - A new Pipe is watched at once: epoll adds it edge-triggered, whatever
//     --epoll-trigger says; io_uring reads it into a buffer of its own, one
//     read at a time, which the kernel completes when the pipe has data,
//     O_NONBLOCK or not (backend/uring's TestPipeReadWaits).
//   - While PipeRead, the bytes go to FeedPipe; end of file or a read error
//     goes to PipeEOF. PipeRead turns false while OutBufMax bytes wait
//     unsent: the script then blocks on a full pipe. It turns true again in
//     Sent, and no new event comes for bytes already in the pipe, so the
//     backend reads on without one.
//   - The backend never closes the pipe: PipeEOF and Loop.FreeConn do, so
//     neither is called while a read of it is in flight (io_uring: cancel
//     it and wait for its CQE first, as for the socket).
//   - PipeEOF may start the next pipelined script at once, whose pipe may
//     get the same fd number: a backend forgets its pipe when it calls
//     PipeEOF, so that the Pipe it then sees is a new one.

// cgiConn is the CGI half of a Conn, nil on static paths.
type cgiConn struct {
	job       *cgiJob // the script answering the current request; nil once detached (its answer ended or was cut short)
	pipe      int     // read end of the script's stdout, -1: none; only PipeEOF and FreeConn close it
	redirects int     // local redirects followed for the current request
}

// script returns the script answering the current request, or nil.
func (c *Conn) script() *cgiJob {
	if c.cgi == nil {
		return nil
	}
	return c.cgi.job
}

// cgiReset kills the connection's script, if one still runs, and closes
// its pipe: the connection is being freed.
func (c *Conn) cgiReset() {
	if j := c.script(); j != nil {
		j.kill()
		c.detach()
	}
	if c.cgi.pipe >= 0 {
		c.l.sys().close(c.cgi.pipe)
	}
	c.cgi = nil
}

// cgiJob is one run of a script.
type cgiJob struct {
	l    *Loop
	name string

	// Immutable once the goroutine starts.
	path  string      // what is executed
	dir   string      // its working directory
	env   []string    // its whole environment
	stdin chan []byte // body chunks, loop → writer goroutine; nil: no body (stdin is /dev/null)

	// Owned by the loop's thread.
	c        *Conn   // the connection it answers; nil once detached
	head     []byte  // a copy of the request head, which req aliases
	req      Request // the request, for the response head, the log and a local redirect
	deadline time.Time
	headDone bool   // the script's header was read
	probed   bool   // the peer's FIN was seen before the answer began (cgiPeerEOF)
	failed   bool   // its header was malformed: 502 once its output ends
	status   int    // status sent
	chunked  bool   // its body goes out in chunks (HTTP/1.1)
	noBody   bool   // HEAD, 204, 304, local redirect: output after the header is dropped
	sent     int64  // body bytes sent, for the log
	location []byte // local redirect: the path to answer instead, once the output ends
	hbuf     []byte // the header so far, when it came in more than one read

	fill      []byte // body bytes for the next chunk to hand over
	spare     []byte // the other buffer, back from the writer
	stdinOpen bool   // the stdin channel is open
	stdinBusy bool   // a chunk is with the writer
	bodyDone  bool   // the whole body is in fill or handed over

	mu     sync.Mutex // guards pid, killed, exited against the goroutine
	pid    int
	killed bool
	exited bool // the script has exited: its pid is the goroutine's to reap
}

const (
	cgiChunk     = 64 << 10 // body bytes handed to the stdin writer at a time
	maxRedirects = 10       // local redirects per request, as nginx's internal redirects
)

// Pipe returns the read end of the running script's stdout, non-blocking,
// or -1: Interest's Pipe.
func (c *Conn) Pipe() int {
	if c.cgi == nil {
		return -1
	}
	return c.cgi.pipe
}

// WantPipe reports whether the backend should read Pipe now: Interest's
// PipeRead. It is false while the response has OutBufMax bytes unsent (the
// script then blocks on a full pipe) and once the answer no longer needs
// the output.
func (c *Conn) WantPipe() bool {
	return c.script() != nil && c.cgi.pipe >= 0 && len(c.out)-c.sent < c.l.srv.Config.OutBufMax
}

// FeedPipe hands the connection bytes read from Pipe. p is only read
// during the call.
func (c *Conn) FeedPipe(p []byte) {
	j := c.script()
	if j == nil || j.failed {
		return
	}
	if j.headDone {
		c.cgiBody(j, p)
		return
	}
	b := p
	if len(j.hbuf) > 0 {
		j.hbuf = append(j.hbuf, p...)
		b = j.hbuf
	}
	var h cgiHead
	n, err := parseCGIHead(b, &h, cgiHeadMax)
	switch {
	case err == ErrNeedMore:
		if len(j.hbuf) == 0 {
			j.hbuf = append(j.hbuf, p...)
		}
		return
	case err != nil:
		// 502 once the output ends, which the kill hastens: the
		// connection stays in step with the script's output.
		j.failed = true
		j.kill()
		return
	}
	j.headDone = true
	if h.local() && h.status == 0 {
		j.location = bytes.Clone(h.location)
		j.noBody = true
	} else {
		c.cgiHead(j, &h)
		c.cgiBody(j, b[n:])
	}
	j.hbuf = nil
}

// PipeEOF tells the connection that Pipe reached its end or failed; it
// closes the pipe. The answer is then complete: the last chunk, a 502 for
// a script that wrote no valid header, or a local redirect. The connection
// may start the next pipelined request, and so Pipe may return a new fd.
func (c *Conn) PipeEOF() {
	cg := c.cgi
	if cg == nil {
		return
	}
	if cg.pipe >= 0 {
		c.l.sys().close(cg.pipe)
		cg.pipe = -1
	}
	j := cg.job
	if j == nil {
		c.cgi = nil // the answer was cut short; the connection closes
		return
	}
	c.detach()
	c.active = c.l.now
	if c.state == stateRunning {
		c.to(stateReading) // in body, the rest of the body is read on and dropped
	}
	switch {
	case j.failed || !j.headDone:
		c.respondError(&j.req, 502)
	case j.location != nil:
		c.localRedirect(j) // may start another script: cg is its cgiConn then
	default:
		if j.chunked {
			c.out = append(c.out, "0\r\n\r\n"...)
		}
		c.log(&j.req, j.status, j.sent)
	}
	if cg.job == nil && cg.pipe < 0 && c.fs == nil {
		// (A script the redirect started and cgiPeerEOF killed at once
		// leaves its pipe, which FreeConn closes; a redirect's lookup that
		// waits (fsop.go) keeps the count of redirects.)
		c.cgi = nil
	}
	c.resume()
}

// cgiTarget splits a resolved path under cgi-bin/ into the script's name
// and the path info after it (with the trailing slash, if the request had
// one). ok is false for any other path.
func cgiTarget(rel []byte, dir bool) (name, info []byte, ok bool) {
	const prefix = "cgi-bin"
	if !bytes.HasPrefix(rel, []byte(prefix)) || len(rel) > len(prefix) && rel[len(prefix)] != '/' {
		return nil, nil, false
	}
	name = rel[min(len(prefix)+1, len(rel)):]
	if i := bytes.IndexByte(name, '/'); i >= 0 {
		name, info = name[:i], name[i:]
	}
	if dir && len(name) > 0 {
		info = append(info[:len(info):len(info)], '/')
	}
	return name, info, true
}

// serveCGI answers a request for script name, with pathInfo after it;
// op is the lookup it waited for, if it did.
func (c *Conn) serveCGI(r *Request, head, name, pathInfo []byte, op *fsOp) {
	l := c.l
	cfg := &l.srv.Config
	switch r.Method {
	case MethodGet, MethodHead, MethodPost:
	default:
		c.respondErrorExtra(r, 405, "Allow: GET, HEAD, POST\r\n")
		c.dropBody(r)
		return
	}
	var path string
	var status int
	if op != nil {
		path, status, _ = l.cgiPath(name, op.status)
	} else {
		var wait *fsOp
		if path, status, wait = l.findCGI(name, c.state == stateBody); wait != nil {
			c.waitFS(wait, head)
			return
		}
	}
	if status == 0 && c.Pipe() >= 0 {
		status = 500 // cannot happen: no request starts while a pipe is open
	}
	if status != 0 {
		c.respondError(r, status)
		c.dropBody(r)
		return
	}
	if !l.srv.cgiAcquire() {
		// As nginx's limit_conn: 503 at once; the connection goes on.
		c.respondErrorExtra(r, 503, "Retry-After: 1\r\n")
		c.dropBody(r)
		return
	}
	rfd, wfd, err := l.stdoutPipe()
	if err != nil {
		l.srv.cgiRelease()
		c.respondError(r, openStatus(err))
		c.dropBody(r)
		return
	}
	j := &cgiJob{
		l: l, name: string(name), path: path, dir: l.srv.cgiDir,
		env:      c.cgiEnv(r, head, string(name), pathInfo),
		c:        c,
		head:     bytes.Clone(head),
		deadline: l.now.Add(cfg.CGITimeout),
	}
	// The request's slices alias input that is about to be reused: parse
	// the copy again. A local redirect's target is already a copy.
	ParseRequest(j.head, &j.req, &cfg.Limits)
	if c.cgi != nil && c.cgi.redirects > 0 {
		j.req.Method, j.req.MethodName = r.Method, r.MethodName
		j.req.Target, j.req.Path, j.req.Query = r.Target, r.Path, r.Query
		j.req.ContentLength, j.req.Chunked = -1, false
	}
	if c.cgi == nil {
		c.cgi = &cgiConn{}
	}
	c.cgi.job, c.cgi.pipe = j, rfd
	if c.state != stateBody {
		c.to(stateRunning) // in body, a body dropped after a redirecting script's answer is read first
	}
	if hasBody(r) {
		j.stdin, j.stdinOpen = make(chan []byte, 1), true
		c.startBody(r, j)
	}
	l.jobs[j] = struct{}{}
	j.start(wfd)
	c.cgiPeerEOF() // a pipelined request read before the peer's FIN
}

// cgiPeerEOF decides, once the client has sent its FIN while its script
// runs, whether the client is gone. nginx (proxy_ignore_client_abort off)
// takes any FIN for a client gone and aborts the upstream, but an HTTP/1.1
// client may shut down its write side after a whole request and still
// read the answer, and a FIN does not say which: only a write to a socket
// the client has closed draws a reset. So:
//
//   - The answer has begun (the script's header was sent): nothing here.
//     Its output is the next write; a reset ends the connection, which
//     kills the script (FreeConn), and a silent script is bounded by its
//     deadline.
//   - HTTP/1.1 and nothing of the answer sent: the probe is a 100
//     Continue (RFC 9110 §15.2: a client must parse 1xx responses it did
//     not expect), or responses already queued for earlier requests. A
//     half-closed client reads it, then the answer; a closed socket
//     answers it with a reset, on which the backend closes the connection
//     (epoll: EPOLLERR; io_uring: a poll for POLLERR, Interest.Reset) and
//     FreeConn kills the script's group: as soon as the loop sees the
//     close, not when the script next writes.
//   - HTTP/1.0 and nothing of the answer sent: no 1xx may go to a 1.0
//     client, so the FIN is taken for the client gone, as nginx does: the
//     script is killed, and the connection closes once what is queued is
//     out.
func (c *Conn) cgiPeerEOF() {
	j := c.script()
	if j == nil || !c.eof || c.state != stateRunning || j.probed || j.begun() {
		return
	}
	j.probed = true
	if j.req.Minor == 0 {
		j.kill()
		c.detach()
		c.endWith(endAfterResponse)
		c.to(stateReading)
		c.settle()
		return
	}
	if !c.busy() {
		c.out = append(c.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
	}
}

// begun reports whether the script's answer has begun: its header is
// in the response.
func (j *cgiJob) begun() bool { return j.headDone && !j.failed && j.location == nil }

// cgiAcquire counts a script about to be forked, unless Config.CGIMax
// run already: the count is the process's, shared by every loop, and
// goes back in cgiRelease once the script is reaped. So the processes are
// bounded, a script that closed its stdout and works on included; what it
// started is killed and reaped before it is (cgi_sweep_linux.go), so
// nothing it started, daemonized or not, outlives its place.
func (s *Server) cgiAcquire() bool {
	for {
		n := s.cgiRun.Load()
		if n >= int64(s.Config.CGIMax) {
			return false
		}
		if s.cgiRun.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *Server) cgiRelease() { s.cgiRun.Add(-1) }

// dropBody drops the body of a request answered without its script:
// the answer is queued, the body is read after it.
func (c *Conn) dropBody(r *Request) {
	if hasBody(r) {
		c.startBody(r, nil)
	}
}

// cgiHead writes the HTTP/1.1 head for a script's header: its status
// (Status, else 302 for a Location, else 200), its fields but the ones the
// server owns, and the framing: chunked for HTTP/1.1, so that the
// connection stays open; for HTTP/1.0, the end of the body is the close.
func (c *Conn) cgiHead(j *cgiJob, h *cgiHead) {
	r := &j.req
	status := h.status
	switch {
	case status != 0:
	case h.location != nil:
		status = 302 // RFC 3875 §6.2.3, client redirect
	default:
		status = 200
	}
	j.status = status
	c.l.Stats.Status[status/100]++
	c.out = c.l.srv.lines.appendLine(c.out, status, h.reason)
	c.out = append(c.out, c.l.date.line...)
	for _, f := range h.fields {
		c.out = append(append(append(append(c.out, f.name...), ": "...), f.value...), "\r\n"...)
	}
	if h.ctype != nil {
		c.out = append(append(append(c.out, "Content-Type: "...), h.ctype...), "\r\n"...)
	}
	if h.location != nil {
		c.out = append(append(append(c.out, "Location: "...), h.location...), "\r\n"...)
	}
	head := r.Method == MethodHead
	switch {
	case status == 204 || status == 304:
		j.noBody = true
	case r.Minor == 0:
		j.noBody = head
		if !head {
			c.endWith(endAfterResponse)
		}
	default:
		// A HEAD response has the fields a GET would (RFC 9110 §9.3.2).
		c.out = append(c.out, "Transfer-Encoding: chunked\r\n"...)
		j.noBody, j.chunked = head, !head
	}
	c.endHead(r)
}

// cgiBody appends script output to the response, as one chunk or as is.
func (c *Conn) cgiBody(j *cgiJob, p []byte) {
	if len(p) == 0 || j.noBody {
		return
	}
	j.sent += int64(len(p))
	if j.chunked {
		c.out = strconv.AppendInt(c.out, int64(len(p)), 16)
		c.out = append(append(append(c.out, "\r\n"...), p...), "\r\n"...)
		return
	}
	c.out = append(c.out, p...)
}

// localRedirect answers, once a script's output has ended, the request it
// redirected to (RFC 3875 §6.2.2): a GET (or HEAD) for that path, with the
// rest of the original request.
func (c *Conn) localRedirect(j *cgiJob) {
	if c.cgi.redirects++; c.cgi.redirects > maxRedirects {
		c.respondError(&j.req, 500)
		return
	}
	r := j.req
	redirectRequest(&r, j.location)
	// Should the answer wait for the file system, the held head is the
	// script's request's: the target goes with it.
	c.more().fsRedirect = j.location
	c.route(&r, j.head, nil)
	if c.fs == nil {
		c.rare.fsRedirect = nil
	}
}

// redirectRequest makes r the GET (or HEAD) for location that a local
// redirect answers (RFC 3875 §6.2.2).
func redirectRequest(r *Request, location []byte) {
	r.Target = location
	r.Path, r.Query = location, nil
	if q := bytes.IndexByte(location, '?'); q >= 0 {
		r.Path, r.Query = location[:q], location[q+1:]
	}
	if r.Method != MethodHead {
		r.Method, r.MethodName = MethodGet, []byte("GET")
	}
	r.ContentLength, r.Chunked, r.Expect100 = -1, false, false
}

// detach ends the job's part in the connection: its stdin is closed (the
// rest of the body is dropped) and its output is no longer answered. The
// script itself runs on until it exits, is killed, or its deadline passes.
func (c *Conn) detach() {
	j := c.script()
	if j == nil {
		return
	}
	j.c, c.cgi.job = nil, nil
	if b := c.bodyReading(); b != nil && b.sink == j {
		// The rest of the body is dropped: nothing waits for a sink now,
		// and --body-timeout applies to the client again.
		b.sink, b.waiting = nil, false
	}
	j.closeStdin()
}

// cgiTimedOut kills a script past its deadline: 504 if nothing of the
// answer has been sent (502 if its header was bad), else the connection is
// dropped, since a chunked body cut short is all the client can be told.
func (c *Conn) cgiTimedOut() Action {
	j := c.script()
	j.kill()
	c.detach()
	c.bodyDone()
	c.endWith(endLinger)
	if j.begun() {
		c.cutShort()
		return ActClose
	}
	status := 504
	if j.failed {
		status = 502
	}
	c.to(stateReading)
	c.respondError(&j.req, status)
	c.settle()
	return ActWrite
}

// cgiBodyFailed ends the script whose request body failed (bodyFailed):
// it is killed, and the error answers the request, unless the script's
// answer had begun: then the connection is dropped.
func (c *Conn) cgiBodyFailed(status int) {
	j := c.script()
	j.kill()
	c.detach()
	if j.begun() {
		c.cutShort()
		return
	}
	c.respondError(&j.req, status)
}

// room is the job's side of bodySink: the buffer for the next chunk to
// hand to the stdin writer, full while the writer holds the other one.
func (j *cgiJob) room() ([]byte, bool) {
	if !j.stdinOpen {
		return nil, false // the script's answer ended: the rest is dropped
	}
	if len(j.fill) == cgiChunk {
		j.flush()
	}
	if j.fill == nil {
		j.fill = make([]byte, 0, cgiChunk)
	}
	return j.fill, true
}

// take is bodySink's: the filled buffer goes to the writer when it is free.
func (j *cgiJob) take(b []byte, end bool) {
	j.fill, j.bodyDone = b, end
	j.flush()
}

// flush hands the filled buffer to the stdin writer if it is free, and
// closes stdin after the last chunk.
func (j *cgiJob) flush() {
	if !j.stdinOpen || j.stdinBusy {
		return
	}
	if len(j.fill) > 0 {
		select {
		case j.stdin <- j.fill:
			// Never blocks: the writer acknowledged the last chunk, so it
			// has taken it from the channel.
			j.stdinBusy = true
			j.fill, j.spare = j.spare, nil
		default:
			return
		}
	}
	if j.bodyDone && len(j.fill) == 0 {
		j.closeStdin()
	}
}

// stdinAck runs on the loop's thread when the writer is done with b.
func (j *cgiJob) stdinAck(b []byte) {
	j.stdinBusy = false
	j.spare = b[:0]
	j.flush()
	if c := j.c; c != nil {
		if b := c.bodyReading(); b != nil {
			b.last = j.l.now // the client waited for the script, not the script for it
		}
		c.resume()
		j.l.markReady(c)
	}
}

func (j *cgiJob) closeStdin() {
	if j.stdinOpen {
		close(j.stdin)
		j.stdinOpen = false
		j.fill, j.spare = nil, nil
	}
}
