package core

// chunkedDecoder decodes a chunked request body (RFC 9112 §7.1) as its
// bytes arrive, in pieces of any size, keeping a few integers of state and
// no buffer: chunk data is copied straight to the caller's buffer, and
// extensions and trailer fields, which the server does not use, are checked
// and dropped.
//
// It is stricter than the grammar needs in one way: every line ends in CR
// LF. RFC 9112 §2.2 lets a recipient accept a bare LF in the head, and the
// parser does, but parsers that disagree on where a chunk line ends are how
// bodies get smuggled, so a bare LF or CR in chunk framing is refused.
type chunkedDecoder struct {
	state  chunkState
	size   int64 // chunk-size being read, then data bytes left in the chunk
	digits int   // hex digits of chunk-size so far
	semi   bool  // chunkExt: the ";" that starts an extension was seen
	line   int   // bytes of the current size line's extensions, with its CR; 0 without
	extra  int   // bytes of the trailer section
	// excess is the framing so far beyond chunkAllowance: what the body
	// reader counts against the body's limit besides its data.
	excess int64
}

type chunkState uint8

const (
	chunkSize    chunkState = iota // 1*HEXDIG
	chunkExt                       // [ chunk-ext ] up to CR
	chunkSizeLF                    // LF after a size line
	chunkData                      // size bytes of data
	chunkDataCR                    // CR after the data
	chunkDataLF                    // LF after the data
	trailerStart                   // a trailer field line or the final CRLF
	trailerName                    // a trailer field's name, up to its colon
	trailerField                   // a trailer field's value, up to CR
	trailerLF                      // LF after a trailer field line
	chunkFinalLF                   // LF of the final CRLF
	chunkDone                      // the body is complete
)

const (
	// maxChunkDigits keeps chunk-size below 2^60, far beyond any body limit.
	maxChunkDigits = 15
	// maxChunkLine bounds a size line's extensions (Go's net/http allows a
	// 4 KiB line) and maxTrailer the trailer section, so that framing that
	// carries no data cannot keep the loop busy for ever.
	maxChunkLine = 4 << 10
	maxTrailer   = 16 << 10
	// chunkAllowance is the framing a chunk may carry for free: its size
	// line and the CRLF after its data, up to 16 bytes plus twice its
	// data, the allowance Go's net/http gives since CVE-2023-39326. One
	// byte per chunk ("1" CRLF "X" CRLF: 5 bytes of framing for 1) is
	// legitimate streaming, and short extensions are too; what a chunk
	// carries beyond that is counted against the body's limit (bodyReader),
	// so that a body of a few bytes cannot bring kilobytes of extensions
	// per byte, each read and decoded on the loop. Go keeps a running
	// excess that a later large chunk pays back and refuses it above
	// 16 KiB whatever the limit; ours is never paid back and is held
	// against --max-body, so all a body may make the loop read is bounded
	// by the limit: at most 19 times it (one-byte chunks, each with 13
	// free bytes of extension, ";" included), plus a line and the trailer
	// section.
	chunkAllowance = 16
)

var (
	errChunkSize  = &ProtocolError{Status: 400, Reason: "bad chunk size"}
	errChunkExt   = &ProtocolError{Status: 400, Reason: "bad chunk extension"}
	errChunkEnd   = &ProtocolError{Status: 400, Reason: "chunk data not followed by crlf"}
	errChunkLine  = &ProtocolError{Status: 400, Reason: "bad line end in chunked body"}
	errBadTrailer = &ProtocolError{Status: 400, Reason: "bad trailer section"}
)

// Decode decodes from src, appending body bytes to dst without growing it
// past its capacity. It returns dst and how many bytes of src it consumed;
// it stops early when dst is full or the body has ended (Done), so that
// src[n:] then is the next request. An error is a *ProtocolError; the
// decoder must not be used after one.
func (d *chunkedDecoder) Decode(dst, src []byte) ([]byte, int, error) {
	i := 0
	for i < len(src) {
		c := src[i]
		switch d.state {
		case chunkSize:
			v, ok := unhex(c)
			switch {
			case ok && d.digits < maxChunkDigits:
				d.size = d.size<<4 | int64(v)
				d.digits++
			case ok, d.digits == 0:
				return dst, i, errChunkSize
			case c == '\r':
				d.state = chunkSizeLF
			case c == ';' || c == ' ' || c == '\t':
				d.state, d.semi, d.line = chunkExt, c == ';', 1
			default:
				return dst, i, errChunkSize
			}
		case chunkExt:
			// chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] )
			// (§7.1.1). Extensions are ignored; they only have to be
			// field-value bytes, and start with ";" after the BWS.
			switch d.line++; {
			case d.line > maxChunkLine:
				return dst, i, errChunkExt
			case c == '\r':
				if !d.semi {
					return dst, i, errChunkExt // "5 " CRLF: whitespace without an extension
				}
				d.state = chunkSizeLF
			case c == ';':
				d.semi = true
			case !d.semi && c != ' ' && c != '\t', chars[c]&isValue == 0:
				return dst, i, errChunkExt
			}
		case chunkSizeLF:
			if c != '\n' {
				return dst, i, errChunkLine
			}
			d.countFraming()
			if d.state = chunkData; d.size == 0 {
				d.state = trailerStart // last-chunk
			}
		case chunkData:
			k := min(d.size, int64(len(src)-i), int64(cap(dst)-len(dst)))
			if k == 0 {
				return dst, i, nil // dst is full
			}
			dst = append(dst, src[i:i+int(k)]...)
			i += int(k)
			if d.size -= k; d.size == 0 {
				d.state = chunkDataCR
			}
			continue
		case chunkDataCR:
			if c != '\r' {
				return dst, i, errChunkEnd
			}
			d.state = chunkDataLF
		case chunkDataLF:
			if c != '\n' {
				return dst, i, errChunkEnd
			}
			d.state, d.size, d.digits, d.line = chunkSize, 0, 0, 0
		case trailerStart, trailerName, trailerField, trailerLF, chunkFinalLF:
			if d.extra++; d.extra > maxTrailer {
				return dst, i, errBadTrailer
			}
			if err := d.trailer(c); err != nil {
				return dst, i, err
			}
			if d.state == chunkDone {
				return dst, i + 1, nil
			}
		case chunkDone:
			return dst, i, nil
		}
		i++
	}
	return dst, i, nil
}

// countFraming adds to excess what the chunk whose size line just ended
// carries beyond chunkAllowance: the line, its LF and, for a chunk with
// data, the CRLF that will follow the data.
func (d *chunkedDecoder) countFraming() {
	// The line is its digits, then its CR or the extensions with it.
	framing := int64(d.digits+max(d.line, 1)) + 1
	if d.size > 0 {
		framing += 2
	}
	// size < 2^60 (maxChunkDigits): twice it does not overflow.
	if over := framing - chunkAllowance - 2*d.size; over > 0 {
		d.excess += over
	}
}

// trailer steps through trailer-section CRLF (§7.1.2): field lines
// (field-name ":" value, as in the head), which are dropped, then the
// empty line that ends the body. A line that is not a field, such as a
// request line, is refused rather than skipped.
func (d *chunkedDecoder) trailer(c byte) error {
	switch d.state {
	case trailerStart:
		switch {
		case c == '\r':
			d.state = chunkFinalLF
		case chars[c]&isToken != 0:
			d.state = trailerName
		default:
			return errBadTrailer
		}
	case trailerName:
		switch {
		case c == ':':
			d.state = trailerField
		case chars[c]&isToken == 0:
			return errBadTrailer
		}
	case trailerField:
		switch {
		case c == '\r':
			d.state = trailerLF
		case chars[c]&isValue == 0:
			return errBadTrailer
		}
	case trailerLF, chunkFinalLF:
		if c != '\n' {
			return errChunkLine
		}
		if d.state == trailerLF {
			d.state = trailerStart
		} else {
			d.state = chunkDone
		}
	}
	return nil
}

// Done reports whether the whole body, trailer section included, was decoded.
func (d *chunkedDecoder) Done() bool { return d.state == chunkDone }
