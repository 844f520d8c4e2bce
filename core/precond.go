package core

import (
	"bytes"
	"time"
)

// Conditional requests (RFC 9110 §13), for GET and HEAD of a file. Each
// precondition is evaluated against the selected representation: with
// --precompressed, the sidecar chosen by Accept-Encoding, with its own ETag
// and Last-Modified.

// precondition is the outcome of §13.2.2's evaluation.
type precondition uint8

const (
	precondPass        precondition = iota // perform the method (then If-Range and Range decide 200 or 206)
	precondNotModified                     // 304 (§15.4.5)
	precondFailed                          // 412 (§15.5.13)
)

// evalPreconditions applies the preconditions in the order RFC 9110
// §13.2.2 prescribes for a GET or HEAD of f.
func evalPreconditions(r *Request, f *File) precondition {
	// Step 1: If-Match (§13.1.1), strong comparison.
	if len(r.IfMatch) > 0 {
		if !ifMatch(r.IfMatch, f.etag) {
			return precondFailed
		}
	} else if len(r.IfUnmodifiedSince) > 0 {
		// Step 2: If-Unmodified-Since (§13.1.4), only without If-Match;
		// a value that is not an HTTP-date is ignored.
		if t, ok := f.parseDate(r.IfUnmodifiedSince); ok && f.modTime().After(t) {
			return precondFailed
		}
	}
	// Step 3: If-None-Match (§13.1.2), weak comparison; false for GET or
	// HEAD means 304.
	if len(r.IfNoneMatch) > 0 {
		if ifNoneMatch(r.IfNoneMatch, f.etag) {
			return precondNotModified
		}
	} else if len(r.IfModifiedSince) > 0 {
		// Step 4: If-Modified-Since (§13.1.3), only without If-None-Match.
		if t, ok := f.parseDate(r.IfModifiedSince); ok && !f.modTime().After(t) {
			return precondNotModified
		}
	}
	return precondPass
}

// ifRange reports whether a Range applies under If-Range (RFC 9110
// §13.1.5, step 5 of §13.2.2): only an exact strong ETag or the exact
// Last-Modified date matches; a weak tag never does.
func ifRange(r *Request, f *File) bool {
	v := r.IfRange
	if len(v) == 0 {
		return true
	}
	if v[0] == '"' {
		return string(v) == string(f.etag)
	}
	t, ok := f.parseDate(v)
	return ok && t.Equal(f.modTime())
}

// ifNoneMatch reports whether an If-None-Match value matches etag under
// the weak comparison RFC 9110 §13.1.2 prescribes for it.
func ifNoneMatch(h, etag []byte) bool {
	for more := true; more; {
		var tag []byte
		tag, h, more = cutElement(h)
		tag, _ = bytes.CutPrefix(tag, []byte("W/"))
		if len(tag) == 1 && tag[0] == '*' || string(tag) == string(etag) {
			return true
		}
	}
	return false
}

// ifMatch reports whether an If-Match value matches etag under the strong
// comparison RFC 9110 §13.1.1 prescribes: "*" matches any current
// representation, a weak tag (W/"…") matches nothing.
func ifMatch(h, etag []byte) bool {
	for more := true; more; {
		var tag []byte
		tag, h, more = cutElement(h)
		if len(tag) == 1 && tag[0] == '*' || string(tag) == string(etag) {
			return true
		}
	}
	return false
}

// modTime is f's Last-Modified, at the one-second resolution of an HTTP-date.
func (f *File) modTime() time.Time { return f.info.mtime.Truncate(time.Second) }

// parseDate reads an HTTP-date; the common case, a client sending back the
// Last-Modified it was given, is recognised without parsing.
func (f *File) parseDate(v []byte) (time.Time, bool) {
	if bytes.Equal(v, f.lastMod) {
		return f.modTime(), true
	}
	return parseHTTPTime(v)
}
