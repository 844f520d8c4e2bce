package backend_test

// Request bodies on every backend: bodies that arrive in pieces, chunked
// bodies on static paths, and the clients that send what a server must
// not take for a request.

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// chunked frames body in chunks of at most n bytes, with a last chunk.
func chunked(body []byte, n int) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		k := min(n, len(body))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", k, body[:k])
		body = body[k:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// writePieces writes p in four pieces with pause between them.
func writePieces(t *testing.T, w io.Writer, p []byte, pause time.Duration) {
	t.Helper()
	step := (len(p) + 3) / 4
	for i := 0; i < len(p); i += step {
		if i > 0 {
			time.Sleep(pause)
		}
		_, err := w.Write(p[i:min(i+step, len(p))])
		require.NoError(t, err)
	}
}

// TestBodyInPiecesIsNotAHeadTimeout: a body that keeps arriving, in pieces
// further apart in total than the head timeout, is no reason for a 408, on
// a static path or to a script; the connection stays usable.
func TestBodyInPiecesIsNotAHeadTimeout(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"echo":  "printf 'Content-Type: application/octet-stream\\n\\n'\nexec cat\n",
		"quick": textHead + "echo hi\n", // answers without reading its stdin
	})
	cfg := core.Config{HeaderTimeout: time.Second, CGIDir: dir}
	body := bytes.Repeat([]byte("0123456789"), 20000) // 200000 bytes
	const pause = 600 * time.Millisecond              // 1.8 s in all
	eachBackendTimed(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
		cases := []struct {
			name, head string
			body       []byte
			status     int
			echo       bool
		}{
			{name: "static content-length", head: "POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n", body: body, status: 405},
			{name: "static chunked", head: "POST /index.html HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", body: chunked(body, 30000), status: 405},
			{name: "cgi content-length", head: "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n", body: body, status: 200, echo: true},
			{name: "cgi answers first", head: "POST /cgi-bin/quick HTTP/1.1\r\nHost: t\r\nContent-Length: 200000\r\n\r\n", body: body, status: 200},
			{name: "cgi chunked", head: "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", body: chunked(body, 30000), status: 200, echo: true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := servertest.Dial(t, srv.Addr)
				_, err := io.WriteString(c, tc.head)
				require.NoError(t, err)
				writePieces(t, c, tc.body, pause)
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
				resp, got := c.ReadResponse("POST")
				require.Equal(t, tc.status, resp.StatusCode)
				assert.False(t, resp.Close)
				if tc.echo {
					assert.True(t, bytes.Equal(body, got), "echoed %d bytes of %d", len(got), len(body))
				}
				resp, got = c.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, s.index, got)
			})
		}
	})
}

// TestBodyTimeout: a body that stops arriving gets 408 after the body
// timeout, as a head does after the head timeout.
func TestBodyTimeout(t *testing.T) {
	eachBackendTimed(t, core.Config{BodyTimeout: time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, head := range []string{
			"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly this",
			"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly this",
		} {
			c := servertest.Dial(t, srv.Addr)
			start := time.Now()
			_, err := io.WriteString(c, head)
			require.NoError(t, err)
			resp, _ := c.ReadResponse("POST")
			assert.Equal(t, 408, resp.StatusCode)
			assert.True(t, resp.Close)
			assert.True(t, c.Closed())
			// 1 s, checked once a second; far below the head timeout's 60 s.
			assert.Less(t, time.Since(start), 10*time.Second)
			c.Close() // the server lingers until then (blocking: the next client waits)
		}
	})
}

// TestChunkedBodyOnStaticPath: RFC 9112 §7 has every recipient parse the
// chunked coding. A chunked body on a static path is read and dropped
// within --max-body, then the request is answered and the connection kept;
// beyond the limit it gets 413. Bad chunk framing and TE with CL close.
func TestChunkedBodyOnStaticPath(t *testing.T) {
	eachBackend(t, core.Config{MaxBody: 1000}, func(t *testing.T, s *site, srv *servertest.Server) {
		keep := []struct {
			name, req string
			status    int
		}{
			{name: "get", req: "GET /style.css HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + string(chunked(bytes.Repeat([]byte("x"), 1000), 7)), status: 200},
			{name: "post", req: "POST /style.css HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", status: 405},
			{name: "empty", req: "POST /style.css HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 405},
			{name: "expect 100-continue", req: "POST /style.css HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n", status: 405},
		}
		for _, tc := range keep {
			t.Run(tc.name, func(t *testing.T) {
				c := servertest.Dial(t, srv.Addr)
				_, err := io.WriteString(c, tc.req)
				require.NoError(t, err)
				if strings.Contains(tc.req, "Expect") {
					interim := c.ReadRaw("POST")
					require.Equal(t, "HTTP/1.1 100 Continue", interim.Status)
					require.Empty(t, interim.Fields)
					io.WriteString(c, "3\r\nabc\r\n0\r\n\r\n")
				}
				// The next request is in the same write as the body's end.
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
				resp, body := c.ReadResponse("GET")
				require.Equal(t, tc.status, resp.StatusCode)
				assert.False(t, resp.Close)
				if tc.status == 200 {
					assert.Equal(t, "body{}\n", string(body))
				}
				resp, body = c.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, s.index, body)
			})
		}
		closes := []struct {
			name, req string
			status    int
		}{
			{name: "over the limit", req: "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" + string(chunked(bytes.Repeat([]byte("y"), 1001), 300)), status: 413},
			{name: "bad chunk size", req: "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", status: 400},
			{name: "bare lf", req: "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", status: 400},
			{name: "request line in the trailer", req: "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nGET /style.css HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", status: 400},
			{name: "gzip before chunked", req: "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", status: 501},
			{name: "te and cl", req: "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n", status: 400},
			{name: "content-length over the limit", req: "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n", status: 413},
		}
		for _, tc := range closes {
			t.Run(tc.name, func(t *testing.T) {
				c := servertest.Dial(t, srv.Addr)
				_, err := io.WriteString(c, tc.req)
				require.NoError(t, err)
				resp, _ := c.ReadResponse("POST")
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.True(t, resp.Close)
				assert.True(t, c.Closed(), "only one response, then the close")
				c.Close() // ends the server's linger at once (blocking serves one connection at a time)
				// The next client is served.
				c2 := servertest.Dial(t, srv.Addr)
				resp, body := c2.Get("/")
				require.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, s.index, body)
			})
		}
	})
}

// TestPipelinedBehindClose: requests pipelined behind Connection: close
// (and behind an HTTP/1.0 request) are not answered, and the response
// before them arrives whole.
func TestPipelinedBehindClose(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, first := range []string{
			"GET /mid.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
			"GET /mid.bin HTTP/1.0\r\n\r\n",
			"POST /mid.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello",
		} {
			c := servertest.Dial(t, srv.Addr)
			_, err := io.WriteString(c, first+"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
			require.NoError(t, err)
			resp, body := c.ReadResponse("GET")
			assert.True(t, resp.Close)
			if resp.StatusCode == 200 {
				assert.True(t, bytes.Equal(s.mid, body), "%d bytes of %d", len(body), len(s.mid))
			} else {
				assert.Equal(t, 405, resp.StatusCode)
			}
			rest, err := io.ReadAll(c.R)
			assert.Empty(t, rest, "nothing after the response that closes")
			assert.NoError(t, err, "a clean close, not a reset")
			c.Close() // ends the server's linger at once (blocking serves one connection at a time)
		}
	})
}
