package backend_test

// Issue 29's operator features on every backend, over real sockets:
// --header rules, --error-page and --fallback.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// fieldNames is the names of raw's fields, in the order sent.
func fieldNames(raw *servertest.Raw) []string {
	var names []string
	for _, f := range raw.Fields {
		names = append(names, strings.SplitN(f, ":", 2)[0])
	}
	return names
}

func TestHeaderRules(t *testing.T) {
	cfg := core.Config{Headers: []core.HeaderRule{
		{Pattern: "/**", Name: "Strict-Transport-Security", Value: "max-age=63072000"},
		{Pattern: "*.html", Name: "Content-Security-Policy", Value: "default-src 'self'"},
		{Pattern: "/sub/**", Name: "strict-transport-security", Value: "max-age=1"},
		{Pattern: "*.bin", Name: "X-Bin", Value: "yes"},
	}}
	eachBackend(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
		r := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 200 OK", r.Status)
		assert.Equal(t, []string{"Server", "Date", "Content-Type", "Content-Length", "Last-Modified", "ETag",
			"Strict-Transport-Security", "Content-Security-Policy", "Accept-Ranges"}, fieldNames(r))
		assert.Contains(t, r.Fields, "Strict-Transport-Security: max-age=63072000")
		assert.Contains(t, r.Fields, "Content-Security-Policy: default-src 'self'")
		assert.Equal(t, s.index, r.Body)
		etag := r.Header.Get("ETag")

		// The same fields on HEAD and 304; a later rule for a name wins.
		fmt.Fprintf(c, "HEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
		h := c.ReadRaw("HEAD")
		assert.Equal(t, r.Fields[2:], h.Fields[2:])
		assert.Empty(t, h.Body)
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n", etag)
		nm := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 304 Not Modified", nm.Status)
		assert.Equal(t, []string{"Server", "Date", "Last-Modified", "ETag", "Strict-Transport-Security", "Content-Security-Policy"}, fieldNames(nm))
		fmt.Fprintf(c, "GET /sub/ HTTP/1.1\r\nHost: t\r\n\r\n")
		sub := c.ReadRaw("GET")
		assert.Contains(t, sub.Fields, "strict-transport-security: max-age=1")
		assert.NotContains(t, sub.Fields, "Strict-Transport-Security: max-age=63072000")
		assert.Contains(t, sub.Fields, "Content-Security-Policy: default-src 'self'", "/sub/ is answered as /sub/index.html")
		assert.Equal(t, "sub index\n", string(sub.Body))

		// A body from the file (sendfile, splice) and a range of it.
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		big := c.ReadRaw("GET")
		assert.Contains(t, big.Fields, "X-Bin: yes")
		assert.Equal(t, s.big, big.Body)
		fmt.Fprintf(c, "GET /mid.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=10-19\r\n\r\n")
		rg := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 206 Partial Content", rg.Status)
		assert.Contains(t, rg.Fields, "X-Bin: yes")
		assert.Equal(t, s.mid[10:20], rg.Body)

		// None on an error, and the connection goes on.
		fmt.Fprintf(c, "GET /nope.html HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
		nf := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 404 Not Found", nf.Status)
		assert.Equal(t, []string{"Server", "Date", "Content-Type", "Content-Length"}, fieldNames(nf))
		css := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 200 OK", css.Status)
		assert.Contains(t, css.Fields, "Strict-Transport-Security: max-age=63072000")
		assert.NotContains(t, strings.Join(css.Fields, "\n"), "Content-Security-Policy")
		assert.Equal(t, "body{}\n", string(css.Body))
	})
}

func TestFallback(t *testing.T) {
	eachBackend(t, core.Config{Fallback: "/index.html"}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /app/users/42 HTTP/1.1\r\nHost: t\r\n\r\n")
		r := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 200 OK", r.Status)
		assert.Equal(t, []string{"Server", "Date", "Content-Type", "Content-Length", "Last-Modified", "ETag", "Accept-Ranges"}, fieldNames(r))
		assert.Equal(t, "text/html; charset=utf-8", r.Header.Get("Content-Type"))
		assert.Equal(t, s.index, r.Body)

		// HEAD, a range of it, then paths that exist or are refused, on
		// the same connection.
		fmt.Fprintf(c, "HEAD /app/ HTTP/1.1\r\nHost: t\r\n\r\n")
		h := c.ReadRaw("HEAD")
		assert.Equal(t, r.Fields[2:], h.Fields[2:])
		assert.Empty(t, h.Body)
		fmt.Fprintf(c, "GET /style.css/x HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\n\r\n")
		rg := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 206 Partial Content", rg.Status)
		assert.Equal(t, s.index[:10], rg.Body)
		for _, tc := range []struct{ req, status, body string }{
			{req: "GET /style.css", status: "HTTP/1.1 200 OK", body: "body{}\n"},
			{req: "GET /sub/", status: "HTTP/1.1 200 OK", body: "sub index\n"},
			{req: "GET /noindex/", status: "HTTP/1.1 403 Forbidden"},
			{req: "GET /.hidden", status: "HTTP/1.1 403 Forbidden"},
			{req: "GET /escape", status: "HTTP/1.1 403 Forbidden"},
			{req: "POST /app/x", status: "HTTP/1.1 405 Method Not Allowed"},
			{req: "GET /../secret.txt", status: "HTTP/1.1 400 Bad Request"},
		} {
			fmt.Fprintf(c, "%s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", tc.req)
			got := c.ReadRaw("GET")
			assert.Equal(t, tc.status, got.Status, tc.req)
			if tc.body != "" {
				assert.Equal(t, tc.body, string(got.Body), tc.req)
			}
			if got.Code == 400 {
				assert.True(t, c.Closed(), "400 closes, as before")
				break
			}
		}
	})
}

func TestErrorPages(t *testing.T) {
	page := []byte("sub index\n")
	cfg := core.Config{ErrorPages: map[int]string{404: "/sub/index.html", 405: "/style.css", 403: "/mid.bin", 431: "/style.css"}, Limits: core.Limits{MaxHeaderBytes: 1024}}
	eachBackend(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
		r := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 404 Not Found", r.Status)
		assert.Equal(t, []string{"Server", "Date", "Content-Type", "Content-Length"}, fieldNames(r))
		assert.Equal(t, "text/html; charset=utf-8", r.Header.Get("Content-Type"))
		assert.Equal(t, page, r.Body)

		// HEAD: the header alone; then 405 keeps its Allow; keep-alive
		// goes on after each.
		fmt.Fprintf(c, "HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\nDELETE / HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
		h := c.ReadRaw("HEAD")
		assert.Equal(t, r.Fields[2:], h.Fields[2:])
		assert.Empty(t, h.Body)
		m := c.ReadRaw("DELETE")
		assert.Equal(t, "HTTP/1.1 405 Method Not Allowed", m.Status)
		assert.Equal(t, []string{"Server", "Date", "Allow", "Content-Type", "Content-Length"}, fieldNames(m))
		assert.Equal(t, "text/css; charset=utf-8", m.Header.Get("Content-Type"))
		assert.Equal(t, "body{}\n", string(m.Body))
		ok := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 200 OK", ok.Status)

		// A page sent from its file (100 KiB: sendfile, splice), then the
		// connection goes on.
		fmt.Fprintf(c, "GET /noindex/ HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
		big := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 403 Forbidden", big.Status)
		assert.Equal(t, "application/octet-stream", big.Header.Get("Content-Type"))
		assert.Equal(t, s.mid, big.Body)
		again := c.ReadRaw("GET")
		assert.Equal(t, page, again.Body)

		// 431 closes the connection, as it did without a page.
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: %s\r\n\r\n", strings.Repeat("x", 2000))
		big431 := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large", big431.Status)
		assert.Equal(t, "close", big431.Header.Get("Connection"))
		assert.Equal(t, "body{}\n", string(big431.Body))
		assert.True(t, c.Closed())
	})
}

// TestErrorPagesUncached: a page is sent whatever the cache keeps of it:
// with --no-file-cache, and with a cache of two entries that the files
// served push both pages out of. io_uring, which loads a page off the
// loop, used to answer from the cache alone, and sent the built-in page
// every time (issue 37).
func TestErrorPagesUncached(t *testing.T) {
	pages := map[int]string{404: "/sub/index.html", 403: "/style.css"}
	for _, tc := range []struct {
		name string
		cfg  core.Config
	}{
		{name: "no-file-cache", cfg: core.Config{ErrorPages: pages, NoFileCache: true}},
		{name: "cache-entries=2", cfg: core.Config{ErrorPages: pages, CacheEntries: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, tc.cfg, func(t *testing.T, s *site, srv *servertest.Server) {
				c := servertest.Dial(t, srv.Addr)
				for i := range 20 {
					fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\nGET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\n"+
						"GET /nope%d HTTP/1.1\r\nHost: t\r\n\r\nGET /noindex/ HTTP/1.1\r\nHost: t\r\n\r\n", i)
					assert.Equal(t, s.index, c.ReadRaw("GET").Body)
					assert.Equal(t, s.mid, c.ReadRaw("GET").Body)
					nf := c.ReadRaw("GET")
					assert.Equal(t, "HTTP/1.1 404 Not Found", nf.Status)
					assert.Equal(t, "sub index\n", string(nf.Body), "round %d", i)
					fb := c.ReadRaw("GET")
					assert.Equal(t, "HTTP/1.1 403 Forbidden", fb.Status)
					assert.Equal(t, "body{}\n", string(fb.Body), "round %d", i)
				}
			})
		})
	}
}
