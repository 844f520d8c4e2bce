package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/internal/servertest"
)

// eachServerBackend runs fn per backend the binary has, skipping io_uring
// where it cannot run.
func eachServerBackend(t *testing.T, fn func(t *testing.T, be string)) {
	for _, be := range []string{"epoll", "uring", "blocking"} {
		t.Run(be, func(t *testing.T) {
			if be == "uring" {
				if err := uring.New().Probe(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			fn(t, be)
		})
	}
}

// logLine is one line of --log-format=json.
type logLine struct {
	Time       string  `json:"time"`
	RemoteAddr string  `json:"remote_addr"`
	RemotePort int     `json:"remote_port"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	Query      string  `json:"query"`
	Protocol   string  `json:"protocol"`
	Status     int     `json:"status"`
	Bytes      int64   `json:"bytes"`
	DurationMS float64 `json:"duration_ms"`
	Referer    string  `json:"referer"`
	UserAgent  string  `json:"user_agent"`
	Backend    string  `json:"backend"`
}

// jsonLines decodes out's complete lines, each one JSON object with
// logLine's keys and no other.
func jsonLines(t *testing.T, out string) []logLine {
	t.Helper()
	var lines []logLine
	for _, s := range strings.SplitAfter(out, "\n") {
		if !strings.HasSuffix(s, "\n") {
			break // a line still being written
		}
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		var l logLine
		require.NoError(t, d.Decode(&l), s)
		_, err := d.Token()
		require.ErrorIs(t, err, io.EOF, "one object per line: %q", s)
		lines = append(lines, l)
	}
	return lines
}

// TestJSONLogBehindProxy: -v --log-format=json --proxy-protocol on every
// backend: one JSON object per request, with the PROXY header's client
// address and port, the status and the backend; a hostile user agent
// arrives as encoding/json decodes it. A SIGUSR1 with no file to reopen
// leaves the server serving.
func TestJSONLogBehindProxy(t *testing.T) {
	eachServerBackend(t, func(t *testing.T, be string) {
		dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
		addr := "127.0.0.1:" + freePort(t)
		cmd, stdout, stderr := server(t, "--backend="+be, "--listen", addr, "-d", dir, "--loops", "1", "-v", "--log-format=json", "--proxy-protocol")
		servertest.WaitAccepting(t, addr)
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)

		c := servertest.Dial(t, addr)
		hdr := servertest.ProxyV2(netip.MustParseAddrPort("203.0.113.9:4242"), netip.MustParseAddrPort("198.51.100.1:80"))
		agent := "evil\"}\n{\\ <x> \xff\xfe"
		fmt.Fprintf(c, "%sGET /index.html?q=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: %s\r\n\r\n", hdr, strings.ReplaceAll(agent, "\n", " "))
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "hello\n", string(body))
		fmt.Fprintf(c, "GET /missing HTTP/1.1\r\nHost: t\r\nReferer: http://a/\r\n\r\n")
		resp, _ = c.ReadResponse("GET")
		require.Equal(t, 404, resp.StatusCode)

		var lines []logLine
		require.Eventually(t, func() bool { lines = jsonLines(t, stdout.String()); return len(lines) >= 2 }, 5*time.Second, 10*time.Millisecond, stdout.String())
		require.Len(t, lines, 2, stdout.String())
		first, second := lines[0], lines[1]
		assert.Equal(t, logLine{Time: first.Time, RemoteAddr: "203.0.113.9", RemotePort: 4242, Method: "GET", Path: "/index.html", Query: "q=1", Protocol: "HTTP/1.1",
			Status: 200, Bytes: 6, DurationMS: first.DurationMS, UserAgent: "evil\"} {\\ <x> \ufffd\ufffd", Backend: be}, first)
		assert.Equal(t, logLine{Time: second.Time, RemoteAddr: "203.0.113.9", RemotePort: 4242, Method: "GET", Path: "/missing", Protocol: "HTTP/1.1",
			Status: 404, Bytes: second.Bytes, DurationMS: second.DurationMS, Referer: "http://a/", Backend: be}, second)
		_, err := time.Parse(time.RFC3339Nano, first.Time)
		assert.NoError(t, err, first.Time)
		t.Logf("a line: %s", strings.SplitAfter(stdout.String(), "\n")[0])

		require.NoError(t, cmd.Process.Signal(syscall.SIGUSR1))
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, _ = c.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode, "serving after SIGUSR1")
		require.Eventually(t, func() bool { return len(jsonLines(t, stdout.String())) == 3 }, 5*time.Second, 10*time.Millisecond, stdout.String())
	})
}

// TestAccessLogReopen: --access-log FILE on every backend; FILE renamed
// (as logrotate does), SIGUSR1 to the process: FILE is made anew, the
// next request's line lands in it and the renamed file keeps the ones
// before. --error-log is reopened the same way.
func TestAccessLogReopen(t *testing.T) {
	eachServerBackend(t, func(t *testing.T, be string) {
		dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
		logs := t.TempDir()
		access, errlog := filepath.Join(logs, "access.log"), filepath.Join(logs, "error.log")
		addr := "127.0.0.1:" + freePort(t)
		cmd, stdout, stderr := server(t, "--backend="+be, "--listen", addr, "-d", dir, "--loops", "1", "--access-log", access, "--error-log", errlog)
		servertest.WaitAccepting(t, addr)
		require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)
		hasLine := func(path, line string) func() bool {
			return func() bool { b, _ := os.ReadFile(path); return strings.Contains(string(b), line) }
		}

		c := servertest.Dial(t, addr)
		c.Get("/index.html?before")
		require.Eventually(t, hasLine(access, `"GET /index.html?before HTTP/1.1" 200 6`), 5*time.Second, 10*time.Millisecond)
		require.NoError(t, os.Rename(access, access+".1"))
		require.NoError(t, os.Rename(errlog, errlog+".1"))
		require.NoError(t, cmd.Process.Signal(syscall.SIGUSR1))
		require.Eventually(t, func() bool {
			_, aerr := os.Stat(access)
			_, eerr := os.Stat(errlog)
			return aerr == nil && eerr == nil
		}, 5*time.Second, 10*time.Millisecond, "SIGUSR1 makes both files anew")

		c.Get("/index.html?after")
		require.Eventually(t, hasLine(access, `"GET /index.html?after HTTP/1.1" 200 6`), 5*time.Second, 10*time.Millisecond)
		old, err := os.ReadFile(access + ".1")
		require.NoError(t, err)
		assert.Equal(t, 1, strings.Count(string(old), "\n"), "the renamed file has the line before, no more: %s", old)
		assert.NotContains(t, string(old), "after")
		assert.Empty(t, stdout.String(), "nothing on stdout")
	})
}

// TestLogFileReopenWhileWriting: lines written while the file is renamed
// and reopened, again and again, all land, each whole, in one file or
// the other (run with -race).
func TestLogFileReopenWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.log")
	lf, err := openLogFile(path)
	require.NoError(t, err)
	defer lf.Close()
	const lines = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range lines {
			fmt.Fprintf(lf, "line %d\n", i)
		}
	}()
	var rotated []string
	for i := range 20 {
		name := fmt.Sprintf("%s.%d", path, i)
		require.NoError(t, os.Rename(path, name))
		rotated = append(rotated, name)
		var stderr bytes.Buffer
		reopenAll([]*logFile{lf}, &stderr)
		require.Empty(t, stderr.String())
	}
	wg.Wait()
	var all []byte
	for _, name := range append(rotated, path) {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		all = append(all, b...)
	}
	got := strings.Split(strings.TrimSuffix(string(all), "\n"), "\n")
	require.Len(t, got, lines)
	seen := map[string]bool{}
	for _, l := range got {
		seen[l] = true
	}
	assert.Len(t, seen, lines, "each line whole, once")
}

// TestLogFileReopenFails: a path that cannot be opened again keeps the
// old file in use, and says so on stderr; a file that cannot be opened
// at start is refused with what to do.
func TestLogFileReopenFails(t *testing.T) {
	d := t.TempDir()
	path := filepath.Join(d, "sub", "a.log")
	require.NoError(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
	lf, err := openLogFile(path)
	require.NoError(t, err)
	defer lf.Close()
	require.NoError(t, os.Rename(filepath.Join(d, "sub"), filepath.Join(d, "moved")))
	var stderr bytes.Buffer
	reopenAll([]*logFile{lf}, &stderr)
	assert.Contains(t, stderr.String(), "still writing to the file open before")
	fmt.Fprintln(lf, "kept")
	b, err := os.ReadFile(filepath.Join(d, "moved", "a.log"))
	require.NoError(t, err)
	assert.Equal(t, "kept\n", string(b))

	code, _, errs := runMain("-d", d, "--access-log", filepath.Join(d, "none", "x.log"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--access-log: open ")
	assert.Contains(t, errs, "give a file the server may create or append to")
}
