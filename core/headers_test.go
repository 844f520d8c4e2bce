package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{pattern: "/assets/**", yes: []string{"/assets", "/assets/", "/assets/a.js", "/assets/a/b/c.css"}, no: []string{"/", "/assetsx", "/x/assets/a.js"}},
		{pattern: "*.js", yes: []string{"/a.js", "/x/y/.js", "/x/y/z.js"}, no: []string{"/a.json", "/a.js/", "/js"}},
		{pattern: "/*.js", yes: []string{"/a.js"}, no: []string{"/x/a.js"}},
		{pattern: "/", yes: []string{"/"}, no: []string{"/index.html", "/a/"}},
		{pattern: "/docs/", yes: []string{"/docs/"}, no: []string{"/docs", "/docs/a.html"}},
		{pattern: "*", yes: []string{"/", "/a", "/a/b/", "/a/b"}},
		{pattern: "/**", yes: []string{"/", "/a", "/a/b/c"}},
		{pattern: "/**/*.html", yes: []string{"/a.html", "/x/y/a.html"}, no: []string{"/a.htm"}},
		{pattern: "/a/**/z", yes: []string{"/a/z", "/a/b/z", "/a/b/c/z"}, no: []string{"/a/b/c"}},
		{pattern: "/a**b", yes: []string{"/ab", "/axxb"}, no: []string{"/a/b"}},
		{pattern: "?.txt", yes: []string{"/x/a.txt"}, no: []string{"/ab.txt"}},
		{pattern: "[ab].css", yes: []string{"/a.css", "/b.css"}, no: []string{"/c.css"}},
		{pattern: `\*.txt`, yes: []string{"/*.txt"}, no: []string{"/a.txt"}},
	} {
		for _, p := range tc.yes {
			assert.True(t, matchPattern(tc.pattern, p), "%s matches %s", tc.pattern, p)
		}
		for _, p := range tc.no {
			assert.False(t, matchPattern(tc.pattern, p), "%s does not match %s", tc.pattern, p)
		}
	}
}

func TestParseHeaderRule(t *testing.T) {
	h, err := ParseHeaderRule("/assets/**=Cache-Tag:  a=b, c ")
	require.NoError(t, err)
	assert.Equal(t, HeaderRule{Pattern: "/assets/**", Name: "Cache-Tag", Value: "a=b, c"}, h)
	for _, tc := range []struct{ arg, says string }{
		{arg: "*.js", says: "write PATTERN=Name: value"},
		{arg: "*.js=X-A", says: "write PATTERN=Name: value"},
		{arg: "=X-A: b", says: "the pattern is empty"},
		{arg: "assets/*.js=X-A: b", says: "does not start with one"},
		{arg: "/[a=X-A: b", says: "syntax error in pattern"},
		{arg: "*=X A: b", says: `"X A" is not a field name`},
		{arg: "*=X-A : b", says: `"X-A " is not a field name`},
		{arg: "*=Ü: b", says: "is not a field name"},
		{arg: "*=X-A:", says: "the value of X-A is empty"},
		{arg: "*=X-A: a\nb", says: `control byte '\n'`},
		{arg: "*=X-A: a\x00", says: `control byte '\x00'`},
		{arg: "*=content-length: 5", says: "content-length is the server's own field"},
		{arg: "*=Transfer-Encoding: chunked", says: "Transfer-Encoding is the server's own field"},
		{arg: "*=Connection: close", says: "Connection is the server's own field"},
		{arg: "*=Date: x", says: "Date is the server's own field"},
		{arg: "*=ETag: x", says: "ETag is the server's own field"},
		{arg: "*=Cache-Control: x", says: "use --cache-control"},
		// Request paths are cleaned, and hidden names answered 403, before
		// a rule is tried: these could never match (issue 38).
		{arg: "/**/../x=X-A: b", says: `pattern "/**/../x" can never match: request paths are cleaned before they are matched, so none has a ".." segment; write it as a cleaned path reads, such as /x`},
		{arg: "/a/./b/=X-A: b", says: `so none has a "." segment; write it as a cleaned path reads, such as /a/b/`},
		{arg: "..=X-A: b", says: `none has a ".." segment`},
		{arg: "/a//b=X-A: b", says: "none has an empty segment (//); write it as a cleaned path reads, such as /a/b"},
		{arg: "//=X-A: b", says: "none has an empty segment (//)"},
		{arg: "/.git/**=X-A: b", says: `".git" is a hidden name (a leading '.'), answered 403`},
		{arg: ".htaccess=X-A: b", says: `".htaccess" is a hidden name`},
	} {
		_, err := ParseHeaderRule(tc.arg)
		require.Error(t, err, tc.arg)
		assert.Contains(t, err.Error(), tc.says, tc.arg)
		assert.Contains(t, err.Error(), "--header ", tc.arg)
	}
	// What cleaning leaves can match: a directory's trailing slash, the
	// one hidden directory served, a pattern a hidden name only may match
	// as well as .well-known.
	for _, arg := range []string{"/=X-A: b", "/docs/=X-A: b", "/.well-known/**=X-A: b", "/.*/x=X-A: b", "*.js=X-A: b", "/**=X-A: b"} {
		_, err := ParseHeaderRule(arg)
		assert.NoError(t, err, arg)
	}
	_, err = NewServer(Config{Dir: t.TempDir(), Headers: []HeaderRule{{Pattern: "*", Name: "Server", Value: "x"}}})
	require.ErrorContains(t, err, `--header "*=Server: x": Server is the server's own field`)
}

// TestHeaderRulesByAnswer: the rules' fields are on what represents a
// file (200, 206, multipart, 304, HEAD, a directory's index, a listing,
// a sidecar), never on an error, a redirect or OPTIONS; a later rule for
// the same name takes an earlier one's place.
func TestHeaderRulesByAnswer(t *testing.T) {
	rules := []HeaderRule{
		{Pattern: "/**", Name: "X-Frame-Options", Value: "DENY"},
		{Pattern: "*.html", Name: "X-Html", Value: "yes"},
		{Pattern: "/sub/**", Name: "x-frame-options", Value: "SAMEORIGIN"},
		{Pattern: "/list/", Name: "X-Listing", Value: "yes"},
		{Pattern: "*.js", Name: "X-Js", Value: "yes"},
	}
	l, dir := newTestLoop(t, Config{Headers: rules, AutoIndex: true, Precompressed: true})
	require.NoError(t, os.Mkdir(filepath.Join(dir, "list"), 0o755))
	js, _, _, _ := precompressedSite(t, dir)
	answer := func(req string) string { return answerOne(l, req) }
	head := func(req string) string {
		s := answer(req)
		return s[:strings.Index(s, "\r\n\r\n")+2]
	}
	const deny, same, html, listing, jsf = "X-Frame-Options: DENY\r\n", "x-frame-options: SAMEORIGIN\r\n", "X-Html: yes\r\n", "X-Listing: yes\r\n", "X-Js: yes\r\n"
	for _, tc := range []struct {
		req      string
		has, not []string
	}{
		{req: "GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{deny, html}, not: []string{same, listing}},
		{req: "HEAD /index.html HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{deny, html}},
		{req: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{deny, html}}, // as /index.html too
		{req: "GET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{same, html}, not: []string{deny}},
		{req: "GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9\r\n\r\n", has: []string{"206 Partial", deny}},
		{req: "GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=0-9,20-29\r\n\r\n", has: []string{"multipart/byteranges", deny}},
		{req: "GET /list/ HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{deny, listing}, not: []string{html}},
		{req: "GET /app.js HTTP/1.1\r\nHost: a\r\nAccept-Encoding: br\r\n\r\n", has: []string{"Content-Encoding: br", deny, jsf}},
		{req: "GET /nope.html HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{"404 Not Found"}, not: []string{deny, html}},
		{req: "GET /sub HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{"301 Moved"}, not: []string{deny, same}},
		{req: "OPTIONS /index.html HTTP/1.1\r\nHost: a\r\n\r\n", has: []string{"204 No Content"}, not: []string{deny}},
		{req: "GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=999999-\r\n\r\n", has: []string{"416 Requested Range"}, not: []string{deny}},
	} {
		h := head(tc.req)
		for _, s := range tc.has {
			assert.Contains(t, h, s, tc.req)
		}
		for _, s := range tc.not {
			assert.NotContains(t, h, s, tc.req)
		}
	}
	assert.Contains(t, answer("GET /app.js HTTP/1.1\r\nHost: a\r\n\r\n"), string(js))

	// 304 repeats them, as it repeats Cache-Control (RFC 9110 §15.4.5:
	// a cache updates its stored fields from it).
	full := head("GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n")
	h := head("GET /index.html HTTP/1.1\r\nHost: a\r\nIf-None-Match: " + etagOf(full) + "\r\n\r\n")
	assert.Contains(t, h, "304 Not Modified")
	assert.Contains(t, h, deny+html)
}

// answerOne is the whole answer to req on a new connection.
func answerOne(l *Loop, req string) string {
	c := l.NewConn(netipNone)
	defer l.FreeConn(c)
	c.Feed([]byte(req))
	mem, _ := drain(c)
	return string(mem)
}

// etagOf is the ETag value in an answer's head.
func etagOf(answer string) string {
	etag := answer[strings.Index(answer, "ETag: ")+6:]
	return etag[:strings.Index(etag, "\r\n")]
}
