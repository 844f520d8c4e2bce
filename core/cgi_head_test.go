package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCGIHead(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want cgiHead // slices compared as strings
		n    int
		err  error
	}{
		{name: "document", in: "Content-Type: text/html\n\n<p>", want: cgiHead{ctype: []byte("text/html")}, n: 25},
		{name: "crlf lines", in: "Content-Type: text/html\r\n\r\nbody", want: cgiHead{ctype: []byte("text/html")}, n: 27},
		{name: "status and fields", in: "status:  404 Not Here \nX-A:b\nSet-Cookie: c=1\n\n",
			want: cgiHead{status: 404, reason: []byte("Not Here"), fields: []cgiField{
				{name: []byte("X-A"), value: []byte("b")}, {name: []byte("Set-Cookie"), value: []byte("c=1")}}},
			n: 46},
		{name: "status without reason", in: "Status: 204\n\n", want: cgiHead{status: 204}, n: 13},
		{name: "local redirect", in: "Location: /a?b=c\n\n", want: cgiHead{location: []byte("/a?b=c")}, n: 18},
		{name: "client redirect", in: "Location: https://x.example/\n\n", want: cgiHead{location: []byte("https://x.example/")}, n: 30},
		{name: "owned fields dropped", in: "Content-Type: a/b\nContent-Length: 1\nConnection: close\nTransfer-Encoding: chunked\nServer: x\nDate: y\n\n",
			want: cgiHead{ctype: []byte("a/b")}, n: 100},
		{name: "need more", in: "Content-Type: text/html\n", err: ErrNeedMore},
		{name: "need more after cr", in: "Content-Type: text/html\r", err: ErrNeedMore},
		{name: "empty", in: "", err: ErrNeedMore},
		{name: "no cgi field", in: "X-A: b\n\n", err: errCGIHead},
		{name: "nothing", in: "\n", err: errCGIHead},
		{name: "no colon", in: "Content-Type text/html\n\n", err: errCGIHead},
		{name: "space before colon", in: "Content-Type : text/html\n\n", err: errCGIHead},
		{name: "empty name", in: ": x\nContent-Type: a/b\n\n", err: errCGIHead},
		{name: "obs-fold", in: "Content-Type: a/b\n c\n\n", err: errCGIHead},
		{name: "bare cr in value", in: "Content-Type: a/b\rX-Injected: 1\n\n", err: errCGIHead},
		{name: "bare cr before the end", in: "Content-Type: a/b\rX", err: errCGIHead},
		{name: "nul in value", in: "Content-Type: a\x00b\n\n", err: errCGIHead},
		{name: "two content-types", in: "Content-Type: a/b\nContent-Type: c/d\n\n", err: errCGIHead},
		{name: "two statuses", in: "Status: 200\nStatus: 404\n\n", err: errCGIHead},
		{name: "1xx status", in: "Status: 100 Continue\n\n", err: errCGIHead},
		{name: "status 600", in: "Status: 600\n\n", err: errCGIHead},
		{name: "status not digits", in: "Status: 2xx\n\n", err: errCGIHead},
		{name: "status without space", in: "Status: 200OK\n\n", err: errCGIHead},
		{name: "relative location", in: "Location: next\n\n", err: errCGIHead},
		{name: "network-path location", in: "Location: //evil.example/\n\n", err: errCGIHead},
		{name: "location with space", in: "Location: /a b\n\n", err: errCGIHead},
		{name: "too long", in: "X: " + strings.Repeat("a", cgiHeadMax), err: errCGIHead},
		{name: "too long in lines", in: strings.Repeat("X: aaaaaaaaaaaaa\n", cgiHeadMax/16), err: errCGIHead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h cgiHead
			n, err := parseCGIHead([]byte(tc.in), &h, cgiHeadMax)
			if tc.err != nil {
				require.Equal(t, tc.err, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.n, n)
			assert.Equal(t, tc.want, h)
		})
	}
}

// TestParseCGIHeadSplit: every proper prefix of a valid header needs more.
func TestParseCGIHeadSplit(t *testing.T) {
	in := "Status: 200 OK\r\nContent-Type: text/plain\nX-A: b\r\n\r\nbody"
	for i := range len(in) - len("body") - 1 {
		var h cgiHead
		_, err := parseCGIHead([]byte(in[:i]), &h, cgiHeadMax)
		require.ErrorIs(t, err, ErrNeedMore, "prefix %q", in[:i])
	}
}

func TestStatusLineForAnyCode(t *testing.T) {
	s := newStatusLines("tl")
	assert.Equal(t, "HTTP/1.1 200 OK\r\nServer: tl\r\n", string(s.appendLine(nil, 200, nil)))
	assert.Equal(t, "HTTP/1.1 404 Gone Fishing\r\nServer: tl\r\n", string(s.appendLine(nil, 404, []byte("Gone Fishing"))))
	assert.Equal(t, "HTTP/1.1 418 I'm a teapot\r\nServer: tl\r\n", string(s.appendLine(nil, 418, nil)))
	assert.Equal(t, "HTTP/1.1 599 Unknown\r\nServer: tl\r\n", string(s.appendLine(nil, 599, nil)))
}
