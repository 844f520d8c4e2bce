package core

import (
	"bytes"
	"net/netip"
	"strconv"
	"time"
)

// Action is what a backend does next with a connection.
type Action uint8

const (
	ActNone   Action = iota // CheckTimeout: nothing is due
	ActRead                 // nothing to send: wait for input
	ActWrite                // Out has bytes to send
	ActClose                // close the socket now
	ActLinger               // shut down the write side, then keep reading (Feed discards) until EOF or timeout
)

// Out is what a connection has to send: Mem first, then Body, then N bytes
// of File from offset Off. Body is a cached file's memory body, sent from
// the cache entry itself rather than copied (a referenced body: see seg);
// when it is set, Vec lists every memory piece to send before the file, in
// order: Mem (when not empty), Body, then the headers and bodies of the
// pipelined responses behind it, so that a backend can gather them all in
// one writev or sendmsg. Mem, Body and Vec stay valid and unchanged until
// Sent accounts for them, so a completion-based backend may hand them to
// the kernel; Body's memory is mapped outside the Go heap. Once Sent has
// accounted for all of an Out with a File, the next Out may again have Mem
// and a File: the next part of a multipart/byteranges body.
type Out struct {
	Mem    []byte
	Body   []byte
	Vec    [][]byte // nil unless Body is set; then Mem, Body and what follows them
	Mapped bool     // Mem, and every piece of Vec but the bodies, is mapped outside the Go heap too (outSlab)
	File   *File
	Off    int64
	N      int64
}

// Len is the number of bytes still to send.
func (o Out) Len() int64 {
	if o.Vec == nil {
		return int64(len(o.Mem)+len(o.Body)) + o.N
	}
	n := o.N
	for _, v := range o.Vec {
		n += int64(len(v))
	}
	return n
}

// seg is a referenced body: after out[:at] comes body, a cached File's
// memory body (or a range of it), which f holds until Sent has accounted
// for the last of its bytes or the Conn is reset. A 64 KiB file fetched by
// 10,000 clients is then held once, not once per connection in its out
// (issue 20: the copies were most of the server's memory, and the kernel
// zeroing their fresh pages a large share of io_uring's CPU at
// Connection: close; results/2026-12-01_memsend).
type seg struct {
	at   int
	body []byte
	f    *File
}

// copyBodyMax is the largest memory body copied into out with its header:
// copying 1.5 KB costs less than a second iovec, and the hit path of a
// small page stays one contiguous buffer. Larger bodies are referenced.
const copyBodyMax = 4 << 10

// maxSegs bounds the referenced bodies one batch of pipelined responses
// holds, and so the iovecs of one writev: at most 2*maxSegs+1.
const maxSegs = 16

// Conn is the protocol state of one connection: bytes in, responses out.
// It makes no syscall on a cache hit and never touches the socket. A Conn
// belongs to one loop and is used only from that loop's thread.
//
// A Conn is always in one state (connState, below), and Next is a switch
// on it. How it is to end is one more value, its end intent (endIntent):
// keep-alive, close after the response, close after a linger, or abort.
// The intent only rises as requests are read and answered (a Connection:
// close, an error page, input that will not be read, an answer cut short).
// Once a close is asked no further request is read, and in closing the
// intent decides between ActLinger and ActClose. The moves between states
// are checked against a table (transitions). The static path, all in this
// file:
//
//	reading ──Feed: complete request──▶ writing ──Sent: all out──▶ reading
//	   │                                   │  (pipelined requests waiting: answered; writing again)
//	   │                                   └──Sent: all out; close asked, or EOF──▶ closing
//	   ├──CheckTimeout: head too slow (408, close asked)──▶ writing
//	   └──EOF──▶ closing ──ActLinger, Linger──▶ lingering ──EOF, LingerTimeout──▶ closed
//	                 └──────────ActClose──────────────────────────────────────────▶ closed
//
// An error page (a malformed head, 408, 413, ...) is a response like any
// other, with the close asked: writing, then closing, lingering.
//
// A request with a body reads it first (body.go), wherever the body goes:
//
//	reading ──Feed: head with a body──▶ body ──the rest of it──▶ reading, writing (a held request's answer)
//	                                     ├──bad framing, over the limit, too slow──▶ writing (400, 413, 408), then closing
//	                                     └──EOF before its end──▶ closing
//
// A request for a CGI script (cgi.go) adds one state. The script starts at
// once; its body, if any, is read first, in body, and fed to its stdin:
//
//	reading ──Feed: CGI request──▶ [body ──▶] running ──PipeEOF──▶ reading, writing (the last chunk, 502, a local redirect's answer)
//	body, running ──deadline, a bad body──▶ writing (504, 502, 413, ...), or closing when the answer had begun
//	running ──EOF before the answer began──▶ HTTP/1.1: running, a 100 Continue queued as a probe (cgiPeerEOF);
//	                                         HTTP/1.0: the script killed, closing
//
// On a server that expects a PROXY protocol header (proxy.go) a
// connection starts in one more state, and leaves it for good:
//
//	proxy ──Feed: the header is whole──▶ reading (what came after it is parsed at once)
//	  └──untrusted peer, bad header, EOF, HeaderTimeout──▶ closing (unserved)
//
// A request whose answer waits for the file system (a cache miss, a
// script's lookup: fsop.go) adds one more; its head is held, and the
// requests behind it wait in c.in:
//
//	reading, writing ──route: the lookup must wait──▶ file ──the operation lands──▶ reading, writing (its answer)
//	                                                   └──Config.FSTimeout──▶ writing (503)
//
// In body, running and file, the answer may have bytes queued too (100
// Continue, a script's output, an answer queued before its body, which is
// then dropped): Next says ActWrite while it has. Closing leads only to
// lingering or the close, lingering only to the close.
type Conn struct {
	l      *Loop
	Remote netip.AddrPort // the peer, when Server.WantsAddrs (else zero)
	Local  netip.AddrPort // the server's end, when Server.WantsAddrs: CGI's SERVER_NAME and SERVER_PORT
	// Handle is the backend's own index of the connection (epoll: its fd;
	// io_uring: its slot), set after NewConn, so that the Conns RunPosted
	// returns can be found. The core never reads it.
	Handle int

	in   []byte // unparsed input: an incomplete head, or requests waiting behind a response
	out  []byte // response bytes; out[sent:] not yet sent
	sent int

	segs    []seg // referenced bodies between the bytes of out; segs[seg:] not yet all sent
	seg     int
	segSent int      // bytes of segs[seg].body sent
	vec     [][]byte // Out.Vec's room, reused
	bufs    int      // cap(in)+cap(out) as last added to Stats.BufBytes (account)

	file    *File // body being sent from a file after out, holding a reference
	fileOff int64
	fileEnd int64

	cgi *cgiConn // the CGI half (cgi.go); nil but for a request to a script

	fs *fsOp // in file: the operation the held request waits for (fsop.go)

	// rare is what only some requests need (connRare); nil until one
	// does (more).
	rare *connRare

	state       connState // where the connection is; Next is a switch on it
	readyQueued bool      // in Loop.ready (mailbox.go)
	end         endIntent // how it is to end; only rises (endWith)
	eof         bool      // the peer closed its write side
	slab        int32     // the loop's outSlab slot lent to c, plus one; 0: none (outslab.go)

	active    time.Time // last progress: accept, response finished, bytes sent
	headStart time.Time // first byte of the request head being received
	nreq      int
}

// connRare is the part of a Conn that only some requests use: a request
// body being read, a multipart/byteranges answer, a wait for the file
// system. A Conn makes it on first use (more) and keeps it, as it keeps
// its buffers, for its next requests and connections. In the Conn itself
// it made every Conn 576 bytes instead of 320, for fields a cached GET
// never touches: at 10,000 keep-alive connections, 2.5 MB of the heap
// (results/2026-12-02_b966187_c10k-rss).
type connRare struct {
	held       []byte     // the head of a request that waits, for its body (body.go) or the file system (fsop.go); empty: none
	body       bodyReader // the request body being read, in body (body.go)
	mp         multipart  // a multipart/byteranges body under way from file, and the ranges of the last Range request (multipart.go)
	fsIdx      int        // in file: c's index in fs.waiters (fsop.go)
	fsSince    time.Time  // in file: when the wait began, for Config.FSTimeout
	fsRedirect []byte     // in file: a script's local redirect target, which the held head does not say
	bodyWait   time.Time  // the backend reads the file body's next part for c since then (BodyWait); zero: it does not
}

// more returns c's connRare, made on first use.
func (c *Conn) more() *connRare {
	if c.rare == nil {
		c.rare = new(connRare)
	}
	return c.rare
}

// heldHead is the head of the request that waits; empty: none.
func (c *Conn) heldHead() []byte {
	if c.rare == nil {
		return nil
	}
	return c.rare.held
}

// hold keeps head as the head of the request that waits.
func (c *Conn) hold(head []byte) {
	rare := c.more()
	rare.held = append(rare.held[:0], head...)
}

// unhold returns the held head and forgets it; its bytes stay valid
// until the next hold.
func (c *Conn) unhold() []byte {
	head := c.heldHead()
	if len(head) > 0 {
		c.rare.held = head[:0]
	}
	return head
}

// bodyDone forgets the request body being read, if any.
func (c *Conn) bodyDone() {
	if c.rare != nil {
		c.rare.body = bodyReader{}
	}
}

// connState is where a connection is in the life of its requests (see
// Conn); Next is a switch on it. The states, and what moves a Conn out of
// each:
type connState uint8

const (
	// stateReading: waiting for a request head, nothing to send. To
	// writing when a request is answered (Feed, or Sent answering one that
	// waited); to body or running when a request has a body or is for a
	// script; to closing on EOF.
	stateReading connState = iota
	// stateBody: reading a request body (body.go): a static request's,
	// whose answer waits for it; a script's, for its stdin; or one dropped
	// after its answer. To reading or writing at its end (running, for a
	// script's); to writing with an error page, or closing, when it fails.
	stateBody
	// stateRunning: a script answers the request, whose body is read
	// (cgi.go). To reading or writing at the end of its output (PipeEOF);
	// to writing (504) or closing at its deadline.
	stateRunning
	// stateFile: the request's answer waits for a file-system operation
	// (fsop.go); its head is in held. To reading or writing when the
	// operation lands, or at Config.FSTimeout (503).
	stateFile
	// stateWriting: responses are queued; input behind them waits. To
	// reading, or closing when the close was asked or the peer sent EOF,
	// once Sent has accounted for them all and no request waiting behind
	// them is answered.
	stateWriting
	// stateLingering: the write side is shut (Linger); input is dropped.
	// The connection closes at EOF or after LingerTimeout.
	stateLingering
	// stateClosing: nothing more to do. Next says ActLinger when the close
	// is orderly and input may be waiting (endLinger, or endAfterResponse
	// with input left unanswered) and the peer has not sent EOF (then the
	// backend calls Linger: lingering), else ActClose.
	stateClosing
	// stateProxy: a new connection on a server that expects a PROXY
	// protocol header (Config.ProxyProtocol), waiting for it (proxy.go);
	// its initial state there. To reading once the header is whole; to
	// closing when it is refused, or at EOF.
	stateProxy
	numConnStates
)

// transitions lists, for each state, the states to may move a connection
// to: the moves drawn on Conn and described on each state above, and the
// stays in reading and writing that settle makes. An answer queued as a
// body, a script or a wait ends goes through reading (to reading, then
// settle: writing), so body, running and file lead to writing only that
// way. Any other move is a bug in the core (to reports it). A Conn is
// reset to reading (Loop.FreeConn) without a move.
var transitions = [numConnStates][]connState{
	stateReading: {stateReading, stateBody, stateRunning, stateFile, stateWriting, stateClosing},
	stateWriting: {stateReading, stateBody, stateRunning, stateFile, stateWriting, stateClosing},
	stateBody:    {stateReading, stateRunning, stateClosing},
	stateRunning: {stateReading, stateBody, stateClosing},
	stateFile:    {stateReading},
	stateClosing: {stateLingering},
	stateProxy:   {stateReading, stateClosing},
	// stateLingering: none; the backend closes the connection.
}

// legal is transitions as one bit per target state, for to.
var legal = func() (m [numConnStates]uint8) {
	for from, tos := range transitions {
		for _, to := range tos {
			m[from] |= 1 << to
		}
	}
	return m
}()

var connStateNames = [numConnStates]string{
	stateReading: "reading", stateBody: "body", stateRunning: "running", stateFile: "file",
	stateWriting: "writing", stateLingering: "lingering", stateClosing: "closing", stateProxy: "proxy",
}

func (s connState) String() string { return connStateNames[s] }

// endIntent is how a connection is to end, decided while its requests
// are read and answered. The state (connState) says where the connection
// is; the intent says what its closing does, and what reading and writing
// do meanwhile. It only rises, in this order, through endWith: once a
// close is asked no request takes it back, and an abort is final.
type endIntent uint8

const (
	// endKeepAlive: no close asked; the connection waits for the next
	// request once its responses are out. It reaches closing only on
	// the peer's EOF, and then closes: nothing more can come.
	endKeepAlive endIntent = iota
	// endAfterResponse: close once the responses queued are out
	// (Connection: close, HTTP/1.0, NoKeepAlive, shutdown, HTTP/1.0's
	// FIN under a script); no further request is read or answered.
	// Input read and left unanswered (c.in) makes the close linger.
	endAfterResponse
	// endLinger: endAfterResponse, and input may be waiting that will not
	// be read: after an error page, since what follows cannot be trusted
	// to be a request, or because input came after the close was decided
	// (Feed dropped it, or the backend says so: Unread). close() with input
	// waiting would send a RST, which destroys the response's unsent tail,
	// so the close shuts down the write side and drains first (ActLinger).
	endLinger
	// endAbort: close at once, dropping what is queued and without a
	// linger: an answer was cut short, and only the close can tell the
	// client (cutShort). Set only with the move to closing.
	endAbort
)

// endWith raises the connection's end intent to e; a lower e changes
// nothing, so that a later, milder decision (a Connection: close after an
// error page, a linger after an abort) cannot undo an earlier one.
func (c *Conn) endWith(e endIntent) { c.end = max(c.end, e) }

// closeAsked reports whether an orderly close is asked: the connection
// closes once its responses are out, and reads no further request.
func (c *Conn) closeAsked() bool { return c.end == endAfterResponse || c.end == endLinger }

// inputDropped records input that will not be read: an orderly close then
// lingers. Without a close asked the connection is in closing only after
// the peer's EOF, when nothing more can come; after an abort nothing
// lingers.
func (c *Conn) inputDropped() {
	if c.end == endAfterResponse {
		c.endWith(endLinger)
	}
}

// Feed hands the connection bytes received from the peer. p is only read
// during the call: whatever must outlive it is copied.
func (c *Conn) Feed(p []byte) {
	c.l.Stats.BytesIn += uint64(len(p))
	switch {
	case c.state == stateLingering:
		return
	case c.state == stateProxy:
		c.feedProxy(p)
		return
	case c.state == stateClosing, c.closeAsked() && c.state != stateBody && c.state != stateFile:
		// In file the input is kept: a script's body may follow the
		// head that waits.
		c.inputDropped()
		return
	}
	if len(c.in) > 0 || c.busy() {
		if len(c.in) == 0 && c.state != stateBody {
			c.headStart = c.l.now
		}
		c.in = append(c.in, p...)
		// The parser rescans the head from its start, so a client that
		// sends it a byte at a time would cost O(n²). Nothing can complete
		// or fail without a new line end, short of the request-line limit.
		if !c.busy() && (c.state == stateBody || bytes.IndexByte(p, '\n') >= 0 || len(c.in) >= c.l.srv.Config.Limits.MaxRequestLine) {
			c.parse(c.in, true)
		}
		return
	}
	c.parse(p, false)
}

// EOF records that the peer will send nothing more. Responses already
// queued are still sent, a running script's too; then Next says close.
func (c *Conn) EOF() {
	c.eof = true
	if c.state == stateProxy {
		c.proxyEOF()
		return
	}
	c.checkTruncated()
	c.cgiPeerEOF()
	c.settle()
}

// Out returns what is to be sent next.
func (c *Conn) Out() Out {
	var o Out
	if c.seg < len(c.segs) {
		o = c.outVec()
	} else {
		o.Mem = c.out[c.sent:]
	}
	o.Mapped = c.outMapped()
	if c.file != nil {
		o.File, o.Off, o.N = c.file, c.fileOff, c.fileEnd-c.fileOff
	}
	return o
}

// outVec is Out's memory part when a referenced body is queued.
func (c *Conn) outVec() Out {
	s := &c.segs[c.seg]
	o := Out{Mem: c.out[c.sent:s.at], Body: s.body[c.segSent:]}
	if c.vec == nil {
		c.vec = c.l.takeVec()
	}
	v := c.vec[:0]
	if len(o.Mem) > 0 {
		v = append(v, o.Mem)
	}
	v = append(v, o.Body)
	at := s.at
	for _, s := range c.segs[c.seg+1:] {
		if s.at > at {
			v = append(v, c.out[at:s.at])
		}
		v = append(v, s.body)
		at = s.at
	}
	if at < len(c.out) {
		v = append(v, c.out[at:])
	}
	c.vec, o.Vec = v, v
	return o
}

// OutRefs says which entries of Out().Vec are referenced bodies: bit i is
// set when Vec[i] is one (Vec has at most 2*maxSegs+1 entries); the others
// are the Conn's own bytes, which it rewrites once Sent has accounted for
// them. It appends the File of each body, in order, to files. A backend
// whose kernel reads the bodies after Sent (a zero-copy send, which reads
// them until its notification) holds each File (HoldFile) until then, and
// copies the other entries.
func (c *Conn) OutRefs(files []*File) (bodies uint64, _ []*File) {
	if c.seg >= len(c.segs) {
		return 0, files
	}
	i := 0
	if c.sent < c.segs[c.seg].at {
		i++ // Mem
	}
	at := -1
	for _, s := range c.segs[c.seg:] {
		if at >= 0 && s.at > at {
			i++ // the bytes of out between two bodies
		}
		bodies |= 1 << i
		files = append(files, s.f)
		i++
		at = s.at
	}
	return bodies, files
}

// Sent accounts for n bytes of Out having left. When everything has, the
// connection answers the requests that were waiting behind the response.
func (c *Conn) Sent(n int64) {
	c.l.Stats.BytesOut += uint64(n)
	c.active = c.l.now
	if c.seg < len(c.segs) && !c.sentSegs(&n) {
		return
	}
	if m := int64(len(c.out) - c.sent); n < m {
		c.sent += int(n)
		if c.sent >= compactAt {
			// A script's output streams through out and may never
			// drain whole: drop what was sent, so that out stays
			// within OutBufMax plus one read. Sent is the one point
			// where the backend holds nothing of Mem.
			c.out, c.sent = c.out[:copy(c.out, c.out[c.sent:])], 0
		}
		return
	} else {
		n -= m
	}
	c.out, c.sent = c.out[:0], 0
	if c.file != nil {
		c.fileOff += n
		if c.fileOff < c.fileEnd || c.nextPart() {
			return
		}
		c.l.cache.release(c.file)
		c.file = nil
	}
	if len(c.in) > 0 {
		c.parseWaiting()
	}
	if c.l.draining && (c.state == stateReading || c.state == stateWriting) && !c.busy() && len(c.in) == 0 {
		// Shutting down: the connection closes now that its response is
		// out, through Next, which lingers if input came meanwhile.
		c.endWith(endAfterResponse)
	}
	c.settle()
	if !c.busy() {
		c.putAway() // the backend holds nothing of Out now (outslab.go)
	}
}

// sentSegs accounts for *n bytes of the referenced bodies and the bytes
// of out before them, releasing each body whose last byte went; it leaves
// in *n what goes to the bytes after them and reports whether all of them
// went.
func (c *Conn) sentSegs(n *int64) bool {
	for c.seg < len(c.segs) {
		s := &c.segs[c.seg]
		m := int64(s.at - c.sent)
		if *n < m {
			c.sent += int(*n)
			return false
		}
		*n -= m
		c.sent = s.at
		b := int64(len(s.body) - c.segSent)
		if *n < b {
			c.segSent += int(*n)
			return false
		}
		*n -= b
		c.releaseSeg(s)
		c.seg++
		c.segSent = 0
		// The body may be unmapped now: the Go heap keeps no pointer
		// into it (Out rebuilds vec).
		clear(c.vec)
	}
	c.segs, c.seg = c.segs[:0], 0
	return true
}

// releaseSeg gives s's reference back to the cache, takes it off the
// BodyRefs gauges and clears it: its body may be unmapped now.
func (c *Conn) releaseSeg(s *seg) {
	c.l.cache.release(s.f)
	c.l.Stats.BodyRefs--
	c.l.Stats.BodyRefBytes -= int64(len(s.body))
	*s = seg{}
}

// outStart is the capacity of the out a response's header is built in
// (outSlab): a static file's header fits. Grown by append from the status
// line up, out left 144 bytes behind it on the way to a static file's 240
// (results/2026-12-02_b966187_c10k-rss).
const outStart = 256

// compactAt is how many sent bytes Sent lets pile up at the front of out.
const compactAt = 64 << 10

// Next says what the backend should do now.
func (c *Conn) Next() Action {
	c.account()
	switch c.state {
	case stateWriting:
		return ActWrite
	case stateBody, stateRunning, stateFile:
		if c.busy() {
			return ActWrite
		}
		return ActRead // the body, the script's output or the file is on its way: the answer comes later
	case stateLingering:
		if c.eof {
			return ActClose
		}
		return ActRead
	case stateClosing:
		if !c.eof && (c.end == endLinger || c.end == endAfterResponse && len(c.in) > 0) {
			// Input the server does not read would make close() send a
			// RST, and a RST destroys what the socket has not sent yet:
			// the response's tail. Shut down the write side and drain
			// instead.
			return ActLinger
		}
		return ActClose
	}
	return ActRead // reading
}

// account brings Stats.BufBytes up to date with c's buffers. Next calls
// it: every backend asks Next after each event it hands the Conn, so the
// figure follows each connection's buffers without walking them.
func (c *Conn) account() {
	if n := cap(c.in) + cap(c.out); n != c.bufs {
		c.l.Stats.BufBytes += int64(n - c.bufs)
		c.bufs = n
	}
}

// Linger is called by the backend once it has shut down the write side
// after ActLinger: from then on input is read and dropped until EOF.
func (c *Conn) Linger() {
	c.to(stateLingering)
	c.active = c.l.now
	c.in = c.in[:0]
}

// WantRead reports whether the backend should read input now: Interest's
// Read. It is false while enough input waits behind an unsent response:
// the peer is then slowed down by TCP instead of by our memory. Once the
// connection is to close it stays true: Feed drops the input, and none is
// left unread in the socket, where it would turn the close into a RST.
func (c *Conn) WantRead() bool {
	return c.state == stateLingering || !c.eof && (c.closeAsked() && c.state != stateBody && c.state != stateFile || len(c.in) < c.l.srv.Config.InBufMax)
}

// Unread tells the connection that input may be waiting in the socket
// that the backend has not read (epoll: an edge came and no read has
// emptied the socket since). A close it asked for then lingers: Next says
// ActLinger instead of ActClose.
func (c *Conn) Unread() { c.inputDropped() }

// Waited tells the connection that the backend has just waited, on its
// behalf, for something other than the peer (epoll: a read-ahead of its
// file's next range; io_uring: the READ or splice of a chunk): its write
// timeout, which measures the peer's progress, counts from now. It ends a
// BodyWait.
func (c *Conn) Waited() {
	c.active = c.l.now
	if c.rare != nil {
		c.rare.bodyWait = time.Time{}
	}
}

// BodyWait tells the connection that the backend now reads the next part
// of its file body off the loop, and sends nothing until Waited. The wait
// is the file system's, not the peer's: CheckTimeout holds it to
// Config.FSTimeout, not to the write timeout, so that a mount that hangs
// (a paused FUSE daemon, a dead NFS server) ends the response at
// --fs-timeout, closed, since its header is out, and a client that was
// reading is not blamed for it.
func (c *Conn) BodyWait() {
	if rare := c.more(); rare.bodyWait.IsZero() {
		rare.bodyWait = c.l.now
	}
}

// Idle reports whether the connection is between requests with nothing to
// send, so that closing it loses nothing (used at shutdown). A lingering
// one is not: its response may still be in the socket, which a close with
// input waiting would throw away. Nor is a connection that has not sent a
// request yet: its first request may be in the socket already, unread
// (io_uring reads it a pass after the accept), and closing would reset it;
// CheckTimeout closes it during a shutdown once it has sent nothing for
// drainNewConnGrace.
func (c *Conn) Idle() bool {
	return c.nreq > 0 && len(c.in) == 0 && (c.state == stateReading || c.state == stateClosing && !c.busy())
}

// drainNewConnGrace is how long a connection that has sent nothing yet
// may stay open once the server is shutting down. net/http's Shutdown
// gives such connections 5 s; a second keeps the shutdown short and is
// ample for a request already on its way.
const drainNewConnGrace = time.Second

// drainIdle is how long a keep-alive connection may stay idle once the
// drain before a shutdown started (Server.Retire). A client that uses
// its connection within it is told Connection: close with its next
// response instead, which races nothing; one that leaves it idle longer
// is seldom about to send on it, and if it is, it retries on a new
// connection, which the listeners still accept.
const drainIdle = time.Second

// CheckTimeout applies the timeouts at the loop's current time. ActWrite
// means a 408 was queued; ActClose, that the connection is to be dropped.
func (c *Conn) CheckTimeout() Action {
	cfg := &c.l.srv.Config
	now := c.l.now
	if j := c.script(); j != nil && !now.Before(j.deadline) {
		c.l.Stats.Timeouts++
		return c.cgiTimedOut()
	}
	if c.state == stateFile && now.Sub(c.rare.fsSince) > cfg.FSTimeout { // waitFS made rare
		return c.fsTimedOut()
	}
	if c.rare != nil && !c.rare.bodyWait.IsZero() {
		// A body's part being read (BodyWait): the header is out, so
		// only closing tells the client.
		if now.Sub(c.rare.bodyWait) > cfg.FSTimeout {
			c.l.Stats.Timeouts++
			return ActClose
		}
		return ActNone
	}
	var late bool
	switch {
	case c.state == stateLingering:
		late = now.Sub(c.active) > cfg.LingerTimeout
	case c.busy():
		late = now.Sub(c.active) > cfg.WriteTimeout
	case c.state == stateProxy:
		// The header is held to the head's timeout from the accept, or
		// to drainNewConnGrace once the server is shutting down.
		limit := cfg.HeaderTimeout
		if c.l.draining {
			limit = drainNewConnGrace
		}
		if late = now.Sub(c.active) > limit; late {
			c.l.Stats.Proxy[ProxyTimeout]++
		}
	case c.state == stateBody && !c.rare.body.waiting: // startBody made rare
		// A body is held to its own timeout, measured from its last
		// progress; the head timeout does not apply.
		if now.Sub(c.rare.body.last) > cfg.BodyTimeout {
			return c.bodyTimedOut()
		}
		return ActNone
	case c.state != stateReading:
		return ActNone // running (the script's deadline), a body waiting for its sink, file (FSTimeout), closing
	case len(c.in) > 0:
		if now.Sub(c.headStart) > cfg.HeaderTimeout {
			c.l.Stats.Timeouts++
			c.in = c.in[:0]
			c.respondError(nil, 408)
			c.settle()
			return ActWrite
		}
		return ActNone
	case c.nreq == 0 && c.l.draining:
		late = now.Sub(c.active) > drainNewConnGrace
	case c.nreq == 0:
		// nginx applies client_header_timeout before the first request.
		late = now.Sub(c.active) > cfg.HeaderTimeout
	default:
		limit := cfg.KeepAlive
		if c.l.srv.retiring.Load() {
			limit = min(limit, drainIdle) // Server.Retire
		}
		late = now.Sub(c.active) > limit
	}
	if late {
		c.l.Stats.Timeouts++
		return ActClose
	}
	return ActNone
}

func (c *Conn) busy() bool { return c.sent < len(c.out) || c.file != nil || c.seg < len(c.segs) }

// to moves the connection to state s: the one place a state changes, so
// that the transitions listed on Conn (and connState) can be followed
// from here, and checked against them (transitions). An illegal move is a
// bug in the core, not a condition a client can cause; it is counted
// (Stats.BadTransitions, which the backends' tests require to stay zero)
// and reported to badTransition, and made all the same: the caller goes
// on as if it was legal, and refusing it would leave the Conn in a state
// that disagrees with what the caller did next. A panic here would take
// down every connection of the process for one connection's bug, so only
// the core's own tests make badTransition panic, where the move is made.
func (c *Conn) to(s connState) {
	if legal[c.state]&(1<<s) == 0 {
		c.l.Stats.BadTransitions++
		if badTransition != nil {
			badTransition(c.state, s)
		}
	}
	c.state = s
}

// badTransition, when set, is called on every illegal move (to).
var badTransition func(from, to connState)

// settle moves a connection in reading or writing to where what it has
// puts it: writing while bytes are queued; once they are out, closing if
// it is to close or the peer has, else reading. Every call that queues
// bytes or ends a body or a script ends with it.
func (c *Conn) settle() {
	if c.state != stateReading && c.state != stateWriting {
		return
	}
	switch {
	case c.busy():
		c.to(stateWriting)
	case c.closeAsked() || c.eof:
		c.to(stateClosing)
	default:
		c.to(stateReading)
	}
}

// cutShort closes the connection at once, without lingering and without
// sending what is queued: an answer was cut short, and only the close can
// tell the client.
func (c *Conn) cutShort() {
	c.to(stateClosing)
	c.endWith(endAbort)
}

// parseWaiting answers the input waiting in c.in once nothing is queued:
// the rest of a body, or pipelined requests unless the connection is to
// close.
func (c *Conn) parseWaiting() {
	if c.busy() || len(c.in) == 0 {
		return
	}
	if c.state == stateBody || !c.closeAsked() && c.state != stateClosing {
		c.parse(c.in, true)
	}
}

// parse answers every complete request in buf, stopping early when a file
// body must go out first or enough output is batched. What is left is kept
// in c.in; fromIn says buf already is c.in.
func (c *Conn) parse(buf []byte, fromIn bool) {
	cfg := &c.l.srv.Config
	whole := len(buf)
	for len(buf) > 0 {
		if c.state == stateBody {
			n := c.readBody(buf)
			if buf = buf[n:]; n == 0 || c.state == stateClosing {
				break // the sink is full, or the body failed
			}
			continue
		}
		if c.state != stateReading && c.state != stateWriting || c.closeAsked() || c.file != nil || len(c.out)-c.sent >= cfg.OutBufMax || len(c.segs) >= maxSegs {
			break
		}
		n, err := ParseRequest(buf, &c.l.req, &cfg.Limits) // resets it
		if err == ErrNeedMore {
			break
		}
		if err != nil {
			status := 400
			if pe, ok := err.(*ProtocolError); ok {
				status = pe.Status
			}
			c.respondError(nil, status)
			buf = nil
			break
		}
		c.serve(&c.l.req, buf[:n])
		buf = buf[n:]
	}
	if len(buf) > 0 && (len(buf) < whole || !fromIn) {
		c.headStart = c.l.now // the next head (or the rest of the input) starts waiting now
	}
	if c.state == stateClosing {
		buf = nil
	}
	if fromIn {
		c.in = c.in[:copy(c.in, buf)]
	} else {
		c.in = append(c.in[:0], buf...)
	}
	c.checkTruncated()
	c.settle()
}

// serve answers one request, whose head is head: it appends the response
// to c.out and, for a body sent from its file, sets c.file; for a CGI
// script, it starts the script.
func (c *Conn) serve(r *Request, head []byte) {
	l := c.l
	cfg := &l.srv.Config
	l.Stats.Requests++
	c.nreq++
	if r.Close || cfg.NoKeepAlive || l.draining || l.srv.retiring.Load() {
		c.endWith(endAfterResponse)
	}
	if r.Method == MethodConnect {
		// Not implemented, as any method but GET, HEAD and OPTIONS; and
		// what follows may be a tunnel's first bytes, not a request.
		c.endWith(endLinger)
		c.respondError(r, 405)
		return
	}
	if !r.Chunked && r.ContentLength > c.maxBody() {
		c.respondError(r, 413) // refused before it is read, and closed
		return
	}
	c.route(r, head, nil)
}

// route answers r by its path: a CGI script, a file or a directory. A
// local redirect from a script comes here too, and a request that waited
// for the file system, with the operation (op) whose result it takes.
func (c *Conn) route(r *Request, head []byte, op *fsOp) {
	l := c.l
	// Resolved once; a refusal is answered below, after the method checks.
	rel, dir, status := resolvePath(l.pathBuf, r.Path)
	if l.srv.cgiRoot >= 0 && status == 0 {
		if name, info, ok := cgiTarget(rel, dir); ok {
			c.serveCGI(r, head, name, info, op)
			return
		}
	}
	// A body on a static path is read and dropped, as nginx discards it,
	// within the same limit as a script's; the answer comes after it.
	if hasBody(r) {
		c.holdForBody(r, head)
		return
	}
	switch r.Method {
	case MethodGet, MethodHead:
	case MethodOptions:
		c.respondEmpty(r, 204, "Allow: GET, HEAD, OPTIONS\r\n")
		return
	default:
		c.respondError(r, 405)
		return
	}
	if status != 0 { // 400 for "*" too: it is for OPTIONS only
		c.respondError(r, status)
		return
	}
	key := rel
	if dir && len(rel) > 0 {
		l.keyBuf = append(append(l.keyBuf[:0], rel...), '/')
		key = l.keyBuf
	}
	var f *File
	var wait *fsOp
	status = 404
	if !l.srv.onFallback(op, key) {
		f, status, wait = c.lookup(key, dir, op)
	}
	if status == 404 && l.srv.fallback != nil {
		f, status, wait = c.fallback(op)
	}
	if wait != nil {
		c.waitFS(wait, head)
		return
	}
	if f == nil {
		c.respondError(r, status)
		return
	}
	switch f.kind {
	case kindRedirect:
		c.redirect(r, f.location)
	case kindNoIndex:
		c.respondError(r, 403)
	default:
		c.serveFile(r, f)
		return
	}
	l.cache.release(f)
}

// lookup is route's entry for key, holding a reference the caller gives
// back with release; or the status to answer; or the operation to wait
// for. op is the operation the request waited for, if any: its result
// is key's when it loaded key.
func (c *Conn) lookup(key []byte, dir bool, op *fsOp) (*File, int, *fsOp) {
	l := c.l
	if op != nil && op.key == string(key) {
		if op.f != nil {
			op.f.refs++
		}
		return op.f, op.status, nil
	}
	if f, status, hit := l.cache.get(key, l.sec); hit {
		return f, status, nil
	}
	return l.miss(key, dir, c.state == stateBody)
}

func (c *Conn) redirect(r *Request, location []byte) {
	c.head(r, 301)
	page := c.l.srv.lines.page[301]
	c.out = append(c.out, "Location: "...)
	c.out = append(c.out, location...)
	if len(r.Query) > 0 {
		c.out = append(append(c.out, '?'), r.Query...)
	}
	c.out = append(c.out, "\r\nContent-Type: text/html\r\nContent-Length: "...)
	c.out = strconv.AppendInt(c.out, int64(len(page)), 10)
	c.out = append(c.out, "\r\n"...)
	c.endHead(r)
	if r.Method != MethodHead {
		c.out = append(c.out, page...)
	}
	c.log(r, 301, int64(len(page)))
}

// respondEmpty sends a status without a body, with extra header lines.
func (c *Conn) respondEmpty(r *Request, status int, extra string) {
	c.head(r, status)
	c.out = append(c.out, extra...)
	c.endHead(r)
	c.log(r, status, 0)
}

// respondError sends an error page. r is nil when the head could not be
// parsed: the connection is then closed after a linger, since what follows
// in the stream cannot be trusted to be a request.
func (c *Conn) respondError(r *Request, status int) {
	extra := ""
	switch status {
	case 405:
		extra = "Allow: GET, HEAD\r\n"
	case 503:
		extra = retryAfter
	}
	c.respondErrorExtra(r, status, extra)
}

// retryAfter is what a 503 says: the queue of the file system's helpers
// was full, fds ran out, or the file system did not answer within
// Config.FSTimeout; each may pass within seconds.
const retryAfter = "Retry-After: 5\r\n"

// respondErrorExtra is respondError with extra header lines.
func (c *Conn) respondErrorExtra(r *Request, status int, extra string) {
	if r == nil {
		c.endWith(endLinger)
		c.l.Stats.Requests++
	} else if status == 400 || status == 413 || status == 414 || status == 431 || status == 501 || status == 505 {
		c.endWith(endLinger)
	}
	if f := c.l.page(status); f != nil {
		c.head(r, status)
		c.out = append(c.out, extra...)
		c.sendPage(r, status, f)
		return
	}
	page := c.l.srv.lines.page[status]
	c.head(r, status)
	c.out = append(c.out, extra...)
	c.out = append(c.out, "Content-Type: text/html\r\nContent-Length: "...)
	c.out = strconv.AppendInt(c.out, int64(len(page)), 10)
	c.out = append(c.out, "\r\n"...)
	c.endHead(r)
	if r == nil || r.Method != MethodHead {
		c.out = append(c.out, page...)
	}
	c.log(r, status, int64(len(page)))
}

// head starts a response: status line, Server, Date.
func (c *Conn) head(r *Request, status int) {
	c.l.Stats.Status[status/100]++
	if c.out == nil {
		c.lendOut() // outslab.go
	}
	c.out = append(c.out, c.l.srv.lines.line[status]...)
	c.out = append(c.out, c.l.date.line...)
}

// endHead adds the Connection field the request calls for and the empty
// line. HTTP/1.1 keeps the connection open by default; 1.0 needs the field.
func (c *Conn) endHead(r *Request) {
	switch {
	case c.closeAsked():
		c.out = append(c.out, "Connection: close\r\n\r\n"...)
	case r != nil && r.Minor == 0:
		c.out = append(c.out, "Connection: keep-alive\r\n\r\n"...)
	default:
		c.out = append(c.out, "\r\n"...)
	}
}

// reset makes c ready for another connection, keeping its buffers. A
// script still running for it is killed: its client is gone.
func (c *Conn) reset() {
	if c.file != nil {
		c.l.cache.release(c.file)
	}
	for i := range c.segs[c.seg:] {
		c.releaseSeg(&c.segs[c.seg+i])
	}
	if c.cgi != nil {
		c.cgiReset()
	}
	if c.fs != nil {
		c.leaveFS() // the operation goes on; what it finds is cached
	}
	in, out, l := c.in[:0], c.out[:0], c.l
	if c.slab != 0 {
		// The backend is done with the connection: whatever out holds
		// is not sent.
		if c.outMapped() {
			out = nil
		}
		l.outs.put(c.slab - 1)
	}
	segs, vec := c.segs[:0], c.vec[:0]
	clear(vec[:cap(vec)]) // no stale pointers to bodies that may be unmapped
	rare := c.rare
	if rare != nil {
		*rare = connRare{held: rare.held[:0], mp: multipart{ranges: rare.mp.ranges[:0]}}
	}
	*c = Conn{l: l, in: in, out: out, segs: segs, vec: vec, rare: rare}
}
