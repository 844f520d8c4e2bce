package servertest_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/internal/servertest"
)

// canned serves every connection reply, then closes it. It returns the
// address it listens on.
func canned(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, reply)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// stream is one response of each framing, in one write as a server that
// answers pipelined requests sends them; the last is delimited by the
// close. Each case reads one of them.
var stream = []struct {
	name, wire, method string
	code               int
	fields             []string
	body               string
	trailer            []string
}{
	{
		name: "content-length", method: "GET", code: 200, body: "hello",
		wire:   "HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 5\r\n\r\nhello",
		fields: []string{"Server: s", "Content-Length: 5"},
	},
	{
		name: "head", method: "HEAD", code: 200,
		wire:   "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
		fields: []string{"Content-Length: 5"},
	},
	{
		name: "304", method: "GET", code: 304,
		wire:   "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
		fields: []string{`ETag: "x"`, "Content-Length: 5"},
	},
	{
		name: "204", method: "GET", code: 204,
		wire: "HTTP/1.1 204 No Content\r\n\r\n",
	},
	{
		name: "100 continue", method: "POST", code: 100,
		wire: "HTTP/1.1 100 Continue\r\n\r\n",
	},
	{
		name: "chunked", method: "POST", code: 200, body: "abcdefghijklmnopq",
		wire:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n3;x=y\r\nabc\r\ne\r\ndefghijklmnopq\r\n0\r\nX-T: 1\r\n\r\n",
		fields:  []string{"Transfer-Encoding: chunked", "Set-Cookie: a=1", "Set-Cookie: b=2"},
		trailer: []string{"X-T: 1"},
	},
	{
		name: "close-delimited", method: "GET", code: 200, body: "up to\r\nthe close",
		wire:   "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nup to\r\nthe close",
		fields: []string{"Connection: close"},
	},
}

func wire() string {
	var all string
	for _, r := range stream {
		all += r.wire
	}
	return all
}

// TestReadRaw reads the stream exactly: every response's status line,
// fields in order, body, and nothing of the next one.
func TestReadRaw(t *testing.T) {
	c := servertest.Dial(t, canned(t, wire()))
	for _, want := range stream {
		got := c.ReadRaw(want.method)
		assert.Equal(t, want.code, got.Code, want.name)
		assert.Equal(t, want.wire[:len(got.Status)+2], got.Status+"\r\n", want.name)
		assert.Equal(t, want.fields, got.Fields, want.name)
		assert.Equal(t, want.body, string(got.Body), want.name)
		assert.Equal(t, want.trailer, got.Trailer, want.name)
	}
	assert.True(t, c.Closed())
}

// TestReadRawHeader: the fields by name, as net/http would give them.
func TestReadRawHeader(t *testing.T) {
	c := servertest.Dial(t, canned(t, stream[5].wire))
	got := c.ReadRaw("GET")
	assert.Equal(t, []string{"a=1", "b=2"}, got.Header.Values("set-cookie"))
	assert.Equal(t, "chunked", got.Header.Get("Transfer-Encoding"))
}

// TestReadResponse reads the same stream with net/http's parser: the
// method given decides whether a body follows.
func TestReadResponse(t *testing.T) {
	c := servertest.Dial(t, canned(t, wire()))
	for _, want := range stream {
		resp, body := c.ReadResponse(want.method)
		assert.Equal(t, want.code, resp.StatusCode, want.name)
		assert.Equal(t, want.body, string(body), want.name)
	}
	assert.True(t, c.Closed())
}

// TestReadRawRefuses what a server must not send, and a body cut short.
func TestReadRawRefuses(t *testing.T) {
	for _, tc := range []struct{ says, wire string }{
		{says: "bare LF", wire: "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n"},
		{says: "not a status line", wire: "HTTP/2 200 OK\r\n\r\n"},
		{says: "not a field line", wire: "HTTP/1.1 200 OK\r\nServer : s\r\n\r\n"},
		{says: "2 Content-Length fields", wire: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{says: "unexpected EOF", wire: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"},
		{says: "unexpected EOF", wire: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nabc"},
		{says: "unexpected EOF", wire: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"},
		{says: "unexpected EOF", wire: "HTTP/1.1 200 OK\r\nServer: s\r\n"},
		{says: "status line: unexpected EOF", wire: ""},
	} {
		c := servertest.Dial(t, canned(t, tc.wire))
		_, err := servertest.ReadRaw(c.R, "GET")
		assert.ErrorContains(t, err, tc.says, "%q", tc.wire)
	}
}

// TestClosed: a close is seen; a byte that comes instead is not a close.
func TestClosed(t *testing.T) {
	assert.True(t, servertest.Dial(t, canned(t, "")).Closed())
	assert.False(t, servertest.Dial(t, canned(t, "x")).Closed())
}

// TestDo: what Do and Get send.
func TestDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		br := bufio.NewReader(s)
		var heads string
		for range 2 {
			for {
				line, err := br.ReadString('\n')
				heads += line
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		got <- heads
	}()
	c := servertest.Dial(t, ln.Addr().String())
	resp, body := c.Do("HEAD", "/x?y", "Range: bytes=0-1\r\n")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Empty(t, body)
	_, err = io.ReadFull(c, make([]byte, 2)) // the body a HEAD must not have
	require.NoError(t, err)
	_, body = c.Get("/")
	assert.Equal(t, "ok", string(body))
	assert.Equal(t, "HEAD /x?y HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", <-got)
}

func TestSite(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hi", "a/b/c.txt": "c", "empty/": "ignored"})
	for name, want := range map[string]string{"index.html": "hi", "a/b/c.txt": "c"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(b))
	}
	ents, err := os.ReadDir(filepath.Join(dir, "empty"))
	require.NoError(t, err)
	assert.Empty(t, ents)

	dir = servertest.Site(t, map[string][]byte{"big.bin": make([]byte, 1<<20)})
	fi, err := os.Stat(filepath.Join(dir, "big.bin"))
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())
}

func TestScripts(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{"hi": "echo \"hi $1\"\n"})
	out, err := exec.Command(filepath.Join(dir, "hi"), "there").Output()
	require.NoError(t, err)
	assert.Equal(t, "hi there\n", string(out))
}
