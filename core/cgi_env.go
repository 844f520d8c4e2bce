package core

import (
	"bytes"
	"iter"
	"strconv"
	"strings"
)

// cgiPATH is the PATH a script gets: the server's own PATH is not passed on.
const cgiPATH = "/usr/local/bin:/usr/bin:/bin"

// cgiEnv builds a script's environment (RFC 3875 §4.1) from the request
// and nothing else: the server's own environment is not inherited, and
// the client can set only HTTP_* variables, through header fields.
// head is the request head r was parsed from.
func (c *Conn) cgiEnv(r *Request, head []byte, name string, pathInfo []byte) []string {
	srv := c.l.srv
	env := make([]string, 0, 20+r.NumHeaders)
	add := func(k, v string) { env = append(env, k+"="+v) }
	add("PATH", cgiPATH)
	add("GATEWAY_INTERFACE", "CGI/1.1")
	add("SERVER_SOFTWARE", srv.Config.ServerName)
	add("SERVER_PROTOCOL", "HTTP/1."+strconv.Itoa(r.Minor))
	host, port := splitHostPort(r.Host)
	switch {
	case len(host) > 0:
		add("SERVER_NAME", string(host))
	case c.Local.IsValid() && c.Local.Addr().Is6():
		add("SERVER_NAME", "["+c.Local.Addr().String()+"]")
	case c.Local.IsValid():
		add("SERVER_NAME", c.Local.Addr().String())
	}
	switch {
	case c.Local.IsValid():
		add("SERVER_PORT", strconv.Itoa(int(c.Local.Port())))
	case len(port) > 0:
		add("SERVER_PORT", string(port))
	default:
		add("SERVER_PORT", "80")
	}
	add("REQUEST_METHOD", string(r.MethodName))
	add("SCRIPT_NAME", "/cgi-bin/"+name)
	if len(pathInfo) > 0 {
		add("PATH_INFO", string(pathInfo)) // decoded, as §4.1.5 asks
	}
	add("QUERY_STRING", string(r.Query)) // as sent, still encoded (§4.1.7)
	// §4.1.2: only when a body comes with the request. A chunked body's
	// length is not known before it ends; the script reads to EOF.
	if !r.Chunked && r.ContentLength > 0 {
		add("CONTENT_LENGTH", strconv.FormatInt(r.ContentLength, 10))
	}
	if len(r.ContentType) > 0 {
		add("CONTENT_TYPE", string(r.ContentType))
	}
	if c.Remote.IsValid() {
		add("REMOTE_ADDR", c.Remote.Addr().String())
		add("REMOTE_PORT", strconv.Itoa(int(c.Remote.Port())))
	}
	fixed := len(env)
	for name, value := range headerFields(head) {
		key, ok := cgiHeaderVar(name)
		if !ok {
			continue
		}
		// §4.1.18: repeated fields become one value with the same meaning.
		merged := false
		for i := fixed; i < len(env) && !merged; i++ {
			if len(env[i]) > len(key) && env[i][len(key)] == '=' && strings.HasPrefix(env[i], key) {
				sep := ", "
				if key == "HTTP_COOKIE" {
					sep = "; " // RFC 6265 §5.4
				}
				env[i] += sep + string(value)
				merged = true
			}
		}
		if !merged {
			env = append(env, key+"="+string(value))
		}
	}
	return env
}

// cgiHeaderVar maps a request field name to its HTTP_* variable (§4.1.18):
// upper case, '-' as '_'. It refuses the fields that must not reach a
// script: Proxy (httpoxy: HTTP_PROXY is read as the proxy to use by many
// HTTP libraries), credentials (§4.1.18 leaves them out), Content-Length
// and Content-Type (already CONTENT_*), and names with bytes that have no
// place in a variable name, '_' included, as nginx does: "X_A" and "X-A"
// would otherwise both set HTTP_X_A.
func cgiHeaderVar(name []byte) (string, bool) {
	for _, s := range [...]string{"proxy", "authorization", "proxy-authorization", "content-length", "content-type"} {
		if equalFold(name, s) {
			return "", false
		}
	}
	var b strings.Builder
	b.Grow(5 + len(name))
	b.WriteString("HTTP_")
	for _, ch := range name {
		switch {
		case 'a' <= ch && ch <= 'z':
			b.WriteByte(ch - 'a' + 'A')
		case 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
			b.WriteByte(ch)
		case ch == '-':
			b.WriteByte('_')
		default:
			return "", false
		}
	}
	return b.String(), true
}

// headerFields yields the name and value of every field line of a head
// that ParseRequest accepted, in order, with the value's OWS trimmed. The
// parser keeps only the fields the server uses; this walks all of them,
// and can be simple because the head is known to be valid: every line
// ends in LF, a CR only comes before one, and every field line has a colon.
func headerFields(head []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		i := 0
		for i < len(head) && (head[i] == '\r' || head[i] == '\n') {
			i++ // empty lines before the request line (RFC 9112 §2.2)
		}
		nl := bytes.IndexByte(head[i:], '\n')
		if nl < 0 {
			return
		}
		for rest := head[i+nl+1:]; len(rest) > 0; {
			nl = bytes.IndexByte(rest, '\n')
			if nl < 0 {
				return
			}
			line, _ := bytes.CutSuffix(rest[:nl], []byte("\r"))
			rest = rest[nl+1:]
			if len(line) == 0 {
				return // the empty line that ends the head
			}
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok {
				return
			}
			value = trimOWS(value)
			if !yield(name, value) {
				return
			}
		}
	}
}

// splitHostPort splits a Host value (already checked by the parser) into
// the host, brackets kept for IPv6, and the port, if any.
func splitHostPort(h []byte) (host, port []byte) {
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 {
			return h, nil
		}
		host, rest := h[:end+1], h[end+1:]
		if len(rest) > 0 && rest[0] == ':' {
			return host, rest[1:]
		}
		return host, nil
	}
	if i := bytes.LastIndexByte(h, ':'); i >= 0 {
		return h[:i], h[i+1:]
	}
	return h, nil
}
