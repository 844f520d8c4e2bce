package core

import (
	"bytes"
	"cmp"
	"math"
)

// The request-head parser keeps no state between calls: the Conn calls it
// again from the start of its buffer whenever more bytes arrive. Every
// decision depends only on the bytes before the point where it is made, so a
// request split at any byte parses as if it came whole, and a prefix that can
// never become a valid head is refused at once rather than waited on.

// withDefaults returns l with zero or negative fields (all of them if l is
// nil) set to the defaults: nginx's 8k request line and 4×8k head
// (large_client_header_buffers), and Apache's 100 fields (LimitRequestFields;
// nginx counts only bytes).
func (l *Limits) withDefaults() Limits {
	var d Limits
	if l != nil {
		d = *l
	}
	return Limits{
		MaxRequestLine: cmp.Or(max(d.MaxRequestLine, 0), 8<<10),
		MaxHeaderBytes: cmp.Or(max(d.MaxHeaderBytes, 0), 32<<10),
		MaxHeaders:     cmp.Or(max(d.MaxHeaders, 0), 100),
	}
}

// The errors ParseRequest returns are shared, so that refusing a request
// allocates nothing either. Callers must not modify them.
var (
	errBareCR          = &ProtocolError{Status: 400, Reason: "bare cr"}
	errBadMethod       = &ProtocolError{Status: 400, Reason: "bad method"}
	errBadRequestLine  = &ProtocolError{Status: 400, Reason: "bad request line"}
	errBadTarget       = &ProtocolError{Status: 400, Reason: "bad request target"}
	errBadVersion      = &ProtocolError{Status: 400, Reason: "bad version"}
	errVersion         = &ProtocolError{Status: 505, Reason: "unsupported version"}
	errLineTooLong     = &ProtocolError{Status: 414, Reason: "request line too long"}
	errHeadTooLarge    = &ProtocolError{Status: 431, Reason: "header too large"}
	errTooManyHeaders  = &ProtocolError{Status: 431, Reason: "too many headers"}
	errFolded          = &ProtocolError{Status: 400, Reason: "folded header"}
	errBadHeaderName   = &ProtocolError{Status: 400, Reason: "bad header name"}
	errBadHeaderValue  = &ProtocolError{Status: 400, Reason: "bad header value"}
	errMissingHost     = &ProtocolError{Status: 400, Reason: "missing host"}
	errDuplicateHost   = &ProtocolError{Status: 400, Reason: "duplicate host"}
	errBadHost         = &ProtocolError{Status: 400, Reason: "bad host"}
	errBadLength       = &ProtocolError{Status: 400, Reason: "bad content-length"}
	errLengthAndChunks = &ProtocolError{Status: 400, Reason: "content-length with transfer-encoding"}
	errEncodingOn10    = &ProtocolError{Status: 400, Reason: "transfer-encoding in http/1.0"}
	errNotChunked      = &ProtocolError{Status: 400, Reason: "chunked is not the final coding"}
	errUnknownCoding   = &ProtocolError{Status: 501, Reason: "unknown transfer-coding"}
)

// ParseRequest parses one request head at the start of b.
// On success it returns n, the length of the head including the empty line
// that ends it (and any empty lines before the request line), and fills req
// (slices alias b). It returns ErrNeedMore when b is a valid but incomplete
// prefix, and a *ProtocolError for anything it refuses, as soon as the bytes
// so far show that it can never be accepted. A nil lim means the defaults.
func ParseRequest(b []byte, req *Request, lim *Limits) (n int, err error) {
	req.Reset()
	p := parser{req: req, lim: lim.withDefaults()}
	// Bytes past MaxHeaderBytes cannot belong to an acceptable head, so they
	// are not looked at. This also bounds the work of each call.
	head := b[:min(len(b), p.lim.MaxHeaderBytes)]
	n, err = p.parse(head)
	if err == ErrNeedMore && len(head) == p.lim.MaxHeaderBytes {
		return 0, errHeadTooLarge
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// parser holds what one ParseRequest call learns across the lines of a head.
type parser struct {
	req *Request
	lim Limits

	absolute  bool // the target is absolute-form: its authority is the Host
	host      bool // a Host field was seen
	length    bool // a Content-Length field was seen
	encoding  bool // a Transfer-Encoding field was seen
	close     bool // Connection: close
	keepAlive bool // Connection: keep-alive
}

func (p *parser) parse(b []byte) (int, error) {
	// RFC 9112 §2.2: a server SHOULD ignore at least one empty line before
	// the request-line. Any number is; they count against MaxHeaderBytes.
	i := 0
	for i < len(b) && (b[i] == '\r' || b[i] == '\n') {
		var err error
		if i, err = lineEnd(b, i); err != nil {
			return 0, err
		}
	}
	i, err := p.requestLine(b, i)
	for err == nil {
		switch {
		case i == len(b):
			return 0, ErrNeedMore
		case b[i] == '\r' || b[i] == '\n': // the empty line that ends the head
			if i, err = lineEnd(b, i); err != nil {
				return 0, err
			}
			return i, p.finish()
		case b[i] == ' ' || b[i] == '\t':
			// RFC 9112 §5.2: obs-fold may be refused with 400, and is, as
			// proxies disagree on it. §2.2: neither may whitespace come
			// before the first field.
			return 0, errFolded
		}
		i, err = p.field(b, i)
	}
	return 0, err
}

// lineEnd consumes the CR LF or LF at b[i]. RFC 9112 §2.2 lets a recipient
// accept a bare LF, as nginx does; a CR followed by anything else is refused.
func lineEnd(b []byte, i int) (int, error) {
	switch {
	case b[i] == '\n':
		return i + 1, nil
	case i+1 == len(b):
		return 0, ErrNeedMore
	case b[i+1] == '\n':
		return i + 2, nil
	}
	return 0, errBareCR
}

// requestLine parses the request-line at b[start:] (RFC 9112 §3) and
// enforces MaxRequestLine on it.
func (p *parser) requestLine(b []byte, start int) (int, error) {
	// Scanning stops one byte past the limit (two if that byte is a CR,
	// which may begin the terminator), so that a long line is refused at
	// the same byte whatever follows it.
	if end := start + p.lim.MaxRequestLine + 1; end <= len(b) {
		if b[end-1] == '\r' && end < len(b) {
			end++
		}
		b = b[:end]
	}
	n, err := p.requestLineIn(b, start)
	if err == ErrNeedMore {
		seen := len(b) - start
		if seen > 0 && b[len(b)-1] == '\r' {
			seen--
		}
		if seen > p.lim.MaxRequestLine {
			return 0, errLineTooLong
		}
	}
	return n, err
}

// requestLineIn parses method SP request-target SP HTTP-version CRLF, with
// exactly one SP between the parts: §3 allows a server to split on other
// whitespace too, but parsers that disagree on it let requests be smuggled.
func (p *parser) requestLineIn(b []byte, i int) (int, error) {
	start := i
	i = skip(b, i, isToken) // RFC 9110 §9.1: method = token
	switch {
	case i == len(b):
		return 0, ErrNeedMore
	case i == start || b[i] != ' ':
		return 0, errBadMethod
	}
	p.req.MethodName = b[start:i]
	p.req.Method = methodOf(p.req.MethodName)

	start = i + 1
	i = skip(b, start, isTarget)
	switch {
	case i == len(b):
		return 0, ErrNeedMore
	case i == start || b[i] == '\r' || b[i] == '\n':
		return 0, errBadRequestLine // no target, two SPs, or no version
	case b[i] != ' ':
		return 0, errBadTarget
	}
	if err := p.target(b[start:i]); err != nil {
		return 0, err
	}
	return p.version(b, i+1)
}

// methodOf maps the methods a static-file server answers to their Method.
// RFC 9110 §9.1: methods are case-sensitive.
func methodOf(name []byte) Method {
	switch string(name) { // compared in place, not allocated
	case "GET":
		return MethodGet
	case "HEAD":
		return MethodHead
	case "OPTIONS":
		return MethodOptions
	case "POST":
		return MethodPost
	case "CONNECT":
		return MethodConnect
	}
	return MethodOther
}

// target splits a request-target (RFC 9112 §3.2) into Path and Query, and for
// absolute-form takes Host from its authority.
func (p *parser) target(t []byte) error {
	r := p.req
	r.Target = t
	if r.Method == MethodConnect {
		return connectTarget(t)
	}
	if len(t) == 1 && t[0] == '*' { // asterisk-form, §3.2.4
		r.Path = t
		return nil
	}
	path, slash := t, []byte(nil)
	if t[0] != '/' {
		// absolute-form (§3.2.2); authority-form is only for CONNECT.
		var scheme int
		switch {
		case hasPrefixFold(t, "http://"):
			scheme = len("http://")
		case hasPrefixFold(t, "https://"):
			scheme = len("https://")
		default:
			return errBadTarget
		}
		path = t[scheme:]
		end := 0
		for end < len(path) && path[end] != '/' && path[end] != '?' {
			end++
		}
		// RFC 9110 §4.2.1: an http URI with an empty host is invalid. '@'
		// is not a host byte, so userinfo (§4.2.4) is refused too.
		if end == 0 || !validHost(path[:end]) {
			return errBadTarget
		}
		r.Host, path, p.absolute = path[:end], path[end:], true
		// An empty path means "/" (RFC 9110 §4.2.3): the last slash of
		// "://" stands in for it, so that Path still aliases the buffer.
		slash = t[scheme-1 : scheme]
	}
	if q := bytes.IndexByte(path, '?'); q >= 0 {
		path, r.Query = path[:q], path[q+1:]
	}
	if len(path) == 0 {
		path = slash
	}
	r.Path = path
	return nil
}

// connectTarget checks CONNECT's authority-form target (RFC 9112 §3.2.3):
// uri-host ":" port, which no other method may use. The server answers
// CONNECT 405; the check keeps it from passing bytes that no target has.
func connectTarget(t []byte) error {
	i := bytes.LastIndexByte(t, ':')
	if i <= 0 || i == len(t)-1 || !validHost(t[:i]) {
		return errBadTarget
	}
	for _, c := range t[i+1:] {
		if !isDigit(c) {
			return errBadTarget
		}
	}
	return nil
}

// version parses HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3),
// which is case-sensitive, and the end of the request line.
func (p *parser) version(b []byte, i int) (int, error) {
	const form = "HTTP/1.x" // x: any digit
	for k, c := range b[i:min(len(b), i+len(form))] {
		switch {
		case k == 5 && c != '1' && isDigit(c):
			// Whatever follows, we cannot answer in another major
			// version (RFC 9110 §15.6.6).
			return 0, errVersion
		case k == 7 && !isDigit(c), k < 7 && c != form[k]:
			return 0, errBadVersion
		}
	}
	if i += len(form); i >= len(b) {
		return 0, ErrNeedMore
	}
	if b[i] != '\r' && b[i] != '\n' {
		return 0, errBadVersion
	}
	// RFC 9110 §6.2: 1.x with x > 1 is answered as the highest minor
	// version implemented.
	p.req.Major, p.req.Minor = 1, min(int(b[i-1]-'0'), 1)
	return lineEnd(b, i)
}

// field parses field-line = field-name ":" OWS field-value OWS CRLF
// (RFC 9112 §5) at b[i], which does not start an empty line.
func (p *parser) field(b []byte, i int) (int, error) {
	if p.req.NumHeaders == p.lim.MaxHeaders {
		return 0, errTooManyHeaders
	}
	start := i
	i = skip(b, i, isToken)
	switch {
	case i == len(b):
		return 0, ErrNeedMore
	case i == start || b[i] != ':':
		// Includes whitespace before the colon, which §5.1 requires
		// refusing: proxies disagree on what it means.
		return 0, errBadHeaderName
	}
	name := b[start:i]
	start = skip(b, i+1, isSpace)
	i = skip(b, start, isValue) // RFC 9110 §5.5: no CTL but HTAB, no DEL
	switch {
	case i == len(b):
		return 0, ErrNeedMore
	case b[i] != '\r' && b[i] != '\n':
		return 0, errBadHeaderValue
	}
	value := trimSpaceRight(b[start:i])
	i, err := lineEnd(b, i)
	if err != nil {
		return 0, err
	}
	p.req.NumHeaders++
	return i, p.header(name, value)
}

// header records the fields the server uses and ignores the rest.
func (p *parser) header(name, value []byte) error {
	r := p.req
	// By length first: most fields a client sends are none of these, and
	// then cost one comparison instead of one per name (measured with
	// BenchmarkServeHit when the precondition fields were added).
	switch len(name) {
	case len("host"):
		if equalFold(name, "host") {
			return p.hostField(value)
		}
	case len("range"):
		if equalFold(name, "range") {
			r.Range = value
		}
	case len("expect"):
		if equalFold(name, "expect") {
			r.Expect100 = equalFold(value, "100-continue") // RFC 9110 §10.1.1
		}
	case len("referer"):
		if equalFold(name, "referer") {
			r.Referer = value
		}
	case len("if-match"): // and if-range
		switch {
		case equalFold(name, "if-match"):
			r.IfMatch = value
		case equalFold(name, "if-range"):
			r.IfRange = value
		}
	case len("connection"): // and user-agent
		switch {
		case equalFold(name, "connection"):
			p.connection(value)
		case equalFold(name, "user-agent"):
			r.UserAgent = value
		}
	case len("content-type"):
		if equalFold(name, "content-type") {
			r.ContentType = value
		}
	case len("if-none-match"):
		if equalFold(name, "if-none-match") {
			r.IfNoneMatch = value
		}
	case len("content-length"):
		if equalFold(name, "content-length") {
			return p.contentLength(value)
		}
	case len("accept-encoding"):
		if equalFold(name, "accept-encoding") {
			r.AcceptEncoding, r.HasAcceptEncoding = value, true
		}
	case len("transfer-encoding"): // and if-modified-since
		switch {
		case equalFold(name, "transfer-encoding"):
			return p.transferEncoding(value)
		case equalFold(name, "if-modified-since"):
			r.IfModifiedSince = value
		}
	case len("if-unmodified-since"):
		if equalFold(name, "if-unmodified-since") {
			r.IfUnmodifiedSince = value
		}
	}
	return nil
}

// hostField checks Host = uri-host [ ":" port ] (RFC 9110 §7.2). It may be
// empty: RFC 9112 §3.2 has clients send that when the URI has no authority.
func (p *parser) hostField(v []byte) error {
	if p.host {
		return errDuplicateHost // RFC 9112 §3.2: MUST respond 400
	}
	p.host = true
	if !validHost(v) {
		return errBadHost
	}
	if !p.absolute { // RFC 9112 §3.2.2: the target's authority wins
		p.req.Host = v
	}
	return nil
}

// connection notes the connection options (RFC 9110 §7.6.1) that decide
// persistence (RFC 9112 §9.3); finish applies them.
func (p *parser) connection(v []byte) {
	for more := true; more; {
		var opt []byte
		opt, v, more = cutElement(v)
		p.close = p.close || equalFold(opt, "close")
		p.keepAlive = p.keepAlive || equalFold(opt, "keep-alive")
	}
}

// contentLength parses Content-Length = 1*DIGIT (RFC 9110 §8.6). RFC 9112
// §6.3: differing or invalid values are a 400; a list of identical values,
// in one field or several, may be taken as one.
func (p *parser) contentLength(v []byte) error {
	for more := true; more; {
		var elem []byte
		elem, v, more = cutElement(v)
		n, ok := parseLength(elem)
		if !ok || (p.length && n != p.req.ContentLength) {
			return errBadLength
		}
		p.req.ContentLength, p.length = n, true
	}
	if p.encoding {
		return errLengthAndChunks
	}
	return nil
}

// parseLength parses 1*DIGIT as an int64, refusing overflow.
func parseLength(b []byte) (int64, bool) {
	var n int64
	for _, c := range b {
		d := int64(c - '0')
		if !isDigit(c) || n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, len(b) > 0
}

// transferEncoding notes the transfer codings (RFC 9112 §6.1) of one field;
// finish checks that chunked came last.
func (p *parser) transferEncoding(v []byte) error {
	switch {
	case p.req.Minor == 0:
		// §6.1: it means faulty framing in HTTP/1.0, as a 1.0 proxy on
		// the way may have ignored it.
		return errEncodingOn10
	case p.length:
		// §6.1: a server MAY refuse it; it is the classic smuggling request.
		return errLengthAndChunks
	}
	p.encoding = true
	for more := true; more; {
		var coding []byte
		coding, v, more = cutElement(v)
		switch {
		case len(coding) == 0: // RFC 9110 §5.6.1: empty elements do not count
		case equalFold(coding, "chunked"):
			if p.req.Chunked {
				return errNotChunked // §6.1: MUST NOT be applied twice
			}
			p.req.Chunked = true
		case p.req.Chunked:
			// §6.3: chunked not last leaves the length unknown: MUST 400.
			return errNotChunked
		default:
			// §6.1: SHOULD answer 501 to a coding not understood. The
			// server decodes chunked only: a body in gzip, deflate or
			// compress (§7) would reach a script still coded, so they
			// get 501 as well, as from nginx. chunked has no parameters,
			// so "chunked;p=v" is another coding.
			return errUnknownCoding
		}
	}
	return nil
}

// finish checks what can only be checked at the end of the head.
func (p *parser) finish() error {
	r := p.req
	switch {
	case r.Minor == 1 && !p.host:
		return errMissingHost // RFC 9112 §3.2: MUST respond 400
	case p.encoding && !r.Chunked:
		// RFC 9112 §6.3: without chunked last, the length of a request
		// body cannot be determined.
		return errNotChunked
	}
	// RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with
	// "keep-alive".
	r.Close = p.close || (r.Minor == 0 && !p.keepAlive)
	return nil
}

// Byte classes, one bit each in chars.
const (
	isToken    = 1 << iota // tchar (RFC 9110 §5.6.2)
	isTarget               // VCHAR but '#': no fragment in a request-target (RFC 9112 §3.2)
	isValue                // field-vchar, SP or HTAB (RFC 9110 §5.5)
	isSpace                // SP or HTAB, as in OWS (RFC 9110 §5.6.3)
	isHost                 // reg-name or IPv4address (RFC 3986 §3.2.2): unreserved, sub-delims, '%'
	isPathChar             // pchar but pct-encoded, and '/' (RFC 3986 §3.3): left as is in a path
)

var chars = func() (t [256]uint8) {
	for c := range 256 {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if alnum || c < 0x80 && bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), byte(c)) >= 0 {
			t[c] |= isToken
		}
		if 0x21 <= c && c <= 0x7e && c != '#' {
			t[c] |= isTarget
		}
		if c == ' ' || c == '\t' || 0x21 <= c && c != 0x7f {
			t[c] |= isValue
		}
		if c == ' ' || c == '\t' {
			t[c] |= isSpace
		}
		if alnum || c < 0x80 && bytes.IndexByte([]byte("-._~!$&'()*+,;=%"), byte(c)) >= 0 {
			t[c] |= isHost
		}
		if alnum || c < 0x80 && bytes.IndexByte([]byte("-._~!$&'()*+,;=:@/"), byte(c)) >= 0 {
			t[c] |= isPathChar
		}
	}
	return t
}()

// skip returns the index of the first byte from b[i] on that is not in
// class, or len(b).
func skip(b []byte, i int, class uint8) int {
	for i < len(b) && chars[b[i]]&class != 0 {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// validHost checks uri-host [ ":" port ] (RFC 3986 §3.2.2-3.2.3): an
// IP-literal in brackets or a reg-name (which has no ':'), then a port of
// digits, if any. Either part may be empty, as the grammar allows.
func validHost(h []byte) bool {
	i := skip(h, 0, isHost)
	if i == 0 && len(h) > 0 && h[0] == '[' {
		j := bytes.IndexByte(h, ']')
		if j < 2 {
			return false
		}
		for _, c := range h[1:j] {
			if chars[c]&isHost == 0 && c != ':' {
				return false
			}
		}
		i = j + 1
	}
	if i == len(h) {
		return true
	}
	if h[i] != ':' {
		return false
	}
	for _, c := range h[i+1:] {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// trimOWS drops the optional whitespace (RFC 9110 §5.6.3) around b.
func trimOWS(b []byte) []byte { return trimSpaceRight(b[skip(b, 0, isSpace):]) }

func trimSpaceRight(b []byte) []byte {
	for len(b) > 0 && chars[b[len(b)-1]]&isSpace != 0 {
		b = b[:len(b)-1]
	}
	return b
}

// cutElement returns the first element of a comma-separated list (RFC 9110
// §5.6.1) without OWS, and the list after its comma; more is false when it
// was the last element.
func cutElement(list []byte) (elem, rest []byte, more bool) {
	elem = list
	if i := bytes.IndexByte(list, ','); i >= 0 {
		elem, rest, more = list[:i], list[i+1:], true
	}
	return trimOWS(elem), rest, more
}

// equalFold reports whether b is lower, a lower-case ASCII string, ignoring
// ASCII case. Unlike bytes.EqualFold it knows no Unicode, which names and
// tokens do not need, and it takes a string constant without converting it.
func equalFold(b []byte, lower string) bool {
	return len(b) == len(lower) && hasPrefixFold(b, lower)
}

// hasPrefixFold is equalFold for a prefix of b.
func hasPrefixFold(b []byte, lower string) bool {
	if len(b) < len(lower) {
		return false
	}
	for i := range len(lower) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
