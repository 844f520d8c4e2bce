package core

import (
	"bytes"
	"errors"
)

// cgiHead is the header a CGI script writes before its body (RFC 3875
// §6.2-6.3). Its slices alias the script's output.
type cgiHead struct {
	status   int    // Status:, 0 when absent
	reason   []byte // Status: reason phrase, nil when absent
	ctype    []byte // Content-Type:, nil when absent
	location []byte // Location:, nil when absent
	fields   []cgiField
}

// cgiField is a header field passed through to the client.
type cgiField struct{ name, value []byte }

// local reports whether Location names a path on this server: the server
// answers for it itself (RFC 3875 §6.2.2, local redirect).
func (h *cgiHead) local() bool { return len(h.location) > 0 && h.location[0] == '/' }

// cgiHeadMax bounds the header a script may write, as a request head is
// bounded: a script that writes this much without the empty line gets 502.
const cgiHeadMax = 32 << 10

var errCGIHead = errors.New("malformed CGI response header")

// parseCGIHead parses the header at the start of b: field lines ending in
// LF or CR LF (§6.3: "NL"), then an empty line. It returns the length of
// the header with its empty line, ErrNeedMore when b is a valid prefix, or
// errCGIHead: a bad field name, a bare CR, a control byte, an obs-fold, a
// repeated or invalid CGI field, no CGI field at all, or no empty line
// within max bytes. Whatever it accepts is safe to copy into an HTTP
// response head: no CR or LF can reach the client inside a field.
func parseCGIHead(b []byte, h *cgiHead, max int) (int, error) {
	i := 0
	for {
		nl := bytes.IndexByte(b[i:], '\n')
		if nl < 0 {
			rest := b[i:]
			if cr := bytes.IndexByte(rest, '\r'); len(b) >= max || cr >= 0 && cr < len(rest)-1 {
				return 0, errCGIHead // too long, or a CR not followed by LF
			}
			return 0, ErrNeedMore
		}
		line, next := b[i:i+nl], i+nl+1
		if next > max {
			return 0, errCGIHead
		}
		line, _ = bytes.CutSuffix(line, []byte("\r"))
		if len(line) == 0 {
			return next, h.check()
		}
		if err := h.field(line); err != nil {
			return 0, err
		}
		i = next
	}
}

// field parses one field line (without its line end) into h.
func (h *cgiHead) field(line []byte) error {
	colon := skip(line, 0, isToken)
	if colon == 0 || colon == len(line) || line[colon] != ':' {
		return errCGIHead // no name, whitespace before the colon, obs-fold, bad bytes
	}
	name := line[:colon]
	v := trimSpaceRight(line[skip(line, colon+1, isSpace):])
	if skip(v, 0, isValue) != len(v) {
		return errCGIHead // a CR or another control byte
	}
	switch {
	case equalFold(name, "status"):
		return h.statusField(v)
	case equalFold(name, "content-type"):
		if h.ctype != nil || len(v) == 0 {
			return errCGIHead
		}
		h.ctype = v
	case equalFold(name, "location"):
		if h.location != nil || !validLocation(v) {
			return errCGIHead
		}
		h.location = v
	case hopByHop(name):
		// The server frames the response and manages the connection; a
		// script's Content-Length could not be trusted to be true.
	default:
		h.fields = append(h.fields, cgiField{name: name, value: v})
	}
	return nil
}

// statusField parses Status = status-code SP reason-phrase (§6.3.3). The
// reason may be left out; 1xx is not a final status and is refused.
func (h *cgiHead) statusField(v []byte) error {
	if h.status != 0 || len(v) < 3 || !isDigit(v[0]) || !isDigit(v[1]) || !isDigit(v[2]) {
		return errCGIHead
	}
	code := int(v[0]-'0')*100 + int(v[1]-'0')*10 + int(v[2]-'0')
	if code < 200 || code > 599 || len(v) > 3 && v[3] != ' ' {
		return errCGIHead
	}
	h.status = code
	if len(v) > 4 {
		h.reason = v[4:]
	}
	return nil
}

// check applies the rules on the header as a whole (§6.2): at least one CGI
// field; a local Location is a redirect only without Status.
func (h *cgiHead) check() error {
	if h.status == 0 && h.ctype == nil && h.location == nil {
		return errCGIHead
	}
	return nil
}

// validLocation accepts an absolute path (local) or an absolute URI with a
// scheme (client redirect), in request-target bytes.
func validLocation(v []byte) bool {
	if len(v) == 0 || skip(v, 0, isTarget) != len(v) {
		return false
	}
	if v[0] == '/' {
		return len(v) == 1 || v[1] != '/' // "//host" is a network path, not ours
	}
	// scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1)
	for i, c := range v {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

// hopByHop names the fields a script may not set: framing and connection
// management (RFC 9110 §7.6.1), and Server and Date, which the server sends.
func hopByHop(name []byte) bool {
	for _, s := range [...]string{"connection", "keep-alive", "transfer-encoding", "content-length",
		"te", "trailer", "upgrade", "proxy-connection", "server", "date"} {
		if equalFold(name, s) {
			return true
		}
	}
	return false
}
