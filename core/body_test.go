package core

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnBodyTimeout: while a body makes progress the head timeout does
// not apply, however long the body takes; a body that stops gets 408 after
// BodyTimeout from its last progress.
func TestConnBodyTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		piece      func(i int) string
	}{
		{name: "content-length", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 400\r\n\r\n",
			piece: func(int) string { return strings.Repeat("x", 100) }},
		{name: "chunked", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
			piece: func(i int) string {
				if i == 3 {
					return "3\r\nabc\r\n0\r\n\r\n"
				}
				return "3\r\nabc\r\n"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newTestLoop(t, Config{HeaderTimeout: 10 * time.Second, BodyTimeout: 20 * time.Second})
			now := time.Now()
			l.Tick(now)
			c := l.NewConn(netipNone)
			c.Feed([]byte(tc.head))
			for i := range 4 {
				// Each piece comes later than the head timeout after the
				// head, within the body timeout of the last piece.
				now = now.Add(15 * time.Second)
				l.Tick(now)
				require.Equal(t, ActNone, c.CheckTimeout(), "piece %d", i)
				require.Equal(t, ActRead, c.Next(), "the answer waits for the body")
				c.Feed([]byte(tc.piece(i)))
			}
			mem, _ := drain(c)
			assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 405 Method Not Allowed\r\n")), string(mem))
			assert.NotContains(t, string(mem), "Connection: close")
			c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
			mem, _ = drain(c)
			assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")), string(mem))

			// Now a body that stops.
			c.Feed([]byte(tc.head + tc.piece(0)))
			now = now.Add(19 * time.Second)
			l.Tick(now)
			require.Equal(t, ActNone, c.CheckTimeout())
			now = now.Add(2 * time.Second)
			l.Tick(now)
			require.Equal(t, ActWrite, c.CheckTimeout())
			mem, _ = drain(c)
			assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 408 Request Timeout\r\n")), string(mem))
			assert.Contains(t, string(mem), "Connection: close")
			assert.Equal(t, uint64(1), l.Stats.Timeouts)
		})
	}
}

// TestConnChunkedStaticBody: a chunked body on a static path is decoded
// and dropped, then the request is answered; over the limit, 413; bad
// framing, 400; both close. The request behind it is answered in order.
func TestConnChunkedStaticBody(t *testing.T) {
	l, _ := newTestLoop(t, Config{MaxBody: 100})
	body := strings.Repeat("5\r\nhello\r\n", 20) + "0\r\n\r\n" // 100 bytes
	c := l.NewConn(netipNone)
	req := "GET /sub/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body + "GET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n"
	for i := range len(req) { // a byte at a time
		c.Feed([]byte{req[i]})
		if c.Next() == ActWrite {
			require.Greater(t, i, len(req)-60, "answered before the body ended")
		}
	}
	mem, _ := drain(c)
	assert.Equal(t, 2, bytes.Count(mem, []byte("HTTP/1.1 200 OK\r\n")), string(mem))
	assert.Equal(t, 2, bytes.Count(mem, []byte("sub\n")))
	assert.Equal(t, ActRead, c.Next())

	for _, tc := range []struct {
		name, body string
		status     string
	}{
		{name: "over the limit", body: body[:len(body)-5] + "1\r\nx\r\n0\r\n\r\n", status: "413"},
		{name: "bad size", body: "5x\r\nhello\r\n0\r\n\r\n", status: "400"},
		{name: "no crlf after data", body: "5\r\nhelloX\r\n0\r\n\r\n", status: "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := l.NewConn(netipNone)
			c.Feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + tc.body + "GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
			mem, _ := drain(c)
			assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 "+tc.status+" ")), string(mem))
			assert.Equal(t, 1, bytes.Count(mem, []byte("HTTP/1.1 ")), "nothing after the error")
			assert.Contains(t, string(mem), "Connection: close")
			assert.Equal(t, ActLinger, c.Next())
		})
	}
}

// TestConnExpectContinue: a static request with Expect: 100-continue gets
// 100 Continue, then its answer once the body is in. A request answered
// before its body was asked for (a refused script) closes instead of
// taking what follows for a body, which the client may never send.
func TestConnExpectContinue(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"))
	mem, _ := drain(c)
	assert.Equal(t, "HTTP/1.1 100 Continue\r\n\r\n", string(mem))
	c.Feed([]byte("ping"))
	mem, _ = drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 405 ")), string(mem))
	assert.Equal(t, ActRead, c.Next())

	r := Request{ContentLength: 4, Expect100: true}
	c.startBody(&r, nil)
	assert.NotEqual(t, stateBody, c.state)
	assert.Equal(t, endLinger, c.end)
}

// TestConnBodyLimitZero: a limit of "none" (a negative MaxBody,
// --max-body 0) refuses every body, of either framing.
func TestConnBodyLimitZero(t *testing.T) {
	l, _ := newTestLoop(t, Config{MaxBody: -1})
	for _, req := range []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
	} {
		c := l.NewConn(netipNone)
		c.Feed([]byte(req))
		mem, _ := drain(c)
		assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 413 ")), string(mem))
	}
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"))
	mem, _ := drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 ")), "no body is not a body")
}
