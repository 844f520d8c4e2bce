package core

import (
	"bytes"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// The access log (-v): one line per response, appended to the loop's
// buffer as the response is made (Conn.log), handed once a second
// (Loop.Tick) to one writer goroutine per Server (logWriter), so that a
// slow disk or terminal never blocks a loop. The format is chosen once,
// by NewServer (Server.appendLog): a server without an access log pays
// one nil check per response, and neither format pays for the other.

// LogFormat is the access log's format (--log-format).
type LogFormat uint8

const (
	// LogCombined is nginx's combined format: address, time, request
	// line, status, body bytes, referer, user agent.
	LogCombined LogFormat = iota
	// LogJSON is one JSON object per line (appendJSONLine lists its
	// keys), its strings escaped exactly as encoding/json escapes them.
	LogJSON
)

// appendLine appends one access log line for the response to r (nil: a
// head that could not be parsed) with status and a body of size bytes.
type appendLine func(b []byte, c *Conn, r *Request, status int, size int64) []byte

// log appends the access log line for a response to the loop's buffer;
// the loop hands the buffer to the writer once per tick.
func (c *Conn) log(r *Request, status int, size int64) {
	l := c.l
	if l.srv.appendLog == nil {
		return
	}
	l.logBuf = l.srv.appendLog(l.logBuf, c, r, status, size)
}

// appendCombinedLine is LogCombined's line.
func appendCombinedLine(b []byte, c *Conn, r *Request, status int, size int64) []byte {
	if c.Remote.IsValid() {
		b = c.Remote.Addr().AppendTo(b)
	} else {
		b = append(b, '-')
	}
	b = append(b, " - - ["...)
	b = append(b, c.l.logTime...)
	b = append(b, "] \""...)
	if r != nil {
		b = appendLogSafe(b, r.MethodName)
		b = append(b, ' ')
		b = appendLogSafe(b, r.Target)
		b = append(b, " HTTP/1."...)
		b = strconv.AppendInt(b, int64(r.Minor), 10)
	} else {
		b = append(b, '-')
	}
	b = append(b, "\" "...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, size, 10)
	b = append(b, " \""...)
	if r != nil && len(r.Referer) > 0 {
		b = appendLogSafe(b, r.Referer)
	} else {
		b = append(b, '-')
	}
	b = append(b, "\" \""...)
	if r != nil && len(r.UserAgent) > 0 {
		b = appendLogSafe(b, r.UserAgent)
	} else {
		b = append(b, '-')
	}
	return append(b, "\"\n"...)
}

// appendLogSafe escapes quotes, backslashes and non-printable bytes as
// nginx does (\xHH), so a client cannot forge log lines.
func appendLogSafe(b, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, ch := range s {
		if ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\' {
			b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
			continue
		}
		b = append(b, ch)
	}
	return b
}

// jsonTime is the JSON line's time: RFC 3339 with milliseconds, in the
// server's time zone.
const jsonTime = "2006-01-02T15:04:05.000Z07:00"

// appendJSONLine is LogJSON's line, keys always in this order:
//
//	{"time":"2026-12-06T13:45:01.123Z","remote_addr":"203.0.113.9","remote_port":4242,
//	 "method":"GET","path":"/index.html","query":"","protocol":"HTTP/1.1","status":200,
//	 "bytes":6,"duration_ms":0.052,"referer":"","user_agent":"curl/8.5.0","backend":"epoll"}
//
// remote_addr and remote_port are the client's, the PROXY header's with
// --proxy-protocol; path and query are as sent, still percent-encoded;
// bytes counts the body, as the combined format does; duration_ms runs
// from the request head's first byte to the response being made, not
// sent, by the loop's clock, which it reads once per pass: 0 for a
// request answered in the pass that read it (a cache hit), the wait for
// the file system or a script's output where there was one. A head that could not be
// parsed has empty method, path and protocol. Strings the client sent
// are escaped as encoding/json does (appendJSONString), so a line is
// always one valid JSON object, whatever the bytes.
func appendJSONLine(b []byte, c *Conn, r *Request, status int, size int64) []byte {
	l := c.l
	b = append(b, `{"time":"`...)
	b = l.now.AppendFormat(b, jsonTime)
	b = append(b, `","remote_addr":`...)
	var addr [64]byte
	if c.Remote.IsValid() {
		b = appendJSONString(b, c.Remote.Addr().AppendTo(addr[:0])) // an IPv6 zone is an interface's name
	} else {
		b = append(b, `""`...)
	}
	b = append(b, `,"remote_port":`...)
	b = strconv.AppendUint(b, uint64(c.Remote.Port()), 10)
	var method, path, query []byte
	minor := -1
	if r != nil {
		method, path, query, minor = r.MethodName, r.Path, r.Query, r.Minor
	}
	b = append(b, `,"method":`...)
	b = appendJSONString(b, method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, path)
	b = append(b, `,"query":`...)
	b = appendJSONString(b, query)
	b = append(b, `,"protocol":"`...)
	if minor >= 0 {
		b = append(b, "HTTP/1."...)
		b = strconv.AppendInt(b, int64(minor), 10)
	}
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, `,"duration_ms":`...)
	d := l.now.Sub(c.headStart)
	if c.headStart.IsZero() || d < 0 {
		d = 0
	}
	b = strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', 3, 64)
	var referer, agent []byte
	if r != nil {
		referer, agent = r.Referer, r.UserAgent
	}
	b = append(b, `,"referer":`...)
	b = appendJSONString(b, referer)
	b = append(b, `,"user_agent":`...)
	b = appendJSONString(b, agent)
	b = append(b, `,"backend":`...)
	b = appendJSONString(b, l.srv.backendName)
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string, byte for byte as
// encoding/json's Marshal writes a Go string (its appendString with
// escapeHTML, Go 1.26): ", \ and control bytes escaped (\b \f \n \r \t,
// the rest as \u00XX), <, > and & as \u003c \u003e \u0026, U+2028 and
// U+2029 as \u2028 \u2029, and each byte of invalid UTF-8 as \ufffd.
// TestAppendJSONString and FuzzAppendJSONString hold it to Marshal.
func appendJSONString(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if ch := s[i]; ch < utf8.RuneSelf {
			if jsonSafe(ch) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch ch {
			case '\\', '"':
				b = append(b, '\\', ch)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonSafe reports whether the ASCII byte ch goes into a JSON string as
// it is (encoding/json's htmlSafeSet): printable, and none of " \ < > &.
func jsonSafe(ch byte) bool {
	return ch >= 0x20 && ch != '"' && ch != '\\' && ch != '<' && ch != '>' && ch != '&'
}

// logWriter writes access log buffers on its own goroutine, so a slow
// disk or terminal never blocks a loop. A loop that finds the queue full
// keeps its buffer and tries again next second; a buffer that has grown
// to logBufMax meanwhile is dropped, its lines counted
// (Stats.LogDropped).
type logWriter struct {
	w    io.Writer
	ch   chan []byte
	done chan struct{}
}

// logQueue is how many loop buffers may wait for the writer.
const logQueue = 64

// logBufMax is the most a loop's buffer holds while the writer is stuck.
const logBufMax = 4 << 20

func newLogWriter(w io.Writer) *logWriter {
	lw := &logWriter{w: w, ch: make(chan []byte, logQueue), done: make(chan struct{})}
	go func() {
		defer close(lw.done)
		for b := range lw.ch {
			lw.w.Write(b)
		}
	}()
	return lw
}

// hand queues b for writing and returns the buffer to fill next, and how
// many lines it dropped.
func (lw *logWriter) hand(b []byte) ([]byte, int) {
	select {
	case lw.ch <- b:
		return make([]byte, 0, cap(b)), 0
	default:
		if len(b) >= logBufMax {
			// The writer is stuck: drop rather than grow without bound.
			return b[:0], bytes.Count(b, []byte{'\n'})
		}
		return b, 0
	}
}

// handLog hands the loop's buffer to the writer, counting what it drops.
func (l *Loop) handLog() {
	var dropped int
	l.logBuf, dropped = l.srv.log.hand(l.logBuf)
	l.Stats.LogDropped += uint64(dropped)
}

// close writes what is queued and reports whether it did by deadline:
// a log on a hung file system is left to its goroutine.
func (lw *logWriter) close(deadline time.Time) bool {
	close(lw.ch)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-lw.done:
		return true
	case <-t.C:
		return false
	}
}
