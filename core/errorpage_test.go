package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestErrorPages(t *testing.T) {
	page := "<h1>not here</h1>\n"
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "404.html"), []byte(page), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "err.txt"), []byte("error\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file.bin"), make([]byte, 100), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.html"), []byte(strings.Repeat("b", 200)), 0o644))
	var elog syncWriter
	srv, err := NewServer(Config{Dir: dir, MemBodyMax: 100, Limits: Limits{MaxRequestLine: 64}, ErrorLog: &elog,
		ErrorPages: map[int]string{404: "/404.html", 405: "/err.txt", 414: "/err.txt", 416: "/err.txt", 403: "/missing.html", 500: "/big.html"}})
	require.NoError(t, err)
	l := srv.NewLoop(0)
	t.Cleanup(func() { l.Close(); srv.Close() })

	for _, tc := range []struct {
		req    string
		answer string
	}{
		{req: "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n",
			answer: "HTTP/1.1 404 Not Found\r\nServer: twinloop\r\nDATE" +
				"Content-Type: text/html; charset=utf-8\r\nContent-Length: 18\r\n\r\n" + page},
		{req: "HEAD /nope HTTP/1.1\r\nHost: a\r\n\r\n",
			answer: "HTTP/1.1 404 Not Found\r\nServer: twinloop\r\nDATE" +
				"Content-Type: text/html; charset=utf-8\r\nContent-Length: 18\r\n\r\n"},
		{req: "GET /nope HTTP/1.0\r\n\r\n",
			answer: "HTTP/1.1 404 Not Found\r\nServer: twinloop\r\nDATE" +
				"Content-Type: text/html; charset=utf-8\r\nContent-Length: 18\r\nConnection: close\r\n\r\n" + page},
		{req: "DELETE / HTTP/1.1\r\nHost: a\r\n\r\n",
			answer: "HTTP/1.1 405 Method Not Allowed\r\nServer: twinloop\r\nDATE" +
				"Allow: GET, HEAD\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\n\r\nerror\n"},
		{req: "GET /" + strings.Repeat("x", 100) + " HTTP/1.1\r\nHost: a\r\n\r\n",
			answer: "HTTP/1.1 414 Request URI Too Long\r\nServer: twinloop\r\nDATE" +
				"Content-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\nConnection: close\r\n\r\nerror\n"},
		{req: "GET /file.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=500-\r\n\r\n",
			answer: "HTTP/1.1 416 Requested Range Not Satisfiable\r\nServer: twinloop\r\nDATE" +
				"Content-Range: bytes */100\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 6\r\n\r\nerror\n"},
	} {
		c := l.NewConn(netipNone)
		c.Feed([]byte(tc.req))
		mem, _ := drain(c)
		want := strings.Replace(tc.answer, "DATE", string(l.date.line), 1)
		assert.Equal(t, want, string(mem), tc.req)
		if strings.Contains(tc.answer, "Connection: close") {
			assert.Contains(t, []Action{ActClose, ActLinger}, c.Next(), tc.req)
		} else {
			assert.Equal(t, ActRead, c.Next(), "%q: the connection goes on", tc.req)
		}
		l.FreeConn(c)
	}

	// A page that is missing: the built-in one.
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /.hidden HTTP/1.1\r\nHost: a\r\n\r\n"))
	mem, _ := drain(c)
	assert.Contains(t, string(mem), "Content-Type: text/html\r\n")
	assert.True(t, strings.HasSuffix(string(mem), string(srv.lines.page[403])))
	l.FreeConn(c)
	require.Eventually(t, func() bool {
		return elog.String() == "twinloop: --error-page 403=/missing.html cannot be served (404 Not Found); the built-in page is sent instead (logged once)\n"
	}, 5*time.Second, 10*time.Millisecond, "logged to Config.ErrorLog: %q", elog.String())

	// A page above --mem-body-max is sent from its file, as a file is.
	c = l.NewConn(netipNone)
	c.respondError(&Request{Method: MethodGet, Minor: 1}, 500)
	o := c.Out()
	assert.Contains(t, string(o.Mem), "Content-Length: 200\r\n\r\n")
	assert.Equal(t, int64(200), o.N)
	l.FreeConn(c)
}

func TestErrorPagesRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		pages map[int]string
		says  string
	}{
		{pages: map[int]string{400: "/x.html"}, says: "--error-page 400=/x.html: 400 has no error page; give one of [403 404"},
		{pages: map[int]string{200: "/x.html"}, says: "200 has no error page"},
		{pages: map[int]string{404: "x.html"}, says: "give the URL path of a file inside --dir"},
		{pages: map[int]string{404: "/.x.html"}, says: "not hidden"},
		{pages: map[int]string{404: "/errors/"}, says: "not a directory"},
		{pages: map[int]string{404: "/../x.html"}, says: "inside --dir"},
	} {
		_, err := NewServer(Config{Dir: dir, ErrorPages: tc.pages})
		require.Error(t, err, tc.pages)
		assert.Contains(t, err.Error(), tc.says)
	}
}
