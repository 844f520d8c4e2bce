package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIfMatch(t *testing.T) {
	etag := []byte(`"abc-5"`)
	for h, want := range map[string]bool{
		`"abc-5"`:         true,
		`"x", "abc-5"`:    true,
		` "x" , "abc-5" `: true,
		`*`:               true,
		`W/"abc-5"`:       false, // strong comparison: a weak tag never matches
		`"abc"`:           false,
		`abc-5`:           false,
		`"x",`:            false,
	} {
		assert.Equal(t, want, ifMatch([]byte(h), etag), h)
	}
}

// TestPreconditionOrder walks RFC 9110 §13.2.2 step by step on a Conn.
func TestPreconditionOrder(t *testing.T) {
	l, dir := newTestLoop(t, Config{})
	mtime := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "index.html"), mtime, mtime))
	etag := `"65e1c340-5dc"`
	lm := "Fri, 01 Mar 2024 12:00:00 GMT"
	before, after := "Thu, 29 Feb 2024 12:00:00 GMT", "Sat, 02 Mar 2024 12:00:00 GMT"
	status := func(method, fields string) string {
		c := l.NewConn(netipNone)
		defer l.FreeConn(c)
		c.Feed([]byte(method + " /index.html HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n"))
		mem, _ := drain(c)
		s := string(mem)
		return s[len("HTTP/1.1 "):strings.Index(s, "\r\n")]
	}
	for _, tc := range []struct {
		fields, want string
	}{
		{fields: "", want: "200 OK"},
		// Step 1: If-Match, strong.
		{fields: "If-Match: " + etag + "\r\n", want: "200 OK"},
		{fields: "If-Match: *\r\n", want: "200 OK"},
		{fields: "If-Match: \"nope\"\r\n", want: "412 Precondition Failed"},
		{fields: "If-Match: W/" + etag + "\r\n", want: "412 Precondition Failed"},
		// Step 2: If-Unmodified-Since, ignored under If-Match or when not a date.
		{fields: "If-Unmodified-Since: " + lm + "\r\n", want: "200 OK"},
		{fields: "If-Unmodified-Since: " + after + "\r\n", want: "200 OK"},
		{fields: "If-Unmodified-Since: " + before + "\r\n", want: "412 Precondition Failed"},
		{fields: "If-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT\r\n", want: "412 Precondition Failed"},
		{fields: "If-Unmodified-Since: yesterday\r\n", want: "200 OK"},
		{fields: "If-Match: " + etag + "\r\nIf-Unmodified-Since: " + before + "\r\n", want: "200 OK"},
		// A failed If-Match wins over a matching If-None-Match.
		{fields: "If-Match: \"nope\"\r\nIf-None-Match: " + etag + "\r\n", want: "412 Precondition Failed"},
		{fields: "If-Unmodified-Since: " + before + "\r\nIf-None-Match: " + etag + "\r\n", want: "412 Precondition Failed"},
		// Step 3 and 4: If-None-Match, then If-Modified-Since only without it.
		{fields: "If-Match: " + etag + "\r\nIf-None-Match: " + etag + "\r\n", want: "304 Not Modified"},
		{fields: "If-None-Match: \"other\"\r\nIf-Modified-Since: " + lm + "\r\n", want: "200 OK"},
		{fields: "If-Modified-Since: " + lm + "\r\n", want: "304 Not Modified"},
		{fields: "If-Modified-Since: " + before + "\r\n", want: "200 OK"},
		{fields: "If-Modified-Since: Friday, 01-Mar-24 12:00:00 GMT\r\n", want: "304 Not Modified"},
		// Step 5: If-Range decides whether Range applies.
		{fields: "Range: bytes=0-1\r\nIf-Range: " + etag + "\r\n", want: "206 Partial Content"},
		{fields: "Range: bytes=0-1\r\nIf-Range: " + lm + "\r\n", want: "206 Partial Content"},
		{fields: "Range: bytes=0-1\r\nIf-Range: W/" + etag + "\r\n", want: "200 OK"},
		{fields: "Range: bytes=0-1\r\nIf-Range: " + after + "\r\n", want: "200 OK"},
		{fields: "Range: bytes=0-1\r\nIf-Match: \"nope\"\r\n", want: "412 Precondition Failed"},
		{fields: "Range: bytes=0-1\r\nIf-None-Match: " + etag + "\r\n", want: "304 Not Modified"},
	} {
		assert.Equal(t, tc.want, status("GET", tc.fields), tc.fields)
		assert.Equal(t, tc.want, status("HEAD", tc.fields), "HEAD "+tc.fields)
	}

	// The 412 is nginx's error page, and the connection stays open.
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\nIf-Match: \"nope\"\r\n\r\n"))
	mem, _ := drain(c)
	page := "<html>\r\n<head><title>412 Precondition Failed</title></head>\r\n<body>\r\n<center><h1>412 Precondition Failed</h1></center>\r\n<hr><center>twinloop</center>\r\n</body>\r\n</html>\r\n"
	assert.True(t, strings.HasSuffix(string(mem), "\r\nContent-Type: text/html\r\nContent-Length: 169\r\n\r\n"+page), string(mem))
	assert.Equal(t, ActRead, c.Next())
}

func TestCacheControl(t *testing.T) {
	l, dir := newTestLoop(t, Config{CacheControl: "public, max-age=60", CacheControlByExt: map[string]string{".css": "max-age=31536000, immutable"}})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.CSS"), []byte("p{}"), 0o644))
	get := func(path, fields string) string {
		c := l.NewConn(netipNone)
		defer l.FreeConn(c)
		c.Feed([]byte("GET " + path + " HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n"))
		mem, _ := drain(c)
		return string(mem)
	}
	ok := get("/index.html", "")
	assert.Contains(t, ok, "\"\r\nCache-Control: public, max-age=60\r\nAccept-Ranges: bytes\r\n\r\n")
	etag := ok[strings.Index(ok, "ETag: ")+6 : strings.Index(ok, "\r\nCache-Control")]
	nm := get("/index.html", "If-None-Match: "+etag+"\r\n")
	assert.True(t, strings.HasSuffix(nm, "ETag: "+etag+"\r\nCache-Control: public, max-age=60\r\n\r\n"), "a 304 repeats Cache-Control (RFC 9110 §15.4.5): %q", nm)
	assert.Contains(t, get("/a.CSS", ""), "\r\nCache-Control: max-age=31536000, immutable\r\n")
	assert.Contains(t, get("/index.html", "Range: bytes=1-2\r\n"), "\r\nCache-Control: public, max-age=60\r\n")
	assert.NotContains(t, get("/nothing", ""), "Cache-Control")
}
