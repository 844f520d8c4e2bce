package backend_test

// Static-file semantics over real sockets, on every backend: the RFC 9110
// §13 preconditions, multipart/byteranges read back by Go's mime/multipart,
// and --precompressed sidecars.

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

func TestPreconditions(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		first, _ := c.Do("GET", "/index.html", "")
		etag, lm := first.Header.Get("ETag"), first.Header.Get("Last-Modified")
		for _, tc := range []struct {
			fields string
			status int
		}{
			{fields: "If-Match: \"nope\"\r\n", status: 412},
			{fields: "If-Match: W/" + etag + "\r\n", status: 412},
			{fields: "If-Match: \"nope\", " + etag + "\r\n", status: 200},
			{fields: "If-Match: *\r\n", status: 200},
			{fields: "If-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\n", status: 412},
			{fields: "If-Unmodified-Since: " + lm + "\r\n", status: 200},
			{fields: "If-Match: " + etag + "\r\nIf-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\n", status: 200},
			{fields: "If-Match: \"nope\"\r\nIf-None-Match: " + etag + "\r\n", status: 412},
			{fields: "If-Match: " + etag + "\r\nIf-None-Match: " + etag + "\r\n", status: 304},
			{fields: "If-Unmodified-Since: " + lm + "\r\nRange: bytes=0-3\r\nIf-Range: " + etag + "\r\n", status: 206},
		} {
			resp, body := c.Do("GET", "/index.html", tc.fields)
			require.Equal(t, tc.status, resp.StatusCode, tc.fields)
			switch tc.status {
			case 412:
				assert.Equal(t, "text/html", resp.Header.Get("Content-Type"))
				assert.Contains(t, string(body), "<title>412 Precondition Failed</title>")
			case 200:
				assert.Equal(t, s.index, body)
			}
			resp, body = c.Do("HEAD", "/index.html", tc.fields)
			require.Equal(t, tc.status, resp.StatusCode, "HEAD "+tc.fields)
			assert.Empty(t, body)
		}
		// A 412 leaves the connection usable.
		_, body := c.Do("GET", "/style.css", "")
		assert.Equal(t, "body{}\n", string(body))
	})
}

// readParts reads a multipart/byteranges body with mime/multipart.
func readParts(t *testing.T, resp *http.Response, body []byte) (parts [][]byte, ranges []string) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/byteranges", mt)
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return parts, ranges
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		parts = append(parts, b)
		ranges = append(ranges, p.Header.Get("Content-Range"))
		assert.Equal(t, "application/octet-stream", p.Header.Get("Content-Type"))
	}
}

// multipartFromFiles: several ranges of a file, in the order asked, by
// GET and HEAD.
func multipartFromFiles(t *testing.T, c *servertest.Client, s *site) {
	for _, tc := range []struct {
		path string
		data []byte
	}{{path: "/mid.bin", data: s.mid}, {path: "/big.bin", data: s.big}} {
		size := int64(len(tc.data))
		// Three parts (one from two coalesced ranges), in the order asked.
		rg := "Range: bytes=50000-50099, 0-9, 10-19, -7\r\n"
		resp, body := c.Do("GET", tc.path, rg)
		require.Equal(t, 206, resp.StatusCode)
		assert.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"))
		assert.Empty(t, resp.Header.Get("Content-Range"))
		parts, ranges := readParts(t, resp, body)
		require.Len(t, parts, 3)
		assert.Equal(t, tc.data[50000:50100], parts[0])
		assert.Equal(t, tc.data[0:20], parts[1])
		assert.Equal(t, tc.data[size-7:], parts[2])
		assert.Equal(t, []string{
			fmt.Sprintf("bytes 50000-50099/%d", size), fmt.Sprintf("bytes 0-19/%d", size),
			fmt.Sprintf("bytes %d-%d/%d", size-7, size-1, size),
		}, ranges)

		// HEAD: the same header (the boundary aside), no body; the
		// next response on the connection proves the framing.
		head, hb := c.Do("HEAD", tc.path, rg)
		require.Equal(t, 206, head.StatusCode)
		assert.Empty(t, hb)
		assert.Equal(t, resp.Header.Get("Content-Length"), head.Header.Get("Content-Length"))
		assert.Regexp(t, `^multipart/byteranges; boundary=twinloop[0-9a-f]{16}$`, head.Header.Get("Content-Type"))
		assert.Equal(t, resp.Header.Get("ETag"), head.Header.Get("ETag"))
	}
}

// multipartToStalled: large parts from the file to a client that waits
// before it reads.
func multipartToStalled(t *testing.T, c *servertest.Client, s *site) {
	// Large parts from the file to a client that waits before it
	// reads: each part resumes after the socket buffer drains.
	fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000000-3999999,6000000-8999999\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
	c.WaitStalled()
	resp, body := c.ReadResponse("GET")
	require.Equal(t, 206, resp.StatusCode)
	parts, _ := readParts(t, resp, body)
	require.Len(t, parts, 2)
	assert.True(t, bytes.Equal(s.big[1000000:4000000], parts[0]))
	assert.True(t, bytes.Equal(s.big[6000000:9000000], parts[1]))
	_, body = c.ReadResponse("GET")
	assert.Equal(t, s.index, body, "the pipelined request after the multipart body")
}

// multipartFromMemory: ranges of a body in memory, and ranges that add up
// to more than the file.
func multipartFromMemory(t *testing.T, c *servertest.Client, s *site) {
	// From memory, with the range order kept.
	resp, body := c.Do("GET", "/index.html", "Range: bytes=0-1,5-6\r\n")
	require.Equal(t, 206, resp.StatusCode)
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/byteranges", mt)
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for _, want := range []struct {
		data []byte
		rng  string
	}{{data: s.index[0:2], rng: "bytes 0-1/1500"}, {data: s.index[5:7], rng: "bytes 5-6/1500"}} {
		p, err := mr.NextPart()
		require.NoError(t, err)
		b, _ := io.ReadAll(p)
		assert.Equal(t, want.data, b)
		assert.Equal(t, want.rng, p.Header.Get("Content-Range"))
		assert.Equal(t, "text/html; charset=utf-8", p.Header.Get("Content-Type"))
	}
	_, err = mr.NextPart()
	assert.Equal(t, io.EOF, err)

	// Ranges that add up to more than the file: the whole file.
	resp, body = c.Do("GET", "/index.html", "Range: bytes=0-,0-\r\n")
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, s.index, body)
}

func TestMultipartRanges(t *testing.T) {
	run := func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		multipartFromFiles(t, c, s)
		multipartToStalled(t, c, s)
		multipartFromMemory(t, c, s)
	}
	eachBackend(t, core.Config{}, run)
	// The other body and readiness paths: io_uring reading into a buffer
	// or splicing instead of sendfile, epoll level-triggered.
	for _, tc := range []struct {
		name, backend string
		o             backend.Options
	}{
		{name: "uring-body=read", backend: "uring", o: backend.Options{UringBody: uring.BodyRead}},
		{name: "uring-body=splice", backend: "uring", o: backend.Options{UringBody: uring.BodySplice}},
		{name: "epoll-trigger=level", backend: "epoll", o: backend.Options{EpollLevel: true}},
	} {
		for _, b := range backend.AllWith(tc.o) {
			if b.Name() != tc.backend {
				continue
			}
			t.Run(tc.name, func(t *testing.T) {
				s := makeSite(t)
				run(t, s, servertest.Start(t, b, core.Config{Dir: s.dir}, 1))
			})
		}
	}
}

func TestMaxRanges(t *testing.T) {
	eachBackend(t, core.Config{MaxRanges: 2}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		resp, body := c.Do("GET", "/index.html", "Range: bytes=0-1,3-4,6-7\r\n")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
		resp, _ = c.Do("GET", "/index.html", "Range: bytes=0-1,3-4\r\n")
		assert.Equal(t, 206, resp.StatusCode)
	})
}

func TestPrecompressed(t *testing.T) {
	cfg := core.Config{Precompressed: true, CacheControl: "public, max-age=60", CacheControlByExt: map[string]string{".css": "no-cache"}}
	eachBackend(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
		// A gzip sidecar too large for memory (sent from its fd) and a
		// small br one: Accept-Encoding picks.
		gz, brz, css := s.mid[:90<<10], s.mid[:3000], bytes.Repeat([]byte("p{}\n"), 2000)
		old := time.Now().Add(-time.Hour)
		for name, b := range map[string][]byte{"app.js": s.big[:300<<10], "app.js.gz": gz, "app.css": css, "app.css.br": brz} {
			p := filepath.Join(s.dir, name)
			require.NoError(t, os.WriteFile(p, b, 0o644))
			require.NoError(t, os.Chtimes(p, old, old))
		}
		c := servertest.Dial(t, srv.Addr)
		for _, tc := range []struct {
			path, ae, coding string
			body             []byte
		}{
			{path: "/app.js", ae: "gzip, deflate, br, zstd", coding: "gzip", body: gz},
			{path: "/app.js", ae: "br", body: s.big[:300<<10]},
			{path: "/app.js", ae: "", body: s.big[:300<<10]},
			{path: "/app.css", ae: "gzip, br", coding: "br", body: brz},
			{path: "/app.css", ae: "br;q=0", body: css},
		} {
			fields := ""
			if tc.ae != "" {
				fields = "Accept-Encoding: " + tc.ae + "\r\n"
			}
			resp, body := c.Do("GET", tc.path, fields)
			require.Equal(t, 200, resp.StatusCode)
			assert.True(t, bytes.Equal(tc.body, body), "%s %s: %d bytes", tc.path, tc.ae, len(body))
			assert.Equal(t, tc.coding, resp.Header.Get("Content-Encoding"), tc.ae)
			assert.Equal(t, "Accept-Encoding", resp.Header.Get("Vary"), tc.ae)
			assert.Equal(t, strconv.Itoa(len(tc.body)), resp.Header.Get("Content-Length"))

			nm, _ := c.Do("GET", tc.path, fields+"If-None-Match: "+resp.Header.Get("ETag")+"\r\n")
			assert.Equal(t, 304, nm.StatusCode)
			assert.Equal(t, "Accept-Encoding", nm.Header.Get("Vary"), "304 of "+tc.ae)
			assert.Equal(t, resp.Header.Get("Cache-Control"), nm.Header.Get("Cache-Control"))
		}
		resp, _ := c.Do("GET", "/app.css", "")
		assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		resp, _ = c.Do("GET", "/app.js", "")
		assert.Equal(t, "public, max-age=60", resp.Header.Get("Cache-Control"))

		// A range of the gzip representation, from its file.
		resp, body := c.Do("GET", "/app.js", "Accept-Encoding: gzip\r\nRange: bytes=70000-70009\r\n")
		require.Equal(t, 206, resp.StatusCode)
		assert.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
		assert.Equal(t, fmt.Sprintf("bytes 70000-70009/%d", len(gz)), resp.Header.Get("Content-Range"))
		assert.Equal(t, gz[70000:70010], body)

		// The sidecar by its own name: a gzip file, not an encoding.
		resp, body = c.Do("GET", "/app.js.gz", "Accept-Encoding: gzip\r\n")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "application/gzip", resp.Header.Get("Content-Type"))
		assert.Empty(t, resp.Header.Get("Content-Encoding"))
		assert.True(t, bytes.Equal(gz, body))
	})
}
