package core

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFallback: a GET or HEAD for a missing path gets the fallback file
// with 200; what exists, what is refused and other methods are
// unchanged.
func TestFallback(t *testing.T) {
	l, dir := newTestLoop(t, Config{Fallback: "/sub/index.html"})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file.txt"), []byte("file\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("secret"), 0o644))
	answer := func(req string) string { return answerOne(l, req) }
	const fb = "\r\n\r\nsub\n"
	for _, tc := range []struct {
		req, status, ends string
	}{
		{req: "GET /app/route HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: fb},
		{req: "GET /app/route/ HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: fb},
		{req: "GET /file.txt/below HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: fb}, // its parent is a file
		{req: "GET /file.txt/ HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: fb},
		{req: "GET /missing.js?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: fb},
		{req: "HEAD /app/route HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: "Accept-Ranges: bytes\r\n\r\n"}, // no body
		{req: "GET /file.txt HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: "\r\n\r\nfile\n"},
		{req: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", status: "200 OK", ends: strings.Repeat("a", 1500)},
		{req: "GET /sub HTTP/1.1\r\nHost: a\r\n\r\n", status: "301 Moved Permanently"},
		{req: "GET /empty/ HTTP/1.1\r\nHost: a\r\n\r\n", status: "403 Forbidden"},
		{req: "GET /.env HTTP/1.1\r\nHost: a\r\n\r\n", status: "403 Forbidden"},
		{req: "GET /.missing HTTP/1.1\r\nHost: a\r\n\r\n", status: "403 Forbidden"},
		{req: "GET /../../etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n", status: "400 Bad Request"},
		{req: "DELETE /app/route HTTP/1.1\r\nHost: a\r\n\r\n", status: "405 Method Not Allowed"},
		{req: "OPTIONS /app/route HTTP/1.1\r\nHost: a\r\n\r\n", status: "204 No Content"},
	} {
		s := answer(tc.req)
		assert.True(t, strings.HasPrefix(s, "HTTP/1.1 "+tc.status+"\r\n"), "%q: %q", tc.req, s)
		assert.True(t, strings.HasSuffix(s, tc.ends), "%q: %q", tc.req, s)
	}
	// The fallback's own validators: a 304 for its ETag.
	s := answer("GET /app/route HTTP/1.1\r\nHost: a\r\n\r\n")
	s = answer("GET /app/other HTTP/1.1\r\nHost: a\r\nIf-None-Match: " + etagOf(s) + "\r\n\r\n")
	assert.True(t, strings.HasPrefix(s, "HTTP/1.1 304 Not Modified\r\n"), s)

	// Gone since the start: 404.
	require.NoError(t, os.Remove(filepath.Join(dir, "sub", "index.html")))
	l.Tick(l.Now().Add(3e9))
	s = answer("GET /app/route HTTP/1.1\r\nHost: a\r\n\r\n")
	assert.True(t, strings.HasPrefix(s, "HTTP/1.1 404 Not Found\r\n"), s)
}

func TestFallbackRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	for _, tc := range []struct{ fallback, says string }{
		{fallback: "/index.html", says: "no such file or directory (give a file that exists inside --dir"},
		{fallback: "/sub", says: "a directory"},
		{fallback: "/sub/", says: "not a directory"},
		{fallback: "/.index.html", says: "not hidden"},
		{fallback: "index.html", says: "give the URL path of a file"},
		{fallback: "/../index.html", says: "give the URL path of a file"},
	} {
		_, err := NewServer(Config{Dir: dir, Fallback: tc.fallback})
		require.Error(t, err, tc.fallback)
		assert.Contains(t, err.Error(), "--fallback \""+tc.fallback+"\"")
		assert.Contains(t, err.Error(), tc.says, tc.fallback)
	}
}

// TestFallbackOffloaded: on a loop whose loads go to helpers, a request
// for a missing path waits for its own load, then for the fallback's,
// and is answered once, even when nothing is cached (--no-file-cache).
func TestFallbackOffloaded(t *testing.T) {
	for _, noCache := range []bool{false, true} {
		g := newGatedCalls()
		a := newAsyncLoop(t, Config{Fallback: "/slow.txt", NoFileCache: noCache}, g)
		c := a.NewConn(netipNone)
		c.Feed(get("/app/route"))
		a.land(t, func() bool { return c.state != stateFile })
		mem, _ := drain(c)
		assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")), string(mem))
		assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nslow body\n")), string(mem))
		assert.Equal(t, ActRead, c.Next())
		a.close()
	}
}
