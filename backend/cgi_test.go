package backend_test

// CGI through every backend that can run it: small POSIX sh scripts
// written into a temporary CGI directory, real sockets, real processes.

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// textHead is the header most scripts start with.
const textHead = "printf 'Content-Type: text/plain\\n\\n'\n"

// pidFile waits for a script to write its pid (its process group's id),
// or that of something it started, into dir/name.
func pidFile(t *testing.T, dir, name string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, 10*time.Second, 10*time.Millisecond, "the script did not write %s", name)
	return pid
}

// groupAlive reports whether any process of process group pgid is left,
// zombies included.
func groupAlive(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pid == pgid {
			return true
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// groupRunning reports whether any process of process group pgid is
// left that is not a zombie: a killed script's children are reaped by
// init, which may take its time (here, up to a second and a half).
func groupRunning(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if len(f) > 2 && f[0] != "Z" && (e.Name() == strconv.Itoa(pgid) || f[2] == strconv.Itoa(pgid)) {
			return true
		}
	}
	return false
}

func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !groupAlive(pgid) }, 10*time.Second, 20*time.Millisecond,
		"process group %d is still there", pgid)
}

func TestCGIEnv(t *testing.T) {
	t.Setenv("TWINLOOP_SERVER_SECRET", "must-not-leak")
	dir := servertest.Scripts(t, map[string]string{
		// The environment the script was started with, exactly.
		"env": textHead + "cat /proc/$$/environ\n",
	})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		_, port, _ := net.SplitHostPort(srv.Addr)
		_, clientPort, _ := net.SplitHostPort(c.LocalAddr().String())
		fmt.Fprintf(c, "GET /cgi-bin/env/extra/p%%20q/?a=1&b=%%20 HTTP/1.1\r\n"+
			"Host: test.example:8080\r\n"+
			"X-Custom: one\r\nX-Custom: two\r\nCookie: a=1\r\nCookie: b=2\r\n"+
			"Proxy: http://evil.example:3128/\r\n"+ // httpoxy
			"Path: /evil\r\nLD_PRELOAD: /evil.so\r\nX_Under: u\r\nGATEWAY-INTERFACE: evil\r\n"+
			"Authorization: Basic c2VjcmV0\r\nContent-Type: text/x-test\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode, string(body))
		env := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(string(body), "\x00"), "\x00") {
			k, v, ok := strings.Cut(kv, "=")
			require.True(t, ok, kv)
			env[k] = v
		}
		want := map[string]string{
			"PATH":              "/usr/local/bin:/usr/bin:/bin",
			"GATEWAY_INTERFACE": "CGI/1.1",
			"SERVER_SOFTWARE":   "twinloop",
			"SERVER_PROTOCOL":   "HTTP/1.1",
			"SERVER_NAME":       "test.example",
			"SERVER_PORT":       port,
			"REQUEST_METHOD":    "GET",
			"SCRIPT_NAME":       "/cgi-bin/env",
			"PATH_INFO":         "/extra/p q/",
			"QUERY_STRING":      "a=1&b=%20",
			"CONTENT_TYPE":      "text/x-test",
			"REMOTE_ADDR":       "127.0.0.1",
			"REMOTE_PORT":       clientPort,
			"HTTP_HOST":         "test.example:8080",
			"HTTP_X_CUSTOM":     "one, two",
			"HTTP_COOKIE":       "a=1; b=2",
			"HTTP_PATH":         "/evil",
			// A header can only ever make an HTTP_ variable.
			"HTTP_GATEWAY_INTERFACE": "evil",
		}
		assert.Equal(t, want, env, "nothing else: no HTTP_PROXY, no credentials, no names with '_', nothing of the server's own environment")
	})
}

// postChunked posts body to the echo script in chunks of growing sizes,
// written in small pieces so that chunk lines split across reads.
func postChunked(t *testing.T, c *servertest.Client, body []byte) {
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
	for rest, n := body, 1; len(rest) > 0; n = n*3 + 1 {
		k := min(n, len(rest))
		fmt.Fprintf(&req, "%x;ext=\"v\"\r\n", k)
		req.Write(rest[:k])
		req.WriteString("\r\n")
		rest = rest[k:]
	}
	req.WriteString("0\r\nX-Trailer: t\r\n\r\n")
	// In small writes, so that chunk lines split across reads.
	for b := req.Bytes(); len(b) > 0; {
		k := min(len(b), 7919)
		_, err := c.Write(b[:k])
		require.NoError(t, err)
		b = b[k:]
	}
	resp, got := c.ReadResponse("POST")
	require.Equal(t, 200, resp.StatusCode)
	assert.True(t, bytes.Equal(body, got), "echoed %d bytes of %d", len(got), len(body))
	// No CONTENT_LENGTH: the length of a chunked body is known only at its end.
	fmt.Fprintf(c, "POST /cgi-bin/len HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	_, got = c.ReadResponse("POST")
	assert.Equal(t, "", string(got))
}

// postTooLarge: a body past --max-body is refused, by its Content-Length
// or, chunked, once it passes the limit.
func postTooLarge(t *testing.T, addr string) {
	c := servertest.Dial(t, addr)
	fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", 2<<20)
	resp, _ := c.ReadResponse("POST")
	assert.Equal(t, 413, resp.StatusCode)
	assert.True(t, resp.Close)

	// Chunked: refused once it passes the limit, here before the
	// script (which reads all its stdin first) wrote anything.
	c = servertest.Dial(t, addr)
	fmt.Fprintf(c, "POST /cgi-bin/sink HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	go func() {
		for range 40 {
			if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return
			}
		}
	}()
	resp, _ = c.ReadResponse("POST")
	assert.Equal(t, 413, resp.StatusCode)
	assert.True(t, resp.Close)
}

func TestCGIPostBody(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"echo": "printf 'Content-Type: application/octet-stream\\n\\n'\nexec cat\n",
		"len":  textHead + "printf '%s' \"$CONTENT_LENGTH\"\n",
		"sink": "cat >/dev/null\n" + textHead,
	})
	body := make([]byte, 300<<10) // beyond a pipe's 64 KiB and the stdin chunk
	rand.Read(body)
	eachBackend(t, core.Config{CGIDir: dir, MaxBody: 1 << 20}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		t.Run("content-length", func(t *testing.T) {
			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", len(body))
			_, err := c.Write(body)
			require.NoError(t, err)
			resp, got := c.ReadResponse("POST")
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
			assert.True(t, bytes.Equal(body, got), "echoed %d bytes of %d", len(got), len(body))
			fmt.Fprintf(c, "POST /cgi-bin/len HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
			_, got = c.ReadResponse("POST")
			assert.Equal(t, "5", string(got))
		})
		t.Run("chunked", func(t *testing.T) {
			postChunked(t, c, body)
		})
		t.Run("expect 100-continue", func(t *testing.T) {
			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
			interim := c.ReadRaw("POST")
			require.Equal(t, "HTTP/1.1 100 Continue", interim.Status)
			require.Empty(t, interim.Fields)
			fmt.Fprintf(c, "ping")
			_, got := c.ReadResponse("POST")
			assert.Equal(t, "ping", string(got))
		})
		t.Run("too large", func(t *testing.T) {
			postTooLarge(t, srv.Addr)
		})
		t.Run("http/1.0 and half-close", func(t *testing.T) {
			// HTTP/1.0 closes after the answer, but the body is still read.
			c := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.0\r\nContent-Length: %d\r\n\r\n", len(body))
			_, err := c.Write(body)
			require.NoError(t, err)
			// The client says it is done sending: the answer still comes.
			require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
			resp, got := c.ReadResponse("POST")
			require.Equal(t, 200, resp.StatusCode)
			assert.True(t, bytes.Equal(body, got), "echoed %d bytes of %d", len(got), len(body))
			assert.True(t, c.Closed())
		})
		t.Run("truncated", func(t *testing.T) {
			// The peer closes its side before the whole body: the script,
			// which would wait for the rest, is killed.
			c := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly this")
			require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
			// echo prints its header before it reads stdin, so the start of
			// a response may come first; then the connection must end.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.ReadAll(c.R)
			if ne, ok := err.(net.Error); ok {
				assert.False(t, ne.Timeout(), "the connection stays open")
			}
		})
		t.Run("bad chunk", func(t *testing.T) {
			c := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
			resp, _ := c.ReadResponse("POST")
			assert.Equal(t, 400, resp.StatusCode)
			assert.True(t, c.Closed())
		})
	})
}

// TestCGIDoesNotBlockTheLoop: while a script sleeps, the same (single)
// loop goes on serving other clients.
func TestCGIDoesNotBlockTheLoop(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{"slow": "sleep 2\n" + textHead + "echo done\n"})
	eachBackendLoops(t, core.Config{CGIDir: dir}, 1, func(t *testing.T, s *site, srv *servertest.Server) {
		slow := servertest.Dial(t, srv.Addr)
		done := make(chan string, 1)
		fmt.Fprintf(slow, "GET /cgi-bin/slow HTTP/1.1\r\nHost: t\r\n\r\n")
		go func() {
			resp, err := http.ReadResponse(slow.R, nil)
			if err != nil {
				done <- err.Error()
				return
			}
			b, _ := servertest.ReadBody(resp)
			done <- string(b)
		}()
		c := servertest.Dial(t, srv.Addr)
		for i := range 20 {
			resp, body := c.Get("/")
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, s.index, body)
			c2 := servertest.Dial(t, srv.Addr) // new connections are accepted too
			resp, _ = c2.Get("/style.css")
			require.Equal(t, 200, resp.StatusCode, i)
			c2.Close()
		}
		select {
		case got := <-done:
			t.Fatalf("the script answered (%q) before 40 static requests were served: the loop waited for it", got)
		default:
		}
		select {
		case got := <-done:
			assert.Equal(t, "done\n", got)
		case <-time.After(15 * time.Second):
			t.Fatal("the slow script never answered")
		}
	})
}

func TestCGITimeout(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"silent":  "echo $$ > silent.pid\nsleep 30\n",
		"started": "echo $$ > started.pid\n" + textHead + "echo partial\nsleep 30\n",
	})
	eachBackendTimed(t, core.Config{CGIDir: dir, CGITimeout: time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		os.Remove(filepath.Join(dir, "silent.pid"))
		os.Remove(filepath.Join(dir, "started.pid"))
		c := servertest.Dial(t, srv.Addr)
		resp, _ := c.Get("/cgi-bin/silent")
		assert.Equal(t, 504, resp.StatusCode)
		assert.True(t, resp.Close)
		assert.True(t, c.Closed())
		requireGroupGone(t, pidFile(t, dir, "silent.pid"))

		// Once the answer has begun, only closing can tell the client.
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/started HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		got, err := servertest.ReadBody(resp)
		assert.Error(t, err, "a cut-short chunked body must not look complete")
		assert.Equal(t, "partial\n", string(got))
		requireGroupGone(t, pidFile(t, dir, "started.pid"))
	})
}

func TestCGIFailures(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"exit3":     "exit 3\n",
		"segv":      "kill -SEGV $$\n",
		"nocolon":   "printf 'Content-Type text/plain\\n\\nx'\n",
		"barecr":    "printf 'Content-Type: text/plain\\rX-Injected: 1\\n\\nx'\n",
		"space":     "printf 'Content-Type : text/plain\\n\\nx'\n",
		"fold":      "printf 'Content-Type: text/plain\\n X-More: 1\\n\\nx'\n",
		"noblank":   "while :; do printf 'X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\n'; done\n",
		"nocgi":     "printf 'X-Only: 1\\n\\nx'\n",
		"badstatus": "printf 'Status: 99 Weird\\n\\nx'\n",
		"relative":  "printf 'Location: elsewhere\\n\\n'\n",
		"halfhead":  "printf 'Content-Type: text/plain\\n'\n",
	})
	eachBackend(t, core.Config{CGIDir: dir, CGITimeout: 5 * time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		for _, name := range []string{"exit3", "segv", "nocolon", "barecr", "space", "fold", "noblank", "nocgi", "badstatus", "relative", "halfhead"} {
			resp, body := c.Get("/cgi-bin/" + name)
			assert.Equal(t, 502, resp.StatusCode, name)
			assert.Empty(t, resp.Header.Get("X-Injected"), name)
			assert.NotContains(t, string(body), "X-Filler", name)
			// The connection goes on.
			resp, body = c.Get("/style.css")
			require.Equal(t, 200, resp.StatusCode, name)
			require.Equal(t, "body{}\n", string(body), name)
		}
		// A request head with a CR in a field never reaches a script.
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/exit3 HTTP/1.1\r\nHost: t\r\nX-A: a\rInjected: 1\r\n\r\n")
		resp, _ := c.ReadResponse("GET")
		assert.Equal(t, 400, resp.StatusCode)
	})
}

func TestCGIResponses(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"status":    "printf 'Status: 404 Not Here\\r\\nContent-Type: text/plain\\r\\nSet-Cookie: a=1\\r\\nSet-Cookie: b=2\\r\\n\\r\\ngone'\n",
		"framing":   "printf 'Content-Type: text/plain\\nContent-Length: 1\\nConnection: close\\nTransfer-Encoding: identity\\nServer: evil\\n\\nlonger than one byte'\n",
		"local":     "printf 'Location: /style.css?x=1\\n\\n'\n",
		"loop":      "printf 'Location: /cgi-bin/loop\\n\\n'\n",
		"toscript":  "printf 'Location: /cgi-bin/status\\n\\n'\n",
		"client":    "printf 'Location: https://example.com/next\\n\\n'\n",
		"nocontent": "printf 'Status: 204\\n\\n'\necho dropped\n",
		"crlfhead":  "printf 'Content-Type: text/plain\\r\\n\\r\\nbody'\n",
	})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/status HTTP/1.1\r\nHost: t\r\n\r\n")
		r := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 404 Not Here", r.Status)
		assert.Equal(t, "gone", string(r.Body))
		assert.Equal(t, []string{"a=1", "b=2"}, r.Header.Values("Set-Cookie"))

		resp, body := c.Get("/cgi-bin/framing")
		assert.Equal(t, "longer than one byte", string(body))
		assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
		assert.Equal(t, "twinloop", resp.Header.Get("Server"))
		assert.False(t, resp.Close)

		resp, body = c.Get("/cgi-bin/local")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "body{}\n", string(body))
		resp, body = c.Get("/cgi-bin/toscript")
		assert.Equal(t, 404, resp.StatusCode)
		assert.Equal(t, "gone", string(body))
		resp, _ = c.Get("/cgi-bin/loop")
		assert.Equal(t, 500, resp.StatusCode)

		resp, _ = c.Get("/cgi-bin/client")
		assert.Equal(t, 302, resp.StatusCode)
		assert.Equal(t, "https://example.com/next", resp.Header.Get("Location"))

		resp, body = c.Get("/cgi-bin/nocontent")
		assert.Equal(t, 204, resp.StatusCode)
		assert.Empty(t, body)
		resp, body = c.Get("/cgi-bin/crlfhead")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "body", string(body))
	})
}

func TestCGIHeadAndKeepAlive(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{"hello": textHead + "echo \"hello $REQUEST_METHOD\"\n"})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "HEAD /cgi-bin/hello HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, body := c.ReadResponse("HEAD")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
		assert.Empty(t, body)
		// Pipelined: script, file, script, answered in order on one connection.
		fmt.Fprintf(c, "GET /cgi-bin/hello HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n"+
			"POST /cgi-bin/hello HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: t\r\n\r\n")
		_, body = c.ReadResponse("GET")
		assert.Equal(t, "hello GET\n", string(body))
		_, body = c.ReadResponse("GET")
		assert.Equal(t, "body{}\n", string(body))
		_, body = c.ReadResponse("POST")
		assert.Equal(t, "hello POST\n", string(body), "the unread body is dropped, not taken for a request")
		_, body = c.ReadResponse("GET")
		assert.Equal(t, s.index, body)

		// HTTP/1.0: the body ends with the connection.
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		resp, body = c.ReadResponse("GET")
		assert.Equal(t, "hello GET\n", string(body))
		assert.True(t, resp.Close)
		assert.Empty(t, resp.TransferEncoding)
	})
}

// TestCGIPipelinedScripts: scripts back to back on one connection. The
// end of one script's output (PipeEOF) starts the next at once when
// nothing is left to send (HEAD), and the new pipe usually gets the fd
// number just closed: the backend must watch it as a new pipe.
func TestCGIPipelinedScripts(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{"n": textHead + "echo \"n=$QUERY_STRING $REQUEST_METHOD\"\n"})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		methods := []string{"HEAD", "HEAD", "GET", "HEAD", "GET", "GET"}
		var req strings.Builder
		for i, m := range methods {
			fmt.Fprintf(&req, "%s /cgi-bin/n?%d HTTP/1.1\r\nHost: t\r\n\r\n", m, i)
		}
		_, err := io.WriteString(c, req.String())
		require.NoError(t, err)
		for i, m := range methods {
			resp, body := c.ReadResponse(m)
			require.Equal(t, 200, resp.StatusCode, "request %d", i)
			want := ""
			if m == "GET" {
				want = fmt.Sprintf("n=%d GET\n", i)
			}
			assert.Equal(t, want, string(body), "request %d, in order", i)
		}
		resp, body := c.Get("/cgi-bin/n?last")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "n=last GET\n", string(body), "the connection is still in step")
	})
}

func TestCGILargeOutput(t *testing.T) {
	big := make([]byte, 10<<20)
	rand.Read(big)
	src := filepath.Join(t.TempDir(), "big.bin")
	require.NoError(t, os.WriteFile(src, big, 0o644))
	dir := servertest.Scripts(t, map[string]string{
		"big": "printf 'Content-Type: application/octet-stream\\n\\n'\nexec head -c 10485760 " + src + "\n",
	})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, version := range []string{"1.1", "1.0"} {
			c := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "GET /cgi-bin/big HTTP/%s\r\nHost: t\r\n\r\n", version)
			resp, err := http.ReadResponse(c.R, nil)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			// Slowly at first: the server must stop reading the pipe and
			// resume (backpressure), not buffer the output.
			got := make([]byte, 0, len(big))
			buf := make([]byte, 32<<10)
			for {
				n, err := resp.Body.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				if len(got) < 1<<20 {
					time.Sleep(2 * time.Millisecond)
				}
			}
			require.True(t, bytes.Equal(big, got), "HTTP/%s: %d bytes of %d, or different", version, len(got), len(big))
		}
	})
}

func TestCGIClientGoneKillsScript(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"forever": textHead + "echo $$\nexec yes twinloop\n",
		"sleeper": "echo $$ > sleeper.pid\nsleep 30 &\nsleep 30\n",
	})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/forever HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		require.NoError(t, err)
		require.True(t, groupAlive(pid))
		c.Close()
		requireGroupGone(t, pid)

		// A script that writes nothing: the reset of the connection is seen
		// when the server next writes or reads; closing with unread
		// request bytes makes the kernel send a RST at once.
		os.Remove(filepath.Join(dir, "sleeper.pid"))
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "POST /cgi-bin/sleeper HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n")
		pid = pidFile(t, dir, "sleeper.pid")
		c.Conn.(*net.TCPConn).SetLinger(0) // RST
		c.Close()
		requireGroupGone(t, pid)
	})
}

func TestCGINamesAndMethods(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{"ok": textHead + "echo ok\n", ".hidden": textHead + "echo hidden\n"})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "noexec"), []byte("#!/bin/sh\necho no\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	outside := filepath.Join(t.TempDir(), "outside")
	require.NoError(t, os.WriteFile(outside, []byte("#!/bin/sh\n"+textHead+"echo "+secret+"\n"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "escape")))
	require.NoError(t, os.Symlink("ok", filepath.Join(dir, "alias")))
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		cases := []struct {
			req    string
			status int
			body   string
		}{
			{req: "GET /cgi-bin/ok HTTP/1.1", status: 200, body: "ok\n"},
			{req: "GET /cgi-bin/alias HTTP/1.1", status: 200, body: "ok\n"},
			{req: "GET /cgi-bin/%6Fk HTTP/1.1", status: 200, body: "ok\n"},
			{req: "GET /cgi-bin/x/../ok HTTP/1.1", status: 200, body: "ok\n"},
			{req: "GET /cgi-bin/missing HTTP/1.1", status: 404},
			{req: "GET /cgi-bin/ HTTP/1.1", status: 404},
			{req: "GET /cgi-bin HTTP/1.1", status: 404},
			{req: "GET /cgi-bin/noexec HTTP/1.1", status: 403},
			{req: "GET /cgi-bin/sub HTTP/1.1", status: 403},
			{req: "GET /cgi-bin/.hidden HTTP/1.1", status: 403},
			{req: "GET /cgi-bin/%2ehidden HTTP/1.1", status: 403},
			{req: "GET /cgi-bin/escape HTTP/1.1", status: 403},
			{req: "GET /cgi-bin/../index.html HTTP/1.1", status: 200, body: string(s.index)}, // a file, not a script
			{req: "PUT /cgi-bin/ok HTTP/1.1", status: 405},
			{req: "OPTIONS /cgi-bin/ok HTTP/1.1", status: 405},
		}
		c := servertest.Dial(t, srv.Addr)
		for _, tc := range cases {
			fmt.Fprintf(c, "%s\r\nHost: t\r\n\r\n", tc.req)
			resp, body := c.ReadResponse("GET")
			assert.Equal(t, tc.status, resp.StatusCode, tc.req)
			assert.NotContains(t, string(body), secret, tc.req)
			if tc.body != "" {
				assert.Equal(t, tc.body, string(body), tc.req)
			}
			if tc.status == 405 {
				assert.Equal(t, "GET, HEAD, POST", resp.Header.Get("Allow"))
			}
		}
	})
}

func TestCGIShutdownKillsScripts(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{"sleeper": "echo $$ > sleeper.pid\nsleep 30\n"})
	eachBackend(t, core.Config{CGIDir: dir, ShutdownTimeout: 500 * time.Millisecond}, func(t *testing.T, s *site, srv *servertest.Server) {
		os.Remove(filepath.Join(dir, "sleeper.pid"))
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/sleeper HTTP/1.1\r\nHost: t\r\n\r\n")
		pid := pidFile(t, dir, "sleeper.pid")
		start := time.Now()
		require.NoError(t, srv.Stop())
		assert.Less(t, time.Since(start), 8*time.Second)
		// Stop returned after Server.Close, which waits for the reaping:
		// the script, our child, is gone already. What it started (sleep)
		// was killed with it, and is reaped by init.
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		assert.True(t, os.IsNotExist(err), "script still there after shutdown")
		requireGroupGone(t, pid)
	})
}

// cgiRefused asks for a script on c and expects the 503 of --cgi-max,
// then a file on the same connection.
func cgiRefused(t *testing.T, c *servertest.Client, req string) {
	t.Helper()
	_, err := io.WriteString(c, req)
	require.NoError(t, err)
	resp, body := c.ReadResponse("GET")
	require.Equal(t, 503, resp.StatusCode, "beyond --cgi-max")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.False(t, resp.Close, "a 503 keeps the connection")
	assert.Contains(t, string(body), "503")
	resp, body = c.Get("/style.css")
	require.Equal(t, 200, resp.StatusCode, "the next request on the connection")
	assert.Equal(t, "body{}\n", string(body))
}

// echoRuns posts to the echo script on a new connection and expects its
// answer: a place for a script was free.
func echoRuns(t *testing.T, addr, msg string) {
	t.Helper()
	c := servertest.Dial(t, addr)
	fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok")
	resp, body := c.ReadResponse("POST")
	require.Equal(t, 200, resp.StatusCode, msg)
	require.Equal(t, "ok", string(body))
}

// TestCGIMax: no more than Config.CGIMax scripts run at once in the
// process, across its loops; beyond it a request for a script is
// answered 503 with Retry-After at once, without a fork, and the
// connection goes on. A script counts until it is reaped: a client that
// never reads its script's output holds its place until it goes away.
func TestCGIMax(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		// Runs until the test creates "release".
		"hold": "echo $$ > hold.$QUERY_STRING.pid\nwhile [ ! -e release ]; do sleep 0.05; done\n" + textHead + "echo done\n",
		"yes":  "echo $$ > yes.$QUERY_STRING.pid\nprintf 'Content-Type: text/plain\\n\\n'\nexec yes twinloop\n",
		"echo": "printf 'Content-Type: application/octet-stream\\n\\n'\nexec cat\n",
	})
	eachBackend(t, core.Config{CGIDir: dir, CGIMax: 2}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, f := range []string{"release", "hold.1.pid", "hold.2.pid", "hold.3.pid", "yes.1.pid", "yes.2.pid"} {
			os.Remove(filepath.Join(dir, f))
		}
		holders := []*servertest.Client{servertest.Dial(t, srv.Addr), servertest.Dial(t, srv.Addr)}
		for i, c := range holders {
			fmt.Fprintf(c, "GET /cgi-bin/hold?%d HTTP/1.1\r\nHost: t\r\n\r\n", i+1)
			pidFile(t, dir, fmt.Sprintf("hold.%d.pid", i+1))
		}
		// Fresh connections land on either loop: the count is the process's.
		for range 4 {
			c := servertest.Dial(t, srv.Addr)
			cgiRefused(t, c, "GET /cgi-bin/hold?3 HTTP/1.1\r\nHost: t\r\n\r\n")
			// A body sent in pieces to a refused script is read and
			// dropped: the request after it is answered.
			fmt.Fprintf(c, "POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 12\r\n\r\nfirst")
			time.Sleep(20 * time.Millisecond)
			resp, _ := c.ReadResponse("POST")
			require.Equal(t, 503, resp.StatusCode)
			fmt.Fprintf(c, "-piece")
			time.Sleep(20 * time.Millisecond)
			fmt.Fprintf(c, "!")
			resp, body := c.Get("/style.css")
			require.Equal(t, 200, resp.StatusCode, "the body was dropped, not taken for a request")
			assert.Equal(t, "body{}\n", string(body))
		}
		_, err := os.Stat(filepath.Join(dir, "hold.3.pid"))
		assert.True(t, os.IsNotExist(err), "a refused script was started")

		require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o644))
		for _, c := range holders {
			resp, body := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "done\n", string(body))
		}
		// Once both are reaped, scripts run again. A script counts
		// until it is reaped, after its answer: each step waits for the
		// count to fall (Server.Scripts), or a script of the next would
		// find the place of the last still taken (the yes scripts below
		// were refused so, 5 runs in 30 under load, when the count was
		// read through an echo's answer).
		scriptsDone := func(msg string) {
			t.Helper()
			require.Eventually(t, func() bool { return srv.Core.Scripts() == 0 }, 10*time.Second, time.Millisecond, msg)
		}
		scriptsDone("the count went back when the scripts were reaped")
		echoRuns(t, srv.Addr, "scripts run again")
		scriptsDone("the echo script was reaped")

		// Clients that never read an endless output hold both places
		// until they go away.
		var stalled []*servertest.Client
		var pids []int
		for i := range 2 {
			c := servertest.Dial(t, srv.Addr)
			require.NoError(t, c.Conn.(*net.TCPConn).SetReadBuffer(4096))
			fmt.Fprintf(c, "GET /cgi-bin/yes?%d HTTP/1.1\r\nHost: t\r\n\r\n", i+1)
			stalled = append(stalled, c)
			pids = append(pids, pidFile(t, dir, fmt.Sprintf("yes.%d.pid", i+1)))
		}
		cgiRefused(t, servertest.Dial(t, srv.Addr), "GET /cgi-bin/echo HTTP/1.1\r\nHost: t\r\n\r\n")
		for i, c := range stalled {
			c.Close() // with unread bytes: a reset
			requireGroupGone(t, pids[i])
		}
		scriptsDone("the places of the killed scripts came back")
		echoRuns(t, srv.Addr, "scripts run in the places of the killed ones")
	})
}

// TestCGIClientCloseBeforeAnswer: a client that closes its connection
// (FIN, nothing left unread) while its script has not answered yet gets
// the script's process group killed at once, as nginx aborts an upstream
// when its client goes away, not when the script next writes. The script
// sleeps, then would leave a marker: none may appear.
func TestCGIClientCloseBeforeAnswer(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"late": "echo $$ > $QUERY_STRING.pid\nsleep 3\ntouch $QUERY_STRING.done\n" + textHead + "echo late\n",
	})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		cases := map[string]func(c *servertest.Client){
			"get": func(c *servertest.Client) {
				fmt.Fprintf(c, "GET /cgi-bin/late?get HTTP/1.1\r\nHost: t\r\n\r\n")
			},
			"http10": func(c *servertest.Client) {
				fmt.Fprintf(c, "GET /cgi-bin/late?http10 HTTP/1.0\r\n\r\n")
			},
			"pieces": func(c *servertest.Client) {
				// A whole body, sent in pieces.
				fmt.Fprintf(c, "POST /cgi-bin/late?pieces HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nab")
				time.Sleep(30 * time.Millisecond)
				fmt.Fprintf(c, "cdef")
				time.Sleep(30 * time.Millisecond)
				fmt.Fprintf(c, "ghij")
			},
			"pipelined": func(c *servertest.Client) {
				// Answered first: a file, then a script that has not.
				fmt.Fprintf(c, "GET /style.css HTTP/1.1\r\nHost: t\r\n\r\nGET /cgi-bin/late?pipelined HTTP/1.1\r\nHost: t\r\n\r\n")
				resp, _ := c.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
			},
		}
		pids := map[string]int{}
		for name, send := range cases {
			os.Remove(filepath.Join(dir, name+".done"))
			os.Remove(filepath.Join(dir, name+".pid"))
			c := servertest.Dial(t, srv.Addr)
			send(c)
			pids[name] = pidFile(t, dir, name+".pid")
			require.NoError(t, c.Close())
		}
		closed := time.Now()
		left := func() (alive []string) {
			for name, pid := range pids {
				if groupRunning(pid) {
					alive = append(alive, name)
				}
			}
			return alive
		}
		for len(left()) > 0 && time.Since(closed) < 1500*time.Millisecond {
			time.Sleep(10 * time.Millisecond)
		}
		assert.Empty(t, left(), "scripts that ran on 1.5 s after their client closed")
		// No process of their groups runs (zombies aside): none can
		// touch its marker later, so it is looked for now, not once the
		// scripts' 3 s sleep would have passed.
		for name := range cases {
			_, err := os.Stat(filepath.Join(dir, name+".done"))
			assert.True(t, os.IsNotExist(err), "%s: the script finished its work for a client that was gone", name)
		}
	})
}

// TestCGIHalfCloseBeforeAnswer: a client that only shuts down its write
// side after a whole HTTP/1.1 request may still read: a FIN alone is not
// taken for the client gone. The server then sends an interim 100
// Continue (RFC 9110 §15.2: a client must parse 1xx responses it did not
// expect), which a closed socket answers with a reset and a half-closed
// one reads; the script's answer follows. HTTP/1.0 has no 1xx, and a FIN
// before its script's header kills the script, as nginx does for any FIN
// (proxy_ignore_client_abort off).
func TestCGIHalfCloseBeforeAnswer(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"late":  "echo $$ > $QUERY_STRING.pid\nsleep 0.5\n" + textHead + "echo late\n",
		"begun": textHead + "echo first\nsleep 0.3\necho second\n",
	})
	eachBackend(t, core.Config{CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, f := range []string{"a.pid", "b.pid", "c.pid"} {
			os.Remove(filepath.Join(dir, f))
		}
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/late?a HTTP/1.1\r\nHost: t\r\n\r\n")
		pidFile(t, dir, "a.pid")
		require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
		interim := c.ReadRaw("GET")
		require.Equal(t, "HTTP/1.1 100 Continue", interim.Status)
		assert.Empty(t, interim.Fields)
		resp, body := c.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "late\n", string(body))
		assert.True(t, c.Closed(), "closed after the answer: the client sends nothing more")

		// Once the answer has begun, a FIN changes nothing: no probe.
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/begun HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, err := http.ReadResponse(c.R, nil)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "first\n", line)
		require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
		rest, err := io.ReadAll(br)
		require.NoError(t, err)
		assert.Equal(t, "second\n", string(rest))

		// A body sent in pieces, then the half-close.
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "POST /cgi-bin/late?b HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nabc")
		time.Sleep(30 * time.Millisecond)
		fmt.Fprintf(c, "def")
		pidFile(t, dir, "b.pid")
		require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
		require.Equal(t, "HTTP/1.1 100 Continue", c.ReadRaw("POST").Status)
		resp, body = c.ReadResponse("POST")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "late\n", string(body))

		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/late?c HTTP/1.0\r\n\r\n")
		pid := pidFile(t, dir, "c.pid")
		require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(c.R)
		assert.NoError(t, err, "an orderly close")
		assert.Empty(t, string(got), "HTTP/1.0: nothing is sent")
		requireGroupGone(t, pid)

		// A bad request, then a fresh connection's script: the closed
		// connections left nothing behind (io_uring: a poll on an fd
		// number the next connection gets).
		c = servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /cgi-bin/late?d HTTP/1.1\r\nHost: t\r\n\r\n")
		pidFile(t, dir, "d.pid")
		require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
		require.Equal(t, "HTTP/1.1 100 Continue", c.ReadRaw("GET").Status)
		c.Close()
		bad := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(bad, "GET /cgi-bin/late?x HTTP/1.1\r\nHost: t\r\nX-Bad: a\rb\r\n\r\n")
		resp, _ = bad.ReadResponse("GET")
		assert.Equal(t, 400, resp.StatusCode)
		for i := range 3 {
			c = servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "GET /cgi-bin/late?fresh%d HTTP/1.1\r\nHost: t\r\n\r\n", i)
			resp, body = c.ReadResponse("GET")
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "late\n", string(body))
		}
	})
}

// Scripts that leave something running behind them, each started so that
// it writes its pid into dir/NAME.pid (where NAME is the script's query
// string); the script waits for the file before it exits, so that what
// it left is running by then.
const (
	// A background child, in the script's process group.
	leaveBackground = "sh -c 'echo $$ > $QUERY_STRING.pid; exec sleep 30' &\n"
	// A child that starts a session of its own: kill(-pgid) misses it.
	leaveSetsid = "setsid sh -c 'echo $$ > $QUERY_STRING.pid; exec sleep 30' &\n"
	// A double fork: the grandchild is an orphan while the script runs.
	leaveDoubleFork = "( sh -c 'echo $$ > $QUERY_STRING.pid; exec sleep 30' & )\n"
	// A daemon as daemon(3) makes one: fork, setsid, fork; the last one
	// is an orphan in a session whose leader is gone.
	leaveDaemon = "( setsid sh -c 'sh -c \"echo \\$\\$ > $QUERY_STRING.pid; exec sleep 30\" &' & )\n"
	// A daemon that left the script's session and closed its stdout: it
	// does not hold the answer up, but outlives the script all the same.
	leaveClosed = "( setsid sh -c 'echo $$ > $QUERY_STRING.pid; exec sleep 30' </dev/null >/dev/null 2>&1 & )\n"
	// A daemon that keeps only the script's stdin, unread: the request
	// body's writer would wait for it. (An asynchronous list's stdin is
	// /dev/null before its redirections: the pipe goes through fd 3.)
	leaveStdin = "exec 3<&0\n( setsid sh -c 'echo $$ > $QUERY_STRING.pid; exec sleep 30' <&3 3<&- >/dev/null 2>&1 & )\n"
	// The script waits for its leftover to have started.
	waitLeft = "while [ ! -s $QUERY_STRING.pid ]; do sleep 0.01; done\n"
)

// requireProcGone waits until process pid no longer exists, zombies
// included: kill(pid, 0) fails with ESRCH.
func requireProcGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH }, 5*time.Second, 10*time.Millisecond,
		"process %d, which a script left running, is still there", pid)
}

// TestCGIDescendantsEndWithScript: what a script started ends when the
// script exits, daemonized or not. Its answer ends with its output, with
// the last chunk, long before --cgi-timeout, even though what it left
// running had its stdout: it is killed, and its pipe reaches its end.
func TestCGIDescendantsEndWithScript(t *testing.T) {
	cases := []struct {
		name   string
		leave  string
		head   bool // the script prints a header (else it exits without one)
		status int
	}{
		{name: "background", leave: leaveBackground, head: true, status: 200},
		{name: "setsid", leave: leaveSetsid, head: true, status: 200},
		{name: "doublefork", leave: leaveDoubleFork, head: true, status: 200},
		{name: "daemon", leave: leaveDaemon, head: true, status: 200},
		{name: "closed", leave: leaveClosed, head: true, status: 200},
		// As a script that exits without a header: 502, not 504.
		{name: "noheader", leave: leaveSetsid, head: false, status: 502},
	}
	scripts := map[string]string{}
	for _, tc := range cases {
		scripts[tc.name] = tc.leave + waitLeft
		if tc.head {
			scripts[tc.name] = textHead + "echo before\n" + tc.leave + waitLeft + "echo after\n"
		}
	}
	dir := servertest.Scripts(t, scripts)
	const timeout = 15 * time.Second
	eachBackend(t, core.Config{CGIDir: dir, CGITimeout: timeout}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				os.Remove(filepath.Join(dir, tc.name+".pid"))
				c := servertest.Dial(t, srv.Addr)
				start := time.Now()
				fmt.Fprintf(c, "GET /cgi-bin/%s?%s HTTP/1.1\r\nHost: t\r\n\r\n", tc.name, tc.name)
				r := c.ReadRaw("GET") // a chunked body must end with its last chunk
				require.Equal(t, tc.status, r.Code)
				if tc.head {
					assert.Equal(t, []string{"chunked"}, r.Header.Values("Transfer-Encoding"))
					assert.Equal(t, "before\nafter\n", string(r.Body))
				}
				// The connection is in step: the next request is answered.
				resp, body := c.Get("/style.css")
				require.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, "body{}\n", string(body))
				assert.Less(t, time.Since(start), timeout/2, "the answer waited for the timeout")
				requireProcGone(t, pidFile(t, dir, tc.name+".pid"))
			})
		}
	})
}

// TestCGIDescendantsCount: --cgi-max counts a script until what it left
// running is gone too, and no longer: with one place, a script that left
// a daemon behind gives its place to the next one once it is done (its
// answer may end a moment before: hence the retries).
func TestCGIDescendantsCount(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"daemon": textHead + "echo daemon\n" + leaveDaemon + waitLeft,
	})
	eachBackend(t, core.Config{CGIDir: dir, CGIMax: 1}, func(t *testing.T, s *site, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		for i := range 3 {
			name := fmt.Sprintf("d%d", i)
			os.Remove(filepath.Join(dir, name+".pid"))
			require.Eventually(t, func() bool {
				resp, body := c.Get("/cgi-bin/daemon?" + name)
				return resp.StatusCode == 200 && string(body) == "daemon\n"
			}, 5*time.Second, 20*time.Millisecond, "request %d: the place came back once the last daemon was gone", i)
			requireProcGone(t, pidFile(t, dir, name+".pid"))
		}
	})
}

// TestCGIDescendantsOfOthers: while scripts run side by side, one's exit
// kills what it left and nothing of the others': a daemon a running
// script started is still there when that script looks, and gone once it
// exits. What holds a script's stdout or stdin is that script's, and ends
// with it at once. A daemon that left its script's session and closed
// both cannot be told from the other scripts' (the server only adopts
// it, see core/cgi_sweep_linux.go): it ends at the latest with the last
// of the scripts that ran when it was found, so it is only checked at
// the end.
func TestCGIDescendantsOfOthers(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"keeper": leaveClosed + waitLeft +
			"while [ ! -e release ]; do sleep 0.02; done\n" + textHead +
			"if kill -0 $(cat $QUERY_STRING.pid); then echo alive; else echo dead; fi\n",
		"setsid": textHead + "echo setsid\n" + leaveSetsid + waitLeft,
		"stdin":  textHead + "echo stdin\n" + leaveStdin + waitLeft,
		"closed": textHead + "echo closed\n" + leaveClosed + waitLeft,
	})
	body := make([]byte, 300<<10) // beyond a pipe's 64 KiB: its writer waits
	rand.Read(body)
	eachBackend(t, core.Config{CGIDir: dir, CGITimeout: 20 * time.Second, MaxBody: 1 << 20}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, f := range []string{"release", "keeper.pid", "setsid.pid", "stdin.pid", "closed.pid"} {
			os.Remove(filepath.Join(dir, f))
		}
		keeper := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(keeper, "GET /cgi-bin/keeper?keeper HTTP/1.1\r\nHost: t\r\n\r\n")
		kept := pidFile(t, dir, "keeper.pid")

		c := servertest.Dial(t, srv.Addr)
		resp, got := c.Get("/cgi-bin/setsid?setsid")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "setsid\n", string(got))
		// It held the answer's pipe: it was the script's, whatever else runs.
		requireProcGone(t, pidFile(t, dir, "setsid.pid"))

		fmt.Fprintf(c, "POST /cgi-bin/stdin?stdin HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", len(body))
		go c.Write(body) // the server may stop reading it until the daemon is gone
		resp, got = c.ReadResponse("POST")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "stdin\n", string(got))
		requireProcGone(t, pidFile(t, dir, "stdin.pid"))
		resp, got = c.Get("/style.css")
		require.Equal(t, 200, resp.StatusCode, "the rest of the body was dropped")
		assert.Equal(t, "body{}\n", string(got))
		resp, got = c.Get("/cgi-bin/closed?closed")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "closed\n", string(got))
		closed := pidFile(t, dir, "closed.pid")

		require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o644))
		resp, got = keeper.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "alive\n", string(got), "another script's exit killed the daemon of a script still running")
		requireProcGone(t, kept)
		requireProcGone(t, closed)
	})
}
