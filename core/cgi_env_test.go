package core

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeaderFields(t *testing.T) {
	head := []byte("\r\nPOST /x?y HTTP/1.1\r\nHost: h\r\nX-A:\t a b \t\r\nEmpty:\nx-a: 2\n\r\nbody: not a field\r\n")
	var req Request
	n, err := ParseRequest(head, &req, nil)
	require.NoError(t, err)
	var got [][2]string
	for name, value := range headerFields(head[:n]) {
		got = append(got, [2]string{string(name), string(value)})
	}
	assert.Equal(t, [][2]string{{"Host", "h"}, {"X-A", "a b"}, {"Empty", ""}, {"x-a", "2"}}, got)
	for range headerFields(head[:n]) {
		break // stopping early is allowed
	}
}

func TestCGIHeaderVar(t *testing.T) {
	for name, want := range map[string]string{
		"Host": "HTTP_HOST", "x-forwarded-for": "HTTP_X_FORWARDED_FOR", "Path": "HTTP_PATH", "A1-b2": "HTTP_A1_B2",
		"Proxy": "", "PROXY": "", "Authorization": "", "Proxy-Authorization": "", "Content-Length": "", "content-type": "",
		"X_Y": "", "X.Y": "", "X!": "", "LD_PRELOAD": "",
	} {
		got, ok := cgiHeaderVar([]byte(name))
		assert.Equal(t, want != "", ok, name)
		assert.Equal(t, want, got, name)
	}
}

func TestCGIEnvFromRequest(t *testing.T) {
	dir := t.TempDir()
	l, _ := newTestLoop(t, Config{CGIDir: dir})
	c := l.NewConn(netip.MustParseAddrPort("[2001:db8::1]:4242"))
	c.Local = netip.MustParseAddrPort("[::1]:8080")
	head := []byte("POST /cgi-bin/s/a%2Fb?q=%41 HTTP/1.0\r\nContent-Length: 3\r\nContent-Type: x/y\r\nProxy: p\r\nX-A: 1\r\nx-a: 2\r\n\r\n")
	var r Request
	_, err := ParseRequest(head, &r, nil)
	require.NoError(t, err)
	env := c.cgiEnv(&r, head, "s", []byte("/a/b"))
	want := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "GATEWAY_INTERFACE=CGI/1.1", "SERVER_SOFTWARE=twinloop",
		"SERVER_PROTOCOL=HTTP/1.0", "SERVER_NAME=[::1]", "SERVER_PORT=8080", "REQUEST_METHOD=POST",
		"SCRIPT_NAME=/cgi-bin/s", "PATH_INFO=/a/b", "QUERY_STRING=q=%41", "CONTENT_LENGTH=3", "CONTENT_TYPE=x/y",
		"REMOTE_ADDR=2001:db8::1", "REMOTE_PORT=4242", "HTTP_X_A=1, 2",
	}
	assert.Equal(t, want, env)

	// Without Local (a backend that does not fill it), the Host says.
	c.Local = netip.AddrPort{}
	r.Host = []byte("[::2]:99")
	env = c.cgiEnv(&r, head, "s", nil)
	assert.Contains(t, env, "SERVER_NAME=[::2]")
	assert.Contains(t, env, "SERVER_PORT=99")
	assert.False(t, slices.ContainsFunc(env, func(s string) bool { return len(s) > 9 && s[:9] == "PATH_INFO" }))
}

func TestCGITarget(t *testing.T) {
	cases := []struct {
		rel        string
		dir        bool
		name, info string
		ok         bool
	}{
		{rel: "cgi-bin/a", name: "a", ok: true},
		{rel: "cgi-bin/a/b/c", name: "a", info: "/b/c", ok: true},
		{rel: "cgi-bin/a", dir: true, name: "a", info: "/", ok: true},
		{rel: "cgi-bin/a/b", dir: true, name: "a", info: "/b/", ok: true},
		{rel: "cgi-bin", dir: true, ok: true},
		{rel: "cgi-bin", ok: true},
		{rel: "cgi-binx/a"},
		{rel: "x/cgi-bin/a"},
		{rel: ""},
	}
	for _, tc := range cases {
		name, info, ok := cgiTarget([]byte(tc.rel), tc.dir)
		assert.Equal(t, tc.ok, ok, tc.rel)
		assert.Equal(t, tc.name, string(name), tc.rel)
		assert.Equal(t, tc.info, string(info), tc.rel)
	}
}

// TestConnCGI drives a Conn through a script without a backend: the test
// reads the pipe and runs the loop's mailbox itself, as a backend would.
func TestConnCGI(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo"),
		[]byte("#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\ncat\n"), 0o755))
	l, _ := newTestLoop(t, Config{CGIDir: dir})
	woken := make(chan struct{}, 1)
	l.SetWaker(func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	c := l.NewConn(netipNone)
	c.Feed([]byte("POST /cgi-bin/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"))
	require.GreaterOrEqual(t, c.Pipe(), 0)
	assert.Equal(t, ActRead, c.Next(), "waiting for the script; the body's end is still to come")
	assert.True(t, c.WantRead())
	c.Feed([]byte("0\r\n\r\nGET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n"))
	var out []byte
	buf := make([]byte, 4096)
	deadline := time.Now().Add(10 * time.Second)
	for c.Pipe() >= 0 && time.Now().Before(deadline) {
		select {
		case <-woken:
			for _, rc := range l.RunPosted() {
				assert.Same(t, c, rc)
			}
		case <-time.After(5 * time.Millisecond):
		}
		if !c.WantPipe() {
			continue
		}
		n, err := readFD(c.Pipe(), buf)
		switch {
		case err == errAgain:
		case err != nil || n == 0:
			c.PipeEOF()
		default:
			c.FeedPipe(buf[:n])
		}
		m, _ := drain(c)
		out = append(out, m...)
	}
	m, _ := drain(c)
	out = append(out, m...)
	s := string(out)
	assert.Contains(t, s, "HTTP/1.1 200 OK\r\n")
	assert.Contains(t, s, "Transfer-Encoding: chunked\r\n")
	assert.Contains(t, s, "\r\n3\r\nabc\r\n0\r\n\r\n", "the body, echoed in a chunk, then the last chunk")
	assert.Contains(t, s, "\r\n\r\nsub\n", "then the pipelined request")
	assert.Equal(t, ActRead, c.Next())
	l.FreeConn(c)
}
