package core

import (
	"bytes"
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

// TestErrorPageHeld: on a loop that loads off the loop and caches no
// file, the page a load found is held: sent while it is loaded again,
// and, once that load has been out longer than cacheValid (a hung file
// system), the built-in page is sent and why is logged once.
func TestErrorPageHeld(t *testing.T) {
	g := newGatedCalls()
	var elog syncWriter
	a := newAsyncLoop(t, Config{NoFileCache: true, ErrorLog: &elog, ErrorPages: map[int]string{404: "/sub/index.html"}}, g)
	defer a.close()
	page := "Content-Length: 4\r\n\r\nsub\n"
	notFound := func() string {
		t.Helper()
		c := a.NewConn(netipNone)
		defer a.FreeConn(c)
		c.Feed(get("/nope"))
		a.land(t, func() bool { return c.state != stateFile })
		mem, _ := drain(c)
		require.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 404 Not Found\r\n")), string(mem))
		return string(mem)
	}
	t0 := a.Now()
	assert.True(t, strings.HasSuffix(notFound(), page), "loaded as the loop started")

	open := g.gate("sub/index.html")
	defer open()
	a.Tick(t0.Add(time.Second)) // warmPages loads the page again
	assert.True(t, strings.HasSuffix(notFound(), page), "the held page, seen a second ago")

	a.Tick(t0.Add(3 * time.Second))
	assert.True(t, strings.HasSuffix(notFound(), string(a.srv.lines.page[404])), "the held page is too old: the built-in one")
	require.Eventually(t, func() bool {
		return strings.HasPrefix(elog.String(), "twinloop: --error-page 404=/sub/index.html cannot be served (its file has not loaded in ")
	}, 5*time.Second, 10*time.Millisecond, "logged to Config.ErrorLog: %q", elog.String())

	open()
	a.land(t, a.idle)
	a.Tick(t0.Add(4 * time.Second))
	a.land(t, a.idle)
	assert.True(t, strings.HasSuffix(notFound(), page), "loaded again")
	assert.Equal(t, 1, strings.Count(elog.String(), "\n"), "logged once")
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
