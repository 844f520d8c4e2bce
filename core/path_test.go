package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolvePath(t *testing.T) {
	cases := []struct {
		raw    string
		rel    string
		dir    bool
		status int
	}{
		{raw: "/", rel: "", dir: true},
		{raw: "/index.html", rel: "index.html"},
		{raw: "/sub/", rel: "sub", dir: true},
		{raw: "/sub", rel: "sub"},
		{raw: "/a//b", rel: "a/b"},
		{raw: "/a/./b", rel: "a/b"},
		{raw: "/a/../b", rel: "b"},
		{raw: "/a/b/..", rel: "a", dir: true},
		{raw: "/a/.", rel: "a", dir: true},
		{raw: "/%61%62c", rel: "abc"},
		{raw: "/with%20space", rel: "with space"},
		{raw: "/a%2Fb", rel: "a/b"},
		{raw: "/.well-known/x", rel: ".well-known/x"},
		{raw: "/..\\x", status: 403}, // a literal backslash file name, but hidden
		{raw: "/a\\..\\b", rel: "a\\..\\b"},
		{raw: "/..", status: 400},
		{raw: "/../etc/passwd", status: 400},
		{raw: "/a/../../etc/passwd", status: 400},
		{raw: "/%2e%2e/etc/passwd", status: 400},
		{raw: "/%2E%2E%2Fetc", status: 400},
		{raw: "/a%2f..%2f..%2fetc", status: 400},
		{raw: "/%252e%252e/x", rel: "%2e%2e/x"}, // decoded once, as nginx: a literal name
		{raw: "/x%00", status: 400},
		{raw: "/x%0", status: 400},
		{raw: "/x%zz", status: 400},
		{raw: "/.git/config", status: 403},
		{raw: "/a/.env", status: 403},
		{raw: "/%2egit", status: 403},
		{raw: "x", status: 400},
	}
	buf := make([]byte, 0, 64)
	for _, tc := range cases {
		rel, dir, status := resolvePath(buf, []byte(tc.raw))
		assert.Equal(t, tc.status, status, tc.raw)
		if tc.status == 0 {
			assert.Equal(t, tc.rel, string(rel), tc.raw)
			assert.Equal(t, tc.dir, dir, tc.raw)
		}
	}
}

func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"/", "/a/../b", "/%2e%2e/x", "/a//b/./c/", "/.%2e/", "/x%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		rel, _, status := resolvePath(nil, []byte(raw))
		if status != 0 {
			return
		}
		// Whatever is accepted stays below the root: no leading slash and
		// no ".." segment once cleaned.
		s := string(rel)
		if len(s) > 0 && s[0] == '/' {
			t.Fatalf("%q resolved to absolute %q", raw, s)
		}
		for _, seg := range splitSlash(s) {
			if seg == ".." || seg == "." || seg == "" && s != "" {
				t.Fatalf("%q resolved to unclean %q", raw, s)
			}
		}
	})
}

func splitSlash(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '/' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestIfNoneMatch(t *testing.T) {
	etag := []byte(`"abc-5"`)
	for h, want := range map[string]bool{
		`"abc-5"`:          true,
		`W/"abc-5"`:        true,
		`"x", "abc-5"`:     true,
		` "x" ,W/"abc-5" `: true,
		`*`:                true,
		`"abc"`:            false,
		`abc-5`:            false,
		`"x",`:             false,
	} {
		assert.Equal(t, want, ifNoneMatch([]byte(h), etag), h)
	}
}

func TestAppendPathEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"a/b c":        "a/b%20c",
		"a?b#c%d":      "a%3Fb%23c%25d",
		"cr\r\nlf\x00": "cr%0D%0Alf%00",
		"é":            "%C3%A9",
		"k=v;x,y@z:~":  "k=v;x,y@z:~",
	} {
		got := appendPathEscaped(nil, []byte(in))
		assert.Equal(t, want, string(got))
		// Decoding it gives the name back.
		dec, _, status := resolvePath(nil, append([]byte("/x/"), got...))
		if !strings.Contains(in, "\x00") {
			assert.Equal(t, 0, status)
			assert.Equal(t, "x/"+in, string(dec))
		}
	}
}
