package core

import (
	"math/rand/v2"
	"strconv"
)

// Byte ranges (RFC 9110 §14): a Range field is read into a list of
// satisfiable ranges, overlapping or adjacent ones coalesced (§14.2 allows
// it, and it defeats the many-overlapping-ranges attack, CVE-2011-3192);
// one range is a plain 206, two or more a multipart/byteranges body
// (§14.6). A body sent from its file goes out as a sequence of Outs, one
// per part: the part's header from memory, then its range from the file,
// zero-copy; the closing delimiter comes last, from memory. Backends see
// nothing new: each Out is header bytes and a file range, as for a 200.

// byteRange is a satisfiable range [start, end) of a body.
type byteRange struct{ start, end int64 }

// rangeResult is what a Range field asks for.
type rangeResult uint8

const (
	rangeIgnore rangeResult = iota // malformed, not bytes, too many, or more than the file: send it whole (200)
	rangeUnsat                     // no range overlaps the body: 416
	rangeOK                        // the ranges returned: 206
)

// parseRanges reads a Range field against a body of size bytes (RFC 9110
// §14.1.2) into dst[:0]. More than maxRanges range-specs, or ranges whose
// lengths add up to more than the body (as nginx and Go's net/http decide),
// are ignored: the whole body is cheaper to send than its parts.
func parseRanges(h []byte, size int64, maxRanges int, dst []byteRange) ([]byteRange, rangeResult) {
	const unit = "bytes="
	dst = dst[:0]
	if !hasPrefixFold(h, unit) {
		return dst, rangeIgnore
	}
	list := h[len(unit):]
	var total int64
	specs := 0
	for more := true; more; {
		var spec []byte
		spec, list, more = cutElement(list)
		if len(spec) == 0 {
			continue // an empty list element (RFC 9110 §5.6.1)
		}
		if specs++; specs > maxRanges {
			return dst, rangeIgnore
		}
		rg, valid, sat := parseRangeSpec(spec, size)
		if !valid {
			return dst, rangeIgnore
		}
		if sat {
			if total += rg.end - rg.start; total > size {
				return dst, rangeIgnore
			}
			dst = append(dst, rg)
		}
	}
	switch {
	case specs == 0:
		return dst, rangeIgnore
	case len(dst) == 0:
		return dst, rangeUnsat
	}
	return coalesce(dst), rangeOK
}

// parseRangeSpec reads one int-range or suffix-range. valid is false when
// it is malformed; sat, when it overlaps the body.
func parseRangeSpec(spec []byte, size int64) (r byteRange, valid, sat bool) {
	dash := -1
	for i, c := range spec {
		if c == '-' {
			dash = i
			break
		}
	}
	if dash < 0 {
		return r, false, false
	}
	first, okF := parseDigits(spec[:dash])
	last, okL := parseDigits(spec[dash+1:])
	switch {
	case dash == 0: // suffix: "-n", the last n bytes
		if !okL {
			return r, false, false
		}
		return byteRange{max(size-last, 0), size}, true, last > 0 && size > 0
	case !okF:
		return r, false, false
	case dash == len(spec)-1: // "a-"
		return byteRange{first, size}, true, first < size
	case !okL || last < first:
		return r, false, false
	}
	return byteRange{first, min(last+1, size)}, true, first < size
}

// coalesce merges, in place, ranges that overlap or touch. A merged range
// takes the place of the first range it absorbed, so ranges that merge with
// nothing keep the order the client asked for (RFC 9110 §15.3.7.2).
func coalesce(rs []byteRange) []byteRange {
	out := rs[:0] // writes never pass the range being read
	for _, r := range rs {
		first := -1
		for i := 0; i < len(out); {
			o := out[i]
			if o.start > r.end || r.start > o.end {
				i++
				continue
			}
			r = byteRange{min(o.start, r.start), max(o.end, r.end)}
			if first < 0 {
				first = i
				i++
				continue
			}
			// The ranges in out never touch one another, so growing r
			// cannot make it touch one already passed.
			out = out[:i+copy(out[i:], out[i+1:])]
		}
		if first >= 0 {
			out[first] = r
		} else {
			out = append(out, r)
		}
	}
	return out
}

// multipart is the state of a multipart/byteranges body being sent from
// its file: Conn.file, fileOff and fileEnd cover part next-1, and Sent
// moves to the next part when that range is out.
type multipart struct {
	ranges   []byteRange // the parts; reused from response to response
	next     int         // the part after the one being sent; 0 when no multipart body is under way
	boundary [boundaryLen]byte
}

// boundaryLen is the length of a boundary: "twinloop" and 16 hex digits.
const boundaryLen = 24

// newBoundary sets b to a boundary not used before by this loop. It comes
// from a random start, so that a file is very unlikely to contain it.
func (l *Loop) newBoundary(b *[boundaryLen]byte) {
	if l.boundarySeq == 0 {
		l.boundarySeq = rand.Uint64() | 1
	}
	l.boundarySeq++
	copy(b[:], "twinloop")
	const hex = "0123456789abcdef"
	v := l.boundarySeq * 0x9e3779b97f4a7c15 // spread consecutive numbers over all digits
	for i := boundaryLen - 1; i >= 8; i-- {
		b[i] = hex[v&15]
		v >>= 4
	}
}

// appendPartHeader appends the delimiter and header of a part of f
// (RFC 9110 §14.6): the CRLF that ends the previous part unless first,
// "--boundary", Content-Type, Content-Encoding for a sidecar, Content-Range.
func appendPartHeader(b []byte, first bool, boundary []byte, f *File, rg byteRange) []byte {
	if !first {
		b = append(b, "\r\n"...)
	}
	b = append(append(append(b, "--"...), boundary...), "\r\n"...)
	b = append(b, f.ctypeLine...)
	b = append(b, f.encLine...)
	b = append(b, "Content-Range: bytes "...)
	b = strconv.AppendInt(b, rg.start, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, rg.end-1, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, f.info.size, 10)
	return append(b, "\r\n\r\n"...)
}

// appendClosing appends the close delimiter that ends the body.
func appendClosing(b []byte, boundary []byte) []byte {
	return append(append(append(b, "\r\n--"...), boundary...), "--\r\n"...)
}

// respondMultipart answers with the 206 multipart/byteranges body of
// ranges rs of f (two or more), taking over the caller's reference to f.
// Content-Length is exact; HEAD gets the same header.
func (c *Conn) respondMultipart(r *Request, f *File, rs []byteRange) {
	mp := &c.more().mp
	bd := mp.boundary[:]
	c.l.newBoundary(&mp.boundary)
	var n int64
	for i, rg := range rs {
		c.l.partBuf = appendPartHeader(c.l.partBuf[:0], i == 0, bd, f, rg)
		n += int64(len(c.l.partBuf)) + rg.end - rg.start
	}
	n += int64(len(appendClosing(c.l.partBuf[:0], bd)))

	c.head(r, 206)
	c.out = append(c.out, "Content-Type: multipart/byteranges; boundary="...)
	c.out = append(c.out, bd...)
	c.out = append(c.out, "\r\nContent-Length: "...)
	c.out = strconv.AppendInt(c.out, n, 10)
	c.out = append(c.out, "\r\n"...)
	c.out = append(c.out, f.validators...)
	c.out = append(c.out, acceptRanges(true)...)
	c.endHead(r)
	if r.Method == MethodHead {
		c.log(r, 206, 0)
		c.l.cache.release(f)
		return
	}
	c.log(r, 206, n)
	if f.body != nil {
		for i, rg := range rs {
			c.out = appendPartHeader(c.out, i == 0, bd, f, rg)
			c.out = append(c.out, f.body[rg.start:rg.end]...)
		}
		c.out = appendClosing(c.out, bd)
		c.l.cache.release(f)
		return
	}
	mp.ranges, mp.next = rs, 1
	c.out = appendPartHeader(c.out, true, bd, f, rs[0])
	c.file, c.fileOff, c.fileEnd = f, rs[0].start, rs[0].end
}

// nextPart is called by Sent when the file range being sent is out. For a
// multipart body it queues the next part's header and range and reports
// true, or after the last part queues the closing delimiter and reports
// false: then the file is done with.
func (c *Conn) nextPart() bool {
	if c.rare == nil || c.rare.mp.next == 0 {
		return false
	}
	mp := &c.rare.mp
	if mp.next == len(mp.ranges) {
		c.out = appendClosing(c.out, mp.boundary[:])
		mp.next = 0
		return false
	}
	rg := mp.ranges[mp.next]
	mp.next++
	c.out = appendPartHeader(c.out, false, mp.boundary[:], c.file, rg)
	c.fileOff, c.fileEnd = rg.start, rg.end
	return true
}
