package core

import "strconv"

// serveFile answers GET or HEAD for a regular file, taking over the
// caller's reference to f: the representation (precompressed sidecar or
// the file), then the preconditions of RFC 9110 §13.2.2, then If-Range and
// Range (§14). HEAD gets the header GET would get, 206 and multipart
// included, as nginx does and as §9.3.2 asks of HEAD; §14.2 would have
// HEAD ignore Range instead, but then a client could not learn a range
// answer's length without fetching it.
func (c *Conn) serveFile(r *Request, f *File) {
	if f.side != nil {
		f = c.l.cache.pick(f, r)
	}
	pre := precondPass
	if len(r.IfMatch)+len(r.IfUnmodifiedSince)+len(r.IfNoneMatch)+len(r.IfModifiedSince) > 0 {
		pre = evalPreconditions(r, f) // not inlined: skipped when there is nothing to evaluate
	}
	switch pre {
	case precondNotModified:
		c.head(r, 304)
		c.out = append(c.out, f.validators...)
		c.endHead(r)
		c.log(r, 304, 0)
		c.l.cache.release(f)
		return
	case precondFailed:
		c.respondErrorExtra(r, 412, f.varyExtra())
		c.l.cache.release(f)
		return
	}
	if len(r.Range) > 0 && c.l.srv.Config.MaxRanges > 0 && ifRange(r, f) {
		mp := &c.more().mp
		rs, res := parseRanges(r.Range, f.info.size, c.l.srv.Config.MaxRanges, mp.ranges)
		mp.ranges = rs[:0]
		switch {
		case res == rangeUnsat:
			c.head(r, 416)
			c.out = append(c.out, "Content-Range: bytes */"...)
			c.out = strconv.AppendInt(c.out, f.info.size, 10)
			c.out = append(c.out, "\r\n"...)
			c.out = append(c.out, f.varyExtra()...)
			c.l.cache.release(f)
			if page := c.l.page(416); page != nil {
				c.sendPage(r, 416, page)
				return
			}
			c.out = append(c.out, "Content-Length: 0\r\n"...)
			c.endHead(r)
			c.log(r, 416, 0)
			return
		case res == rangeOK && len(rs) > 1:
			c.respondMultipart(r, f, rs)
			return
		case res == rangeOK:
			c.respondBody(r, f, 206, rs[0].start, rs[0].end)
			return
		}
	}
	c.respondBody(r, f, 200, 0, f.info.size)
}

// respondBody answers with bytes [start, end) of f: the whole file with
// 200, or one range with 206. A small body in memory goes into out with
// its header, a larger one in memory is referenced (Conn.segs), one not in
// memory is sent from the file.
func (c *Conn) respondBody(r *Request, f *File, status int, start, end int64) {
	c.head(r, status)
	if status == 206 {
		c.out = append(c.out, f.ctypeLine...)
		c.out = append(c.out, f.encLine...)
		c.out = append(c.out, "Content-Length: "...)
		c.out = strconv.AppendInt(c.out, end-start, 10)
		c.out = append(c.out, "\r\nContent-Range: bytes "...)
		c.out = strconv.AppendInt(c.out, start, 10)
		c.out = append(c.out, '-')
		c.out = strconv.AppendInt(c.out, end-1, 10)
		c.out = append(c.out, '/')
		c.out = strconv.AppendInt(c.out, f.info.size, 10)
		c.out = append(c.out, "\r\n"...)
		c.out = append(c.out, f.validators...)
		c.out = append(c.out, acceptRanges(true)...)
	} else {
		c.out = append(c.out, f.head...)
	}
	c.endHead(r)
	if r.Method == MethodHead {
		c.log(r, status, 0)
	} else {
		c.log(r, status, end-start)
	}
	c.appendBody(f, start, end, r.Method == MethodHead)
}

// appendBody queues bytes [start, end) of f after the header in out,
// taking over the caller's reference to f: none for HEAD.
func (c *Conn) appendBody(f *File, start, end int64, head bool) {
	switch {
	case head || start == end:
		c.l.cache.release(f)
	case f.body != nil && end-start <= copyBodyMax:
		c.out = append(c.out, f.body[start:end]...)
		c.l.cache.release(f)
	case f.body != nil:
		// Sent from the entry's memory: f's reference is the segment's.
		if c.segs == nil {
			c.segs = c.l.takeSegs()
		}
		c.segs = append(c.segs, seg{at: len(c.out), body: f.body[start:end], f: f})
		c.l.Stats.BodyRefs++
		c.l.Stats.BodyRefBytes += end - start
	default:
		c.file, c.fileOff, c.fileEnd = f, start, end
	}
}

// varyExtra is the Vary line an error about f carries, if f's responses
// vary.
func (f *File) varyExtra() string {
	if f.vary {
		return varyLine
	}
	return ""
}
