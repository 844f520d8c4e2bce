package backend_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
	"github.com/twinloop/twinloop/internal/slowclient"
)

// TestCloseWithUnreadInput: a response that ends with a close arrives
// whole even when the client sent more that the server never reads. A
// close() with unread input sends a RST, and a RST throws away what the
// server's socket has not sent yet: the tail of the response. Here the
// client reads slowly through a small receive buffer, so that megabytes
// wait in the server's socket when it is done with the response.
func TestCloseWithUnreadInput(t *testing.T) {
	cases := []struct {
		name string
		cfg  core.Config
		req  string
	}{
		{name: "connection close", req: "GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"},
		{name: "http/1.0", req: "GET /big.bin HTTP/1.0\r\n\r\n"},
		{name: "no keep-alive", cfg: core.Config{NoKeepAlive: true}, req: "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, tc.cfg, func(t *testing.T, s *site, srv *servertest.Server) {
				// Input read with the request and left unanswered, then
				// input that the server does not read at all.
				for _, behind := range []string{"GET / HTTP/1.1\r\nHost: t\r\n\r\n", ""} {
					closeWithUnreadInput(t, s, srv, tc.req+behind)
				}
			})
		})
	}
}

func closeWithUnreadInput(t *testing.T, s *site, srv *servertest.Server, req string) {
	closeWithUnreadInputThen(t, s, srv, req, false, func() {})
}

// closeWithUnreadInputThen sends req, for big.bin, reads the response's
// head, sends one more request, runs then, and reads the body slowly: it
// must arrive whole and end with a clean close, after an answer to the
// request sent later when mayAnswer.
func closeWithUnreadInputThen(t *testing.T, s *site, srv *servertest.Server, req string, mayAnswer bool, then func()) {
	conn, err := slowclient.DialRcvBuf(srv.Addr, 64<<10)
	require.NoError(t, err)
	c := servertest.NewClient(t, conn)
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	resp, err := http.ReadResponse(c.R, nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	// More input, after the server stopped reading.
	_, err = io.WriteString(c, "GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
	require.NoError(t, err)
	then()
	got := make([]byte, 0, len(s.big))
	buf := make([]byte, 32<<10)
	for len(got) < len(s.big) {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		if len(got) < 6<<20 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	require.Equal(t, len(s.big), len(got), "the response's tail was lost")
	require.True(t, bytes.Equal(s.big, got))
	if _, err := c.R.Peek(1); mayAnswer && err == nil {
		resp, body := c.ReadResponse("GET")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "body{}\n", string(body))
		assert.True(t, resp.Close)
	}
	rest, err := io.ReadAll(c.R)
	assert.NoError(t, err, "a clean close, not a reset")
	assert.Empty(t, rest, fmt.Sprintf("nothing after the closing response: %.40q", rest))
}

// TestCloseWithInputBehind: a client sends a request that asks for the
// close and, at once, more input the server will never answer (a second
// request, or bytes that are no request), then does not read for a moment,
// so that the server's socket is full of the response when it is done
// with it. It must then read the whole response, exactly Content-Length
// bytes, and a clean end of stream: a close() with that input unread
// would send a RST and destroy the response's tail (ECONNRESET). The
// input comes with the request (read with it, and left unanswered), or in
// a write of its own once the close is decided: epoll and blocking leave
// that one in the socket while they write, and must linger (Conn.Unread);
// io_uring's recv, armed while the close is asked (Conn.WantRead), takes
// it, which is why io_uring needs no Unread (core.Backend).
func TestCloseWithInputBehind(t *testing.T) {
	const req = "GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
	cases := []struct {
		name   string
		behind string
		apart  bool // the input behind is a write of its own, after a pause
	}{
		{name: "request behind", behind: "GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n"},
		{name: "garbage behind", behind: "\x00\x01 not a request at all\r\n"},
		{name: "request apart", behind: "GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n", apart: true},
	}
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				conn, err := slowclient.DialRcvBuf(srv.Addr, 64<<10)
				require.NoError(t, err)
				c := servertest.NewClient(t, conn)
				require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
				if tc.apart {
					_, err = io.WriteString(c, req)
					require.NoError(t, err)
					time.Sleep(50 * time.Millisecond)
					_, err = io.WriteString(c, tc.behind)
				} else {
					_, err = io.WriteString(c, req+tc.behind)
				}
				require.NoError(t, err)
				c.WaitStalled() // not reading: the server's socket fills

				resp, err := http.ReadResponse(c.R, nil)
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, int64(len(s.big)), resp.ContentLength)
				assert.True(t, resp.Close)
				got := make([]byte, len(s.big))
				n, err := io.ReadFull(resp.Body, got)
				require.NoError(t, err, "the response's tail was lost after %d of %d bytes", n, len(s.big))
				require.True(t, bytes.Equal(s.big, got))
				rest, err := io.ReadAll(c.R)
				assert.NoError(t, err, "a clean close, not a reset")
				assert.Empty(t, rest, fmt.Sprintf("nothing after the closing response: %.40q", rest))
			})
		}
	})
}

// TestShutdownWithUnreadInput: at shutdown a keep-alive response in flight
// is finished, and then the connection closed without a RST that would
// destroy the response's tail, though the client sent more.
func TestShutdownWithUnreadInput(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		stopped := make(chan error, 1)
		closeWithUnreadInputThen(t, s, srv, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n", true, func() {
			go func() { stopped <- srv.Stop() }()
			require.Eventually(t, srv.Core.Draining, 10*time.Second, time.Millisecond, "the shutdown never began")
		})
		assert.NoError(t, <-stopped)
	})
}
