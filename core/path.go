package core

import "bytes"

// resolvePath turns a request path (still percent-encoded, starting with
// '/') into a path relative to the document root, written into dst:
// "" is the root, "a/b" a file or directory below it. It reports whether the
// path named a directory (trailing slash) and, when it refuses the path, the
// status to answer with (RFC 3986 §5.2.4 for the dot segments):
//
//   - a bad percent escape or an encoded NUL: 400
//   - ".." above the root, before or after decoding: 400 (as nginx)
//   - a segment starting with '.' (hidden file), other than .well-known: 403
//
// %2F decodes to a plain '/', as in nginx; the result is cleaned after
// decoding, so an encoded slash or dot cannot climb out of the root either.
// The kernel has the last word: files are opened with RESOLVE_BENEATH.
func resolvePath(dst, raw []byte) (rel []byte, dir bool, status int) {
	if len(raw) == 0 || raw[0] != '/' {
		return nil, false, 400
	}
	// Fast path: nothing to decode and nothing to clean.
	if bytes.IndexByte(raw, '%') < 0 && !bytes.Contains(raw, []byte("/.")) && !bytes.Contains(raw, []byte("//")) {
		rel = raw[1:]
		if n := len(rel); n > 0 && rel[n-1] == '/' {
			return rel[:n-1], true, 0
		}
		return rel, len(rel) == 0, 0
	}
	dec := dst[:0]
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) {
				return nil, false, 400
			}
			h, ok1 := unhex(raw[i+1])
			l, ok2 := unhex(raw[i+2])
			if !ok1 || !ok2 {
				return nil, false, 400
			}
			c = h<<4 | l
			if c == 0 {
				return nil, false, 400
			}
			i += 2
		}
		dec = append(dec, c)
	}
	// Clean in place: dec is only read ahead of where out writes.
	out := dec[:0]
	dir = true
	for seg := range bytes.SplitSeq(dec[1:], []byte("/")) {
		switch {
		case len(seg) == 0 || string(seg) == ".":
			dir = true
			continue
		case string(seg) == "..":
			j := bytes.LastIndexByte(out, '/')
			if len(out) == 0 {
				return nil, false, 400
			}
			out = out[:max(j, 0)]
			dir = true
			continue
		case seg[0] == '.' && string(seg) != ".well-known":
			return nil, false, 403
		}
		if len(out) > 0 {
			out = append(out, '/')
		}
		out = append(out, seg...)
		dir = false
	}
	return out, dir, 0
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendPathEscaped appends p, a decoded path, percent-encoded as an
// absolute-path (RFC 3986 §3.3): every byte but pchar and '/' is escaped,
// so that '?', '#', '%', spaces, non-ASCII bytes and CR LF in a name stay
// part of it and never reach a header raw.
func appendPathEscaped(dst, p []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range p {
		if chars[c]&isPathChar != 0 {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hex[c>>4], hex[c&15])
	}
	return dst
}
