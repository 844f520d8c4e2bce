package backend_test

// The integration suite: written once, run against every backend in
// backend.All() over real loopback sockets, like net/http's run(t, mode).
// A backend that cannot run here (io_uring disabled) is skipped with the
// reason.

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

const secret = "TOP-SECRET-OUTSIDE-THE-DOCROOT"

// site is a document root made for the tests, with a secret file beside it
// (outside) that no request may ever reach.
type site struct {
	dir   string
	index []byte
	big   []byte // 10 MiB, sent from the file
	mid   []byte // 100 KiB, above the in-memory threshold
}

func makeSite(t *testing.T) *site {
	t.Helper()
	s := &site{index: bytes.Repeat([]byte("<p>twinloop</p>\n"), 94)[:1500]}
	s.big, s.mid = siteBodies()
	top := servertest.Site(t, map[string][]byte{
		"www/index.html":     s.index,
		"www/style.css":      []byte("body{}\n"),
		"www/sub/index.html": []byte("sub index\n"),
		"www/noindex/":       nil,
		"www/big.bin":        s.big,
		"www/mid.bin":        s.mid,
		"www/.hidden":        []byte(secret),
		"secret.txt":         []byte(secret),
	})
	s.dir = filepath.Join(top, "www")
	require.NoError(t, os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(s.dir, "escape")))
	require.NoError(t, os.Symlink("../secret.txt", filepath.Join(s.dir, "sub", "up")))
	require.NoError(t, os.Symlink("index.html", filepath.Join(s.dir, "inside")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(s.dir, "fifo"), 0o644))
	return s
}

// siteBodies are big.bin and mid.bin, random bytes made once per process
// and shared, read-only, by every site: made per site, under the race
// detector, they were a measurable part of the suite's CPU.
var siteBodies = sync.OnceValues(func() (big, mid []byte) {
	big, mid = make([]byte, 10<<20), make([]byte, 100<<10)
	rand.Read(big)
	rand.Read(mid)
	return big, mid
})

// eachBackend runs fn as a subtest per backend, each with its own server.
func eachBackend(t *testing.T, cfg core.Config, fn func(t *testing.T, s *site, srv *servertest.Server)) {
	eachBackendLoops(t, cfg, 2, fn)
}

// eachBackendLoops is eachBackend with the number of loops. A config with
// a CGIDir skips, with the reason, the backends that cannot run scripts
// (backend.RunsCGI).
func eachBackendLoops(t *testing.T, cfg core.Config, loops int, fn func(t *testing.T, s *site, srv *servertest.Server)) {
	eachOf(t, suiteBackends(), cfg, loops, fn)
}

// eachBackendTimed is eachBackend for a test whose subject is one of the
// core's timers (the header, body, write and CGI timeouts, the PROXY
// header's deadline): it runs on each backend with its defaults, not again
// as "uring-features". Those features change how bytes reach the loop and
// leave it, which the rest of the suite covers with them on, not when a
// core deadline fires; each of these tests waits seconds for one, and the
// extra pass would add about 40 s to make test under the race detector.
func eachBackendTimed(t *testing.T, cfg core.Config, fn func(t *testing.T, s *site, srv *servertest.Server)) {
	eachOf(t, suiteBackends()[:len(backend.All())], cfg, 2, fn)
}

// eachOf runs fn as a subtest per backend of bs, each with its own server,
// in parallel (see parallel).
func eachOf(t *testing.T, bs []namedBackend, cfg core.Config, loops int, fn func(t *testing.T, s *site, srv *servertest.Server)) {
	for _, nb := range bs {
		b := nb.b
		t.Run(nb.name, func(t *testing.T) {
			parallel(t)
			if cfg.CGIDir != "" && !backend.RunsCGI(b) {
				t.Skipf("backend %s runs no CGI scripts (backend.RunsCGI)", b.Name())
			}
			s := makeSite(t)
			c := cfg
			c.Dir = s.dir
			srv := servertest.Start(t, b, c, loops)
			fn(t, s, srv)
		})
	}
}

// parallel runs t beside the other subtests of its parent when the
// parent's time is spent waiting for a timer (a timeout to fire, a held
// file system, a script), not moving bytes: the tests named in waits.
// Each subtest has its own server, site and sockets. A test that moves
// megabytes under the race detector keeps its subtests one at a time: on
// two CPUs, run together, they only take longer each, past their clients'
// deadlines, as do the shutdown tests that time how long a stop takes.
// scripts/test.sh sets -test.parallel, as these subtests mostly sleep.
func parallel(t *testing.T) {
	if parent, _, _ := strings.Cut(t.Name(), "/"); waits[parent] {
		t.Parallel()
	}
}

// waits names the tests whose subtests wait for timers, and share nothing
// of the process (its environment, its fd count, its threads).
var waits = map[string]bool{
	"TestHungMountServesCached":             true, // --fs-timeout
	"TestHungMountBodyRevalidated":          true,
	"TestHungMountBodies":                   true,
	"TestHungMountBodyAtFSTimeout":          true,
	"TestHungMountErrorPage":                true,
	"TestChangedAfterIdle":                  true, // two seconds idle
	"TestRevalidationServesOldEntry":        true, // a second's revalidation
	"TestRevalidationNotServedPastValid":    true,
	"TestFileSystemErrorsAnsweredAndLogged": true, // the error log's second
	"TestCGITimeout":                        true, // --cgi-timeout
	"TestCGIHalfCloseBeforeAnswer":          true, // scripts that sleep
	"TestCGIDoesNotBlockTheLoop":            true,
	"TestSlowReaderWriteTimeout":            true, // a reader paced at 100 ms
	"TestTrickledHeadTimesOut":              true, // --header-timeout
	"TestBodyInPiecesIsNotAHeadTimeout":     true, // a body paced to the timeout
	"TestProxyProtocolRefused":              true, // the PROXY header's deadline
	"TestBodyTimeout":                       true, // --body-timeout
	"TestTimeouts":                          true,
}

type namedBackend struct {
	name string
	b    core.Backend
}

// suiteBackends are the backends the suite runs on: each with its
// defaults, then io_uring with all its newer features on (allFeatures),
// as "uring-features".
func suiteBackends() []namedBackend {
	var all []namedBackend
	for _, b := range backend.All() {
		all = append(all, namedBackend{b.Name(), b})
	}
	for _, b := range backend.AllWith(backend.Options{UringFeatures: allFeatures}) {
		if b.Name() == "uring" {
			all = append(all, namedBackend{"uring-features", b})
		}
	}
	return all
}

// skipOneAtATime skips a test that cannot apply to the blocking backend,
// which serves one connection at a time (backend/blocking), with why.
func skipOneAtATime(t *testing.T, why string) {
	t.Helper()
	if strings.HasSuffix(t.Name(), "/blocking") {
		t.Skipf("the blocking backend serves one connection at a time: %s", why)
	}
}

func TestGetAndHead(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: test\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
		assert.Equal(t, "1500", resp.Header.Get("Content-Length"))
		assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		assert.Equal(t, "twinloop", resp.Header.Get("Server"))
		assert.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))
		fi, err := os.Stat(filepath.Join(s.dir, "index.html"))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf(`"%x-%x"`, fi.ModTime().Unix(), fi.Size()), resp.Header.Get("ETag"))
		assert.Equal(t, fi.ModTime().UTC().Format(http.TimeFormat), resp.Header.Get("Last-Modified"))
		date, err := http.ParseTime(resp.Header.Get("Date"))
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), date, 2*time.Second)
		assert.Empty(t, resp.Header.Get("Connection"))

		// HEAD: the same fields, no body: the next response on the same
		// connection starts right after the head.
		fmt.Fprintf(c, "HEAD /index.html HTTP/1.1\r\nHost: test\r\n\r\nGET /style.css HTTP/1.1\r\nHost: test\r\n\r\n")
		head, hbody := c.ReadResponse("HEAD")
		require.Equal(t, 200, head.StatusCode)
		assert.Empty(t, hbody)
		for _, k := range []string{"Content-Length", "Content-Type", "ETag", "Last-Modified", "Accept-Ranges"} {
			assert.Equal(t, resp.Header.Get(k), head.Header.Get(k), k)
		}
		css, cbody := c.ReadResponse("GET")
		assert.Equal(t, 200, css.StatusCode)
		assert.Equal(t, "body{}\n", string(cbody))
		assert.Equal(t, "text/css; charset=utf-8", css.Header.Get("Content-Type"))
	})
}

func TestExactBytes(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /sub/index.html HTTP/1.1\r\nHost: t\r\n\r\n")
		r := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 200 OK", r.Status)
		var names []string
		for _, f := range r.Fields {
			names = append(names, strings.SplitN(f, ":", 2)[0])
		}
		assert.Equal(t, []string{"Server", "Date", "Content-Type", "Content-Length", "Last-Modified", "ETag", "Accept-Ranges"}, names)
		assert.Equal(t, "sub index\n", string(r.Body))
	})
}

func TestKeepAliveAndPipelining(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		for i := 0; i < 3; i++ {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
			resp, body := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, s.index, body)
		}
		// Ten requests in one write, answered in order; a large body in the
		// middle makes the server send from the file between memory bodies.
		var req bytes.Buffer
		paths := []string{"/", "/style.css", "/sub/", "/mid.bin", "/nope", "/", "/style.css", "/mid.bin", "/sub/index.html", "/"}
		for _, p := range paths {
			fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", p)
		}
		_, err := c.Write(req.Bytes())
		require.NoError(t, err)
		for _, p := range paths {
			resp, body := c.ReadResponse("GET")
			switch p {
			case "/":
				assert.Equal(t, s.index, body, p)
			case "/style.css":
				assert.Equal(t, "body{}\n", string(body), p)
			case "/sub/", "/sub/index.html":
				assert.Equal(t, "sub index\n", string(body), p)
			case "/mid.bin":
				assert.Equal(t, s.mid, body, p)
			case "/nope":
				assert.Equal(t, 404, resp.StatusCode, p)
				continue
			}
			assert.Equal(t, 200, resp.StatusCode, p)
		}
	})
}

func TestByteByByte(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		req := "GET /index.html HTTP/1.1\r\nHost: t\r\nUser-Agent: slow\r\n\r\n"
		for i := 0; i < len(req); i++ {
			_, err := c.Write([]byte{req[i]})
			require.NoError(t, err)
			time.Sleep(time.Millisecond)
		}
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
	})
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name   string
		req    string
		status int
		closes bool
		header [2]string
	}{
		{name: "missing host", req: "GET / HTTP/1.1\r\n\r\n", status: 400, closes: true},
		{name: "garbage", req: "HELLO\r\n\r\n", status: 400, closes: true},
		{name: "uri too long", req: "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: t\r\n\r\n", status: 414, closes: true},
		{name: "header too large", req: "GET / HTTP/1.1\r\nHost: t\r\nX: " + strings.Repeat("b", 40000) + "\r\n\r\n", status: 431, closes: true},
		{name: "too many headers", req: "GET / HTTP/1.1\r\nHost: t\r\n" + strings.Repeat("X-A: 1\r\n", 101) + "\r\n", status: 431, closes: true},
		{name: "http/2.0", req: "GET / HTTP/2.0\r\nHost: t\r\n\r\n", status: 505, closes: true},
		{name: "cl and te", req: "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400, closes: true},
		{name: "two content-lengths", req: "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", status: 400, closes: true},
		{name: "obs-fold", req: "GET / HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n", status: 400, closes: true},
		{name: "host port not digits", req: "GET / HTTP/1.1\r\nHost: t:abc\r\n\r\n", status: 400, closes: true},
		{name: "gzip transfer-coding", req: "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", status: 501, closes: true},
		{name: "post", req: "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", status: 405, header: [2]string{"Allow", "GET, HEAD"}},
		{name: "delete", req: "DELETE /index.html HTTP/1.1\r\nHost: t\r\n\r\n", status: 405, header: [2]string{"Allow", "GET, HEAD"}},
		{name: "not found", req: "GET /nope.html HTTP/1.1\r\nHost: t\r\n\r\n", status: 404},
		{name: "file with slash", req: "GET /index.html/ HTTP/1.1\r\nHost: t\r\n\r\n", status: 404},
		{name: "dir without index", req: "GET /noindex/ HTTP/1.1\r\nHost: t\r\n\r\n", status: 403},
		{name: "dir without slash", req: "GET /sub?x=1 HTTP/1.1\r\nHost: t\r\n\r\n", status: 301, header: [2]string{"Location", "/sub/?x=1"}},
		{name: "hidden file", req: "GET /.hidden HTTP/1.1\r\nHost: t\r\n\r\n", status: 403},
		{name: "fifo", req: "GET /fifo HTTP/1.1\r\nHost: t\r\n\r\n", status: 403},
		{name: "options", req: "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", status: 204, header: [2]string{"Allow", "GET, HEAD, OPTIONS"}},
		// CONNECT is a valid request the server does not implement; what
		// follows it may be a tunnel's bytes, so the connection closes.
		{name: "connect", req: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", status: 405, closes: true, header: [2]string{"Allow", "GET, HEAD"}},
		{name: "authority-form for get", req: "GET example.com:443 HTTP/1.1\r\nHost: t\r\n\r\n", status: 400, closes: true},
		{name: "big body", req: "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999\r\n\r\n", status: 413, closes: true},
		{name: "chunked body", req: "GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 200},
	}
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := servertest.Dial(t, srv.Addr)
				_, err := io.WriteString(c, tc.req)
				require.NoError(t, err)
				resp, _ := c.ReadResponse("GET")
				assert.Equal(t, tc.status, resp.StatusCode)
				if tc.header[0] != "" {
					assert.Equal(t, tc.header[1], resp.Header.Get(tc.header[0]))
				}
				if tc.closes {
					assert.True(t, resp.Close, "Connection: close expected")
					assert.True(t, c.Closed(), "connection stays open after %d", tc.status)
					return
				}
				// The connection is still usable.
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
				next, body := c.ReadResponse("GET")
				assert.Equal(t, 200, next.StatusCode)
				assert.Equal(t, s.index, body)
			})
		}
	})
}

func TestBodyDiscarded(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		// A GET with a small body: the body is skipped, not taken for the
		// next request.
		fmt.Fprintf(c, "GET /style.css HTTP/1.1\r\nHost: t\r\nContent-Length: 20\r\n\r\nGET /nope HTTP/1.1\r\n")
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "body{}\n", string(body))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, body = c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
	})
}

func TestTraversal(t *testing.T) {
	targets := []string{
		"/../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E/secret.txt", "/sub/..%2f..%2fsecret.txt",
		"/%2e%2e%2fsecret.txt", "/..%5csecret.txt", "/..\\secret.txt", "/escape", "/sub/up",
		"/sub/../../secret.txt", "/%252e%252e/secret.txt", "/./../secret.txt", "//../secret.txt",
		"http://t/../secret.txt", "/sub/%2e%2e/%2e%2e/secret.txt", "/.hidden", "/%2ehidden", "/index.html%00",
	}
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "the test keeps each keep-alive connection open while it dials the next")
		for _, target := range targets {
			c := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target)
			resp, body := c.ReadResponse("GET")
			assert.NotContains(t, string(body), secret, target)
			assert.Contains(t, []int{400, 403, 404}, resp.StatusCode, target)
		}
		// A symlink that stays inside is served.
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /inside HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
	})
}

func TestConditionalAndRange(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		first, _ := c.ReadResponse("GET")
		etag, lm := first.Header.Get("ETag"), first.Header.Get("Last-Modified")

		check := func(req string, status int) (*http.Response, []byte) {
			t.Helper()
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n", "/index.html", req)
			resp, body := c.ReadResponse("GET")
			require.Equal(t, status, resp.StatusCode, req)
			return resp, body
		}
		resp, body := check("If-None-Match: "+etag+"\r\n", 304)
		assert.Empty(t, body)
		assert.Equal(t, etag, resp.Header.Get("ETag"))
		check("If-None-Match: \"x\", W/"+etag+"\r\n", 304)
		check("If-None-Match: *\r\n", 304)
		check("If-None-Match: \"other\"\r\n", 200)
		check("If-Modified-Since: "+lm+"\r\n", 304)
		check("If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\n", 200)
		// If-None-Match wins over If-Modified-Since.
		check("If-None-Match: \"other\"\r\nIf-Modified-Since: "+lm+"\r\n", 200)

		resp, body = check("Range: bytes=10-19\r\n", 206)
		assert.Equal(t, s.index[10:20], body)
		assert.Equal(t, "bytes 10-19/1500", resp.Header.Get("Content-Range"))
		_, body = check("Range: bytes=-5\r\n", 206)
		assert.Equal(t, s.index[1495:], body)
		_, body = check("Range: bytes=1490-\r\n", 206)
		assert.Equal(t, s.index[1490:], body)
		resp, _ = check("Range: bytes=5000-\r\n", 416)
		assert.Equal(t, "bytes */1500", resp.Header.Get("Content-Range"))
		resp, _ = check("Range: bytes=0-1,5-6\r\n", 206) // multipart: static_test.go
		assert.Contains(t, resp.Header.Get("Content-Type"), "multipart/byteranges; boundary=")
		_, body = check("Range: bytes=0-9\r\nIf-Range: \"stale\"\r\n", 200)
		assert.Equal(t, s.index, body)
		_, body = check("Range: bytes=0-9\r\nIf-Range: "+etag+"\r\n", 206)
		assert.Equal(t, s.index[:10], body)

		// A range of a file sent from disk goes out from the offset.
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=5000000-5999999\r\n\r\n")
		resp, body = c.ReadResponse("GET")
		require.Equal(t, 206, resp.StatusCode)
		assert.True(t, bytes.Equal(s.big[5000000:6000000], body))
	})
}

func TestHTTP10(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "keep-alive", resp.Header.Get("Connection"))
		assert.Equal(t, s.index, body)
		fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
		resp, body = c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.True(t, resp.Close, "Connection: close expected")
		assert.Equal(t, s.index, body)
		assert.True(t, c.Closed())

		c2 := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c2, "GET /style.css HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		resp, _ = c2.ReadResponse("GET")
		assert.True(t, resp.Close, "Connection: close expected")
		assert.True(t, c2.Closed())

		// Absolute-form target: the authority replaces Host.
		c3 := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c3, "GET http://example.com/style.css?v=2 HTTP/1.1\r\nHost: other\r\n\r\n")
		resp, body = c3.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "body{}\n", string(body))
	})
}

func TestLargeFileSlowReader(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, int64(len(s.big)), resp.ContentLength)
		// Read slowly at first, so the server meets a full socket buffer
		// and must resume on writability, then fast.
		got := make([]byte, 0, len(s.big))
		buf := make([]byte, 64<<10)
		for len(got) < len(s.big) {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			if len(got) < 2<<20 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		require.True(t, bytes.Equal(s.big, got), "10 MiB body differs")
		// Keep-alive still works after a file body.
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		r2, body := c.ReadResponse("GET")
		assert.Equal(t, 200, r2.StatusCode)
		assert.Equal(t, s.index, body)
	})
}

func TestManyConnections(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "the test needs 1000 connections served at once")
		const n = 1000
		conns := make([]*servertest.Client, 0, n)
		for i := 0; i < n; i++ {
			conns = append(conns, servertest.Dial(t, srv.Addr))
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, c := range conns {
			wg.Add(1)
			go func(c *servertest.Client) {
				defer wg.Done()
				for range 2 {
					if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
						errs <- err
						return
					}
					resp, err := http.ReadResponse(c.R, nil)
					if err != nil {
						errs <- err
						return
					}
					body, err := servertest.ReadBody(resp)
					if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, s.index) {
						errs <- fmt.Errorf("status %d, %d bytes, %v", resp.StatusCode, len(body), err)
						return
					}
				}
			}(c)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

func TestNetHTTPClient(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		tr := &http.Transport{MaxIdleConnsPerHost: 4}
		defer tr.CloseIdleConnections()
		cl := &http.Client{Transport: tr, Timeout: 20 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, tc := range []struct {
			path   string
			status int
			body   []byte
		}{
			{path: "/", status: 200, body: s.index},
			{path: "/mid.bin", status: 200, body: s.mid},
			{path: "/big.bin", status: 200, body: s.big},
			{path: "/sub", status: 301},
			{path: "/sub/", status: 200, body: []byte("sub index\n")},
			{path: "/missing", status: 404},
		} {
			resp, err := cl.Get("http://" + srv.Addr + tc.path)
			require.NoError(t, err, tc.path)
			body, err := servertest.ReadBody(resp)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode, tc.path)
			if tc.body != nil {
				assert.True(t, bytes.Equal(tc.body, body), tc.path)
			}
			assert.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"), tc.path)
		}
	})
}

func TestGracefulShutdown(t *testing.T) {
	eachBackend(t, core.Config{ShutdownTimeout: 10 * time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		idle := servertest.Dial(t, srv.Addr)
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		stopped := make(chan error, 1)
		go func() { stopped <- srv.Stop() }()
		// The response in flight finishes whole, and says nothing more.
		got, err := servertest.ReadBody(resp)
		require.NoError(t, err)
		require.True(t, bytes.Equal(s.big, got))
		select {
		case err := <-stopped:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after the last response")
		}
		// The idle connection was closed, and nothing listens any more.
		idle.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = idle.Read(make([]byte, 1))
		assert.Error(t, err)
		_, err = net.DialTimeout("tcp", srv.Addr, time.Second)
		assert.Error(t, err)
	})
}

func TestTimeouts(t *testing.T) {
	cfg := core.Config{HeaderTimeout: time.Second, KeepAlive: time.Second}
	eachBackend(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "the test expects an answer on one connection while another holds an unfinished head (and, after its 408, lingers)")
		slow := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(slow, "GET / HTTP/1.1\r\nHo")
		idle := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, _ := idle.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		start := time.Now()

		// An unfinished head gets 408 and a close after the header timeout.
		resp, _ = slow.ReadResponse("GET")
		assert.Equal(t, 408, resp.StatusCode)
		assert.True(t, resp.Close)
		assert.True(t, slow.Closed())
		// An idle keep-alive connection is closed after its timeout.
		idle.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := idle.R.ReadByte()
		assert.Equal(t, io.EOF, err)
		assert.Less(t, time.Since(start), 4*time.Second)
	})
}

func TestMaxConns(t *testing.T) {
	eachBackend(t, core.Config{MaxConns: 1}, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "it never holds two connections, so --max-conns has nothing to refuse")
		// Two loops, one connection each: of six, at most two are served;
		// the others are closed at once, not left hanging.
		var served, refused int
		var conns []net.Conn
		for range 6 {
			c := servertest.Dial(t, srv.Addr)
			conns = append(conns, c)
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
			resp, err := http.ReadResponse(c.R, nil)
			if err != nil {
				refused++
				continue
			}
			resp.Body.Close()
			served++
		}
		assert.LessOrEqual(t, served, 2)
		assert.GreaterOrEqual(t, refused, 4)
		for _, c := range conns {
			c.Close()
		}
		// Below the limit again, connections are served.
		require.Eventually(t, func() bool {
			c := servertest.Dial(t, srv.Addr)
			defer c.Close()
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
			resp, err := http.ReadResponse(c.R, nil)
			return err == nil && resp.StatusCode == 200
		}, 5*time.Second, 50*time.Millisecond)
	})
}

func TestAutoIndex(t *testing.T) {
	eachBackend(t, core.Config{AutoIndex: true}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, name := range []string{"b file.txt", `<x>&"q".txt`, "a.txt", ".secret"} {
			require.NoError(t, os.WriteFile(filepath.Join(s.dir, "noindex", name), []byte("x"), 0o644))
		}
		require.NoError(t, os.Mkdir(filepath.Join(s.dir, "noindex", "zdir"), 0o755))
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /noindex/ HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		page := string(body)
		assert.Contains(t, page, "<title>Index of /noindex/</title>")
		assert.NotContains(t, page, "<x>")
		assert.Contains(t, page, `<a href="%3Cx%3E&amp;%22q%22.txt">&lt;x&gt;&amp;&#34;q&#34;.txt</a>`)
		assert.Contains(t, page, `<a href="b%20file.txt">b file.txt</a>`)
		assert.NotContains(t, page, ".secret")
		// Directories first, then files by name.
		iz, ia, ib := strings.Index(page, "zdir/"), strings.Index(page, "a.txt"), strings.Index(page, "b file.txt")
		assert.True(t, iz < ia && ia < ib, page)
		// The root has an index.html, which wins.
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		_, body = c.ReadResponse("GET")
		assert.Equal(t, s.index, body)
	})
}

func TestFollowSymlinks(t *testing.T) {
	eachBackend(t, core.Config{FollowSymlinks: true}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		// Allowed by the operator: the symlink's target is served...
		fmt.Fprintf(c, "GET /escape HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, secret, string(body))
		// ...but ".." in the path still cannot climb.
		fmt.Fprintf(c, "GET /sub/../../secret.txt HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, _ = c.ReadResponse("GET")
		assert.Equal(t, 400, resp.StatusCode)
	})
}

func TestWriteTimeoutDropsStalledReader(t *testing.T) {
	eachBackend(t, core.Config{WriteTimeout: time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "a blocking sendfile waits out SO_SNDTIMEO and returns whatever room the "+
			"peer's growing receive buffer made, which counts as progress, so a one-second write "+
			"timeout does not drop a reader that stalls for 3.5 s here")
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		// Read nothing until the server counts the timeout (the loop
		// checks once a second, and publishes its counters at the next
		// tick), then find the response cut short.
		require.Eventually(t, func() bool { return srv.Core.Stats().Timeouts > 0 }, 10*time.Second, 10*time.Millisecond,
			"a reader stalled past --write-timeout is not dropped")
		got, err := servertest.ReadBody(resp)
		assert.Error(t, err, "a stalled reader must be dropped")
		assert.Less(t, len(got), len(s.big))
		// The server is fine.
		c2 := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c2, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
		r2, body := c2.ReadResponse("GET")
		assert.Equal(t, 200, r2.StatusCode)
		assert.Equal(t, s.index, body)
	})
}

// TestAblations runs the core behaviours through each backend switch
// that is not a default (backend.Options, the ablation flags):
// pipelining, bodies from memory and from the file, keep-alive, a 10 MiB
// body to a reader that cannot keep up, and a CGI script echoing a request
// body larger than a pipe.
func TestAblations(t *testing.T) {
	cgi := servertest.Scripts(t, map[string]string{
		"echo": "printf 'Content-Type: application/octet-stream\\n\\n'\nexec cat\n",
	})
	post := make([]byte, 300<<10)
	rand.Read(post)
	for _, tc := range []struct {
		flag    string
		backend string
		o       backend.Options
	}{
		{flag: "epoll-trigger=level", backend: "epoll", o: backend.Options{EpollLevel: true}},
		{flag: "uring-multishot=off", backend: "uring", o: backend.Options{UringOneShot: true}},
		{flag: "uring-batch=off", backend: "uring", o: backend.Options{UringSubmitEach: true}},
		{flag: "uring-body=read", backend: "uring", o: backend.Options{UringBody: uring.BodyRead}},
		{flag: "uring-enter=raw", backend: "uring", o: backend.Options{UringRawSubmit: true}},
		{flag: "uring-wait=spin", backend: "uring", o: backend.Options{UringWait: uring.WaitSpin}},
		{flag: "uring-wait=raw", backend: "uring", o: backend.Options{UringWait: uring.WaitRaw}},
		{flag: "uring-wait=block", backend: "uring", o: backend.Options{UringWait: uring.WaitBlock}},
		// io_uring's newer features (uring.Features), each alone, then
		// all of them at once; skip-send with bodies read into chunks,
		// whose headers go with steps linked behind them.
		{flag: "uring-reg-ring=on", backend: "uring", o: backend.Options{UringFeatures: uring.Features{RegRing: true}}},
		{flag: "uring-skip-send=on", backend: "uring", o: backend.Options{UringFeatures: uring.Features{SkipSend: true}, UringBody: uring.BodyRead}},
		{flag: "uring-recv-bundle=on", backend: "uring", o: backend.Options{UringFeatures: uring.Features{Bundle: true}}},
		{flag: "uring-buf-inc=on", backend: "uring", o: backend.Options{UringFeatures: uring.Features{BufInc: true}}},
		{flag: "uring-sqpoll=0", backend: "uring", o: backend.Options{UringFeatures: uring.Features{SQPoll: true}}},
		{flag: "uring-wait-region=on", backend: "uring", o: backend.Options{UringFeatures: uring.Features{WaitRegion: true}}},
		{flag: "uring-napi=50", backend: "uring", o: backend.Options{UringFeatures: uring.Features{NAPI: true, NAPIBusyPollUsec: 50}}},
		{flag: "uring-send-zc=1", backend: "uring", o: backend.Options{UringFeatures: uring.Features{SendZC: 1}}},
		{flag: "uring-fixed-files=on", backend: "uring", o: backend.Options{UringFeatures: uring.Features{FixedFiles: true}}},
		{flag: "uring-fixed-files=on,body=splice", backend: "uring", o: backend.Options{UringFeatures: uring.Features{FixedFiles: true}, UringBody: uring.BodySplice}},
		{flag: "uring-features=all", backend: "uring", o: backend.Options{UringFeatures: allFeatures}},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			var b core.Backend
			for _, x := range backend.AllWith(tc.o) {
				if x.Name() == tc.backend {
					b = x
				}
			}
			require.NotNil(t, b, tc.backend)
			s := makeSite(t)
			srv := servertest.Start(t, b, core.Config{Dir: s.dir, CGIDir: cgi, MaxBody: 1 << 20}, 1)
			c := servertest.Dial(t, srv.Addr)
			var req bytes.Buffer
			for range 10 {
				req.WriteString("GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
			}
			_, err := c.Write(req.Bytes())
			require.NoError(t, err)
			for range 10 {
				_, body := c.ReadResponse("GET")
				require.Equal(t, s.mid, body)
				_, body = c.ReadResponse("GET")
				require.Equal(t, s.index, body)
			}

			fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
			c.WaitStalled() // the socket buffers fill: the server must wait, then resume
			resp, body := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode)
			require.True(t, bytes.Equal(s.big, body), "10 MiB body differs")

			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", len(post))
			_, err = c.Write(post)
			require.NoError(t, err)
			resp, body = c.ReadResponse("POST")
			require.Equal(t, 200, resp.StatusCode)
			require.True(t, bytes.Equal(post, body), "echoed %d bytes of %d", len(body), len(post))

			_, body = c.Get("/")
			require.Equal(t, s.index, body, "keep-alive after it all")
		})
	}
}

// allFeatures turns on every one of io_uring's newer features. NAPI busy
// polling registers, but loopback's packets carry no NAPI id, so the
// ring's NAPI list stays empty and its waits poll nothing: here it checks
// only that the registration keeps every answer right (scripts/veth.sh is
// where it polls). SendZC at 1 byte sends zero-copy every body the Conn
// does not copy: the suite's memory bodies above 4 KiB and its file
// bodies' parts.
var allFeatures = uring.Features{RegRing: true, SkipSend: true, Bundle: true, BufInc: true, SQPoll: true, WaitRegion: true,
	NAPI: true, NAPIBusyPollUsec: 50, SendZC: 1, FixedFiles: true}

// TestBadRequestThenFresh is the adversarial client of issue 10: a
// request the server refuses with 400 and closes on, read once and closed
// at once (without waiting for the server's FIN), then a fresh connection
// with a valid request. What the server still does to the closed
// connection (its lingering shutdown, its close) must never reach the
// fresh one, which may get the same fd number.
func TestBadRequestThenFresh(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		bad := []string{
			"GET /index.html HTTP/1.1\r\n\r\n",             // no Host
			"GET /index.html HTTP/1.1\r\nHost : x\r\n\r\n", // space before the colon
		}
		lost := 0
		for i := range 400 {
			c := servertest.Dial(t, srv.Addr)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err := io.WriteString(c, bad[i%2])
			require.NoError(t, err)
			buf := make([]byte, 4096)
			n, err := c.Read(buf)
			require.NoError(t, err, "iteration %d: no 400", i)
			require.True(t, strings.HasPrefix(string(buf[:n]), "HTTP/1.1 400 "), "iteration %d: %q", i, buf[:n])
			c.Close()

			c = servertest.Dial(t, srv.Addr)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = io.WriteString(c, "GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
			require.NoError(t, err)
			resp, err := http.ReadResponse(c.R, &http.Request{Method: "GET"})
			if err != nil {
				lost++
				t.Logf("iteration %d: the fresh connection got no response: %v", i, err)
			} else {
				body, err := servertest.ReadBody(resp)
				assert.NoError(t, err, "iteration %d", i)
				assert.Equal(t, 200, resp.StatusCode, "iteration %d", i)
				assert.Equal(t, s.index, body, "iteration %d", i)
			}
			c.Close()
		}
		assert.Zero(t, lost, "fresh connections closed without a response, of 400")
	})
}

// TestRedirectLocationEncoded: the Location of a directory's redirect is
// percent-encoded, so that it names the same directory: a '?' or '#' in
// its name is not taken for a query or fragment, and a space, a non-ASCII
// byte or a CR LF never reaches the header raw.
func TestRedirectLocationEncoded(t *testing.T) {
	cases := []struct{ dir, target, location string }{
		{dir: "a?b", target: "/a%3Fb", location: "/a%3Fb/"},
		{dir: "h#x", target: "/h%23x?q=1", location: "/h%23x/?q=1"},
		{dir: "sp ace", target: "/sp%20ace", location: "/sp%20ace/"},
		{dir: "é", target: "/%C3%A9", location: "/%C3%A9/"},
		{dir: "cr\r\nlf", target: "/cr%0D%0Alf", location: "/cr%0D%0Alf/"},
		{dir: "100%", target: "/100%25", location: "/100%25/"},
		{dir: "sub/k=v;x,y@z", target: "/sub/k=v;x,y@z", location: "/sub/k=v;x,y@z/"},
	}
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		for _, tc := range cases {
			require.NoError(t, os.Mkdir(filepath.Join(s.dir, tc.dir), 0o755))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", tc.target)
			resp, _ := c.ReadResponse("GET")
			require.Equal(t, 301, resp.StatusCode, tc.dir)
			assert.Equal(t, tc.location, resp.Header.Get("Location"), tc.dir)
		}
	})
}

// TestAutoIndexListsWhatIsServed: a listing shows only entries a request
// would serve: a symlink that leads outside the root (or nowhere), and a
// FIFO, are left out, so the size and date of a file outside the root
// never show; a symlink inside shows its target's. With --follow-symlinks
// the outside target is served, and so listed.
func TestAutoIndexListsWhatIsServed(t *testing.T) {
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprint("follow=", follow), func(t *testing.T) {
			eachBackend(t, core.Config{AutoIndex: true, FollowSymlinks: follow}, func(t *testing.T, s *site, srv *servertest.Server) {
				nd := filepath.Join(s.dir, "noindex")
				require.NoError(t, os.Symlink(filepath.Join(filepath.Dir(s.dir), "secret.txt"), filepath.Join(nd, "out")))
				require.NoError(t, os.Symlink("../index.html", filepath.Join(nd, "in")))
				require.NoError(t, os.Symlink("nothing-here", filepath.Join(nd, "dangling")))
				require.NoError(t, syscall.Mkfifo(filepath.Join(nd, "pipe"), 0o644))
				c := servertest.Dial(t, srv.Addr)
				resp, body := c.Get("/noindex/")
				require.Equal(t, 200, resp.StatusCode)
				page := string(body)
				assert.Regexp(t, `<a href="in">in</a> +\S+ \S+ +1500\r\n`, page, "the target's size")
				assert.NotContains(t, page, "dangling")
				assert.NotContains(t, page, "pipe")
				if follow {
					assert.Regexp(t, fmt.Sprintf(`<a href="out">out</a> +\S+ \S+ +%d\r\n`, len(secret)), page)
				} else {
					assert.NotContains(t, page, `"out"`)
				}
				// What is listed is what is served.
				resp, _ = c.Get("/noindex/out")
				assert.Equal(t, map[bool]int{false: 403, true: 200}[follow], resp.StatusCode)
			})
		})
	}
}

// TestLoopFailureStopsTheServer: when one loop's wait fails, Serve does not
// serve on with fewer loops: it shuts every loop down and returns an error
// naming the loop (cmd/server then exits 1).
func TestLoopFailureStopsTheServer(t *testing.T) {
	var armed, fired atomic.Bool
	var target atomic.Int32 // the loop to fail: the second, or the one loop of blocking
	backend.InjectFault(func(loop int) syscall.Errno {
		if loop == int(target.Load()) && armed.Load() && !fired.Swap(true) {
			return syscall.EBADF
		}
		return 0
	})
	t.Cleanup(func() { backend.InjectFault(nil) })
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		armed.Store(false)
		fired.Store(false)
		target.Store(1)
		if strings.HasSuffix(t.Name(), "/blocking") {
			target.Store(0)
		}
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, _ := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		c.Close() // the blocking backend serves the next connection only then
		armed.Store(true)
		require.Eventually(t, func() bool {
			d, err := net.DialTimeout("tcp", srv.Addr, time.Second)
			if err == nil {
				d.Close()
			}
			return fired.Load() && err != nil
		}, 10*time.Second, 20*time.Millisecond, "the other loop stopped too: nothing listens")
		err := srv.Stop()
		var f *loops.Failed
		require.ErrorAs(t, err, &f)
		assert.Equal(t, int(target.Load()), f.Loop)
		assert.ErrorIs(t, err, syscall.EBADF)
	})
}
