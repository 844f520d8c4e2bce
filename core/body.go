package core

import "time"

// Request bodies, read in one place for every path (RFC 9112 §6.3): the
// framing (Content-Length, or chunked through chunkedDecoder), the limit
// (Config.MaxBody), the timeout (Config.BodyTimeout, between two reads
// that make progress; the head timeout does not apply) and the sink the
// bytes go to: a script's stdin (cgi.go), or none (nil), when they are
// dropped. While a body is read the Conn is in body:
//
//	head with a body ──startBody──▶ body ──all read──▶ bodyEnded: a held request is answered; a script's runs on
//	                                  │
//	                                  └──bad framing (400), over the limit (413), no progress (408)──▶ bodyFailed: close
//
// A request for a static path is answered once its body has been read:
// its head is kept in connRare.held until then, so that a chunked body that
// turns out too large can still get its 413, and a stalled one its 408.
// A script starts at once and gets its body as it comes. A body whose
// answer was queued first (a script that could not start, or one that
// answered before reading all of it) is read and dropped after that
// answer, within the same limit.

// bodySink takes a request body's bytes as they are decoded.
type bodySink interface {
	// room returns a buffer to append body bytes to, up to its capacity.
	// A full buffer means "wait": the sink calls Conn.resume when it has
	// room again. ok false means the sink is gone: the rest is dropped.
	room() (buf []byte, ok bool)
	// take hands the buffer back with the new bytes, and says whether the
	// body ended with them.
	take(buf []byte, end bool)
}

// bodyReader is the request body being read; its Conn is in body.
type bodyReader struct {
	chunked bool
	waiting bool  // the sink is full: the wait is the sink's, not the client's
	left    int64 // Content-Length bytes still to come
	dec     chunkedDecoder
	seen    int64     // body bytes so far, held against the limit with the chunk framing beyond its allowance (dec.excess)
	last    time.Time // the last read that made progress, for BodyTimeout
	sink    bodySink  // nil: the bytes are dropped
}

// maxBody is the most body bytes a request may have.
func (c *Conn) maxBody() int64 { return max(c.l.srv.Config.MaxBody, 0) }

// hasBody reports whether r is followed by a body.
func hasBody(r *Request) bool { return r.Chunked || r.ContentLength > 0 }

// holdForBody keeps a static request's head and reads its body; the
// request is answered when the body ends.
func (c *Conn) holdForBody(r *Request, head []byte) {
	c.hold(head)
	c.startBody(r, nil)
}

// startBody starts reading r's body into sink (nil: dropped). Its answer
// waits for it when the request is held (Conn.hold), or is a script's
// (sink); otherwise it is queued already.
func (c *Conn) startBody(r *Request, sink bodySink) {
	waits := len(c.heldHead()) > 0 || sink != nil
	if !waits && r.Expect100 {
		// The client was answered before it sent the body and may never
		// send it (RFC 9110 §10.1.1): whatever comes is not a request.
		c.endWith(endLinger)
		return
	}
	c.to(stateBody)
	c.more().body = bodyReader{chunked: r.Chunked, left: r.ContentLength, last: c.l.now, sink: sink}
	if waits && r.Expect100 && r.Minor == 1 {
		// RFC 9110 §10.1.1: the client waits for this before the body.
		c.out = append(c.out, "HTTP/1.1 100 Continue\r\n\r\n"...)
	}
}

// readBody takes body bytes from buf and returns how many it took: fewer
// than len(buf) when the body ended (the rest is the next request) or the
// sink is full (the rest waits in c.in, and reading stops once InBufMax
// waits there).
func (c *Conn) readBody(buf []byte) int {
	b := &c.rare.body // startBody made rare
	limit := c.maxBody()
	used, done := 0, false
	for used < len(buf) && !done {
		var dst []byte
		if b.sink != nil {
			var ok bool
			if dst, ok = b.sink.room(); !ok {
				b.sink = nil
			} else if len(dst) == cap(dst) {
				b.waiting = true
				break
			}
		}
		if b.sink == nil {
			if c.l.scratch == nil {
				c.l.scratch = make([]byte, 0, 16<<10)
			}
			dst = c.l.scratch[:0]
		}
		before, n := len(dst), 0
		if b.chunked {
			var err error
			if dst, n, err = b.dec.Decode(dst, buf[used:]); err != nil {
				c.bodyFailed(400)
				return len(buf)
			}
			b.seen += int64(len(dst) - before)
			done = b.dec.Done()
		} else {
			k := min(int64(len(buf)-used), b.left)
			if b.sink != nil {
				k = min(k, int64(cap(dst)-len(dst)))
				dst = append(dst, buf[used:used+int(k)]...)
			}
			n, b.left, b.seen = int(k), b.left-k, b.seen+k
			done = b.left == 0
		}
		used += n
		if b.seen+b.dec.excess > limit {
			c.bodyFailed(413)
			return len(buf)
		}
		if b.sink != nil {
			b.sink.take(dst, done)
		}
	}
	if used > 0 {
		b.last, b.waiting = c.l.now, false
	}
	if done {
		c.bodyEnded()
	}
	return used
}

// bodyEnded answers the request that waited for its body; a script's
// answer goes on without it.
func (c *Conn) bodyEnded() {
	c.bodyDone()
	if c.script() != nil {
		c.to(stateRunning)
		c.cgiPeerEOF() // the body was read after the peer's FIN
		return
	}
	c.to(stateReading)
	if head := c.unhold(); len(head) > 0 { // route may hold it again, in place, to wait for the file (fsop.go)
		c.route(c.heldRequest(head), head, nil)
	}
	c.settle()
}

// heldRequest parses the held head again, into the loop's Request; its
// body is read.
func (c *Conn) heldRequest(head []byte) *Request { return c.reparse(head, true) }

// reparse parses a held head again into the loop's Request (Loop.req);
// bodyRead: its body is read already, and the Request says it has none.
func (c *Conn) reparse(head []byte, bodyRead bool) *Request {
	r := &c.l.req
	ParseRequest(head, r, &c.l.srv.Config.Limits) // resets r
	if bodyRead {
		r.ContentLength, r.Chunked, r.Expect100 = -1, false, false
	}
	return r
}

// bodyFailed ends a body that is malformed (400), too large (413) or
// stalled (408). The connection closes: after the error page when the
// request was not answered yet, after the answer when it was, and at once
// when a script's answer was cut short.
func (c *Conn) bodyFailed(status int) {
	c.bodyDone()
	c.endWith(endLinger)
	c.to(stateReading)
	switch {
	case len(c.heldHead()) > 0:
		c.respondError(c.heldRequest(c.unhold()), status)
	case c.script() != nil:
		c.cgiBodyFailed(status)
	}
	c.settle()
}

// bodyTimedOut is CheckTimeout's answer to a body that made no progress
// for Config.BodyTimeout.
func (c *Conn) bodyTimedOut() Action {
	c.l.Stats.Timeouts++
	c.in = c.in[:0]
	c.bodyFailed(408)
	if c.state == stateWriting {
		return ActWrite
	}
	return ActClose
}

// resume goes on with the input waiting in c.in (body bytes, pipelined
// requests) after a sink took bytes or a script's answer ended.
func (c *Conn) resume() {
	c.parseWaiting()
	c.checkTruncated()
	c.settle()
}

// checkTruncated drops a connection whose peer closed its side before the
// whole body arrived: a script would wait for the rest for ever, and a
// held request has no answer.
func (c *Conn) checkTruncated() {
	if c.eof && c.state == stateBody && len(c.in) == 0 {
		c.bodyDone()
		c.unhold()
		if j := c.script(); j != nil {
			j.kill()
			c.detach()
		}
		c.cutShort()
	}
}

// bodyReading is the request body being read, nil when none was.
func (c *Conn) bodyReading() *bodyReader {
	if c.rare == nil {
		return nil
	}
	return &c.rare.body
}
