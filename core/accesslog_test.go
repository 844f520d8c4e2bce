package core

import (
	"bytes"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostile are strings a client may put in a request to forge or break a
// log line: quotes, backslashes, control bytes, HTML, the JavaScript
// line separators, invalid and overlong UTF-8, surrogates, a lone
// continuation byte, and a sequence cut short at the end.
var hostile = []string{
	"",
	"plain /index.html",
	`a"b\c`,
	`","status":200,"x":"`,
	"line\nbreak\r\n{\"forged\":1}",
	"\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f",
	"<script>&amp;</script>",
	"\u2028\u2029 \u2027\u202a",
	"é ü 日本 🙂",
	"\x80\xff\xfe",
	"\xc0\xaf overlong /",
	"\xed\xa0\x80 surrogate",
	"\xe6\x97 cut",
	"ends cut \xf0\x9f\x99",
	`\u0022 looks escaped \\"`,
}

// TestAppendJSONString: byte for byte what encoding/json writes for the
// same Go string, which decodes back (valid JSON) to what encoding/json
// makes of it.
func TestAppendJSONString(t *testing.T) {
	for _, s := range hostile {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		got := appendJSONString([]byte("x"), []byte(s))
		require.Equal(t, "x", string(got[:1]), "appends")
		assert.Equal(t, string(want), string(got[1:]), "%q", s)
		var back string
		require.NoError(t, json.Unmarshal(got[1:], &back), "%q", s)
		assert.Equal(t, strings.ToValidUTF8(s, "\ufffd") == s, back == s, "only invalid UTF-8 changes: %q", s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range hostile {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want, err := json.Marshal(string(s))
		require.NoError(t, err)
		if got := appendJSONString(nil, s); !bytes.Equal(want, got) {
			t.Fatalf("%q: got %s, encoding/json %s", s, got, want)
		}
	})
}

// jsonLine is LogJSON's line, decoded.
type jsonLine struct {
	Time       string  `json:"time"`
	RemoteAddr string  `json:"remote_addr"`
	RemotePort int     `json:"remote_port"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	Query      string  `json:"query"`
	Protocol   string  `json:"protocol"`
	Status     int     `json:"status"`
	Bytes      int64   `json:"bytes"`
	DurationMS float64 `json:"duration_ms"`
	Referer    string  `json:"referer"`
	UserAgent  string  `json:"user_agent"`
	Backend    string  `json:"backend"`
}

// decodeLines decodes each line of b as one JSON object with exactly
// jsonLine's keys.
func decodeLines(t *testing.T, b []byte) []jsonLine {
	t.Helper()
	var out []jsonLine
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		d := json.NewDecoder(strings.NewReader(line))
		d.DisallowUnknownFields()
		var j jsonLine
		require.NoError(t, d.Decode(&j), line)
		_, err := d.Token()
		require.ErrorIs(t, err, io.EOF, "one object per line: %s", line)
		var keys map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &keys))
		require.Len(t, keys, 13, line)
		out = append(out, j)
	}
	return out
}

// TestJSONLogLine: behind a PROXY header, one JSON object per response
// with the PROXY client's address and port, and the user agent and
// referer a client sent, hostile bytes and all, as encoding/json decodes
// them; a head that cannot be parsed is one object too.
func TestJSONLogLine(t *testing.T) {
	l, _ := newTestLoop(t, Config{ProxyProtocol: true, AccessLog: io.Discard, LogFormat: LogJSON, Backend: "test"})
	l.Tick(time.Date(2026, 12, 6, 13, 45, 1, 123e6, time.UTC))
	c := l.NewConn(balancer)
	agent := "a\"b\\c\t<&>\u2028 \x80\xff" // a field value may hold no other control byte
	referer := "http://x/\"}{\"status\":1"
	c.Feed(append(proxyV2TCP4(client4, front4), "GET /index.html?a=%22b HTTP/1.1\r\nHost: a\r\nUser-Agent: "+agent+"\r\nReferer: "+referer+"\r\n\r\n"+
		"GET /nothing HTTP/1.0\r\n\r\n"...))
	drain(c)
	lines := decodeLines(t, l.logBuf)
	require.Len(t, lines, 2, string(l.logBuf))
	want := jsonLine{Time: "2026-12-06T13:45:01.123Z", RemoteAddr: "203.0.113.7", RemotePort: 51000, Method: "GET", Path: "/index.html", Query: "a=%22b",
		Protocol: "HTTP/1.1", Status: 200, Bytes: 1500, Referer: referer, UserAgent: strings.ToValidUTF8(agent, "\ufffd"), Backend: "test"}
	// encoding/json replaces each invalid byte: two here.
	want.UserAgent = strings.Replace(want.UserAgent, "\ufffd", "\ufffd\ufffd", 1)
	assert.Equal(t, want, lines[0])
	assert.Equal(t, jsonLine{Time: want.Time, RemoteAddr: "203.0.113.7", RemotePort: 51000, Method: "GET", Path: "/nothing", Protocol: "HTTP/1.0",
		Status: 404, Bytes: lines[1].Bytes, Backend: "test"}, lines[1])

	l.logBuf = l.logBuf[:0]
	bad := l.NewConn(balancer)
	bad.Feed(append(proxyV2TCP4(client4, front4), "GET /\x00 HTTP/1.1\r\n\r\n"...))
	drain(bad)
	lines = decodeLines(t, l.logBuf)
	require.Len(t, lines, 1)
	assert.Equal(t, 400, lines[0].Status)
	assert.Equal(t, "", lines[0].Method)
}

// TestLogFormatChosenOnce: the format is the Server's from NewServer on;
// no access log, no line function.
func TestLogFormatChosenOnce(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	assert.Nil(t, l.srv.appendLog)
	l, _ = newTestLoop(t, Config{AccessLog: io.Discard})
	c := l.NewConn(netip.MustParseAddrPort("192.0.2.1:1234"))
	c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"))
	drain(c)
	assert.Regexp(t, `^192\.0\.2\.1 - - \[[^]]+\] "GET /index.html HTTP/1.1" 200 1500 "-" "-"\n$`, string(l.logBuf))
}

// TestLogDroppedCounted: a loop whose writer is stuck keeps its buffer
// up to logBufMax, then drops it and counts its lines.
func TestLogDroppedCounted(t *testing.T) {
	w := blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	l, _ := newTestLoop(t, Config{AccessLog: w})
	t.Cleanup(func() { close(w.release) }) // before the Server's Close, which waits for the writer
	line := []byte("x\n")
	now := time.Now()
	tick := func() {
		now = now.Add(time.Second)
		l.Tick(now)
	}
	l.logBuf = append(l.logBuf, line...)
	tick()
	<-w.entered // the writer holds the first buffer
	for range logQueue {
		l.logBuf = append(l.logBuf, line...)
		tick()
	}
	l.logBuf = append(l.logBuf, line...)
	tick()
	assert.Equal(t, uint64(0), l.Stats.LogDropped, "kept while small")
	assert.Equal(t, "x\n", string(l.logBuf), "kept for the next second")
	l.logBuf = append(l.logBuf, bytes.Repeat(line, logBufMax/2)...)
	tick()
	assert.Equal(t, uint64(logBufMax/2+1), l.Stats.LogDropped)
	assert.Empty(t, l.logBuf)
	l.Publish()
	st := l.srv.Stats()
	assert.Contains(t, st.String(), "log_dropped=")
}

// blockedWriter blocks every Write until release is closed, saying on
// entered that it did.
type blockedWriter struct{ entered, release chan struct{} }

func (w blockedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(p), nil
}
