package core

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRanges(t *testing.T) {
	cases := []struct {
		h   string
		max int
		res rangeResult
		rs  []byteRange
	}{
		{h: "bytes=0-99", res: rangeOK, rs: []byteRange{{0, 100}}},
		{h: "bytes=100-", res: rangeOK, rs: []byteRange{{100, 1000}}},
		{h: "bytes=-100", res: rangeOK, rs: []byteRange{{900, 1000}}},
		{h: "bytes=-5000", res: rangeOK, rs: []byteRange{{0, 1000}}},
		{h: "bytes=500-5000", res: rangeOK, rs: []byteRange{{500, 1000}}},
		{h: "BYTES=0-0", res: rangeOK, rs: []byteRange{{0, 1}}},
		{h: "bytes=1000-", res: rangeUnsat},
		{h: "bytes=-0", res: rangeUnsat},
		{h: "bytes=1000-1001, 2000-", res: rangeUnsat},
		{h: "bytes=5-1", res: rangeIgnore},
		{h: "items=0-1", res: rangeIgnore},
		{h: "bytes=a-b", res: rangeIgnore},
		{h: "bytes=-", res: rangeIgnore},
		{h: "bytes=", res: rangeIgnore},
		{h: "bytes=99999999999999999999-", res: rangeIgnore},
		{h: "bytes=0-1,x", res: rangeIgnore, rs: nil},
		// Several ranges, in the order asked; unsatisfiable ones dropped.
		{h: "bytes=0-1,5-6", res: rangeOK, rs: []byteRange{{0, 2}, {5, 7}}},
		{h: "bytes=500-599, 0-9 ,, -10", res: rangeOK, rs: []byteRange{{500, 600}, {0, 10}, {990, 1000}}},
		{h: "bytes=0-1,5000-", res: rangeOK, rs: []byteRange{{0, 2}}},
		// Overlapping and adjacent ranges coalesce, into the first's place.
		{h: "bytes=10-19,0-4,15-29", res: rangeOK, rs: []byteRange{{10, 30}, {0, 5}}},
		{h: "bytes=0-4,5-9", res: rangeOK, rs: []byteRange{{0, 10}}},
		{h: "bytes=0-4,20-29,10-14,5-9", res: rangeOK, rs: []byteRange{{0, 15}, {20, 30}}},
		{h: "bytes=0-4,6-9", res: rangeOK, rs: []byteRange{{0, 5}, {6, 10}}},
		// More than the file in total, or too many: the whole file.
		{h: "bytes=0-,0-", res: rangeIgnore},
		{h: "bytes=0-599,500-999", res: rangeIgnore},
		{h: "bytes=0-1,3-4,6-7", max: 2, res: rangeIgnore},
		{h: "bytes=0-1,3-4", max: 2, res: rangeOK, rs: []byteRange{{0, 2}, {3, 5}}},
	}
	for _, tc := range cases {
		m := tc.max
		if m == 0 {
			m = 100
		}
		rs, res := parseRanges([]byte(tc.h), 1000, m, nil)
		assert.Equal(t, tc.res, res, tc.h)
		if res == rangeOK {
			assert.Equal(t, tc.rs, rs, tc.h)
		}
	}
	// Reusing the destination allocates nothing.
	dst := make([]byteRange, 0, 8)
	h := []byte("bytes=0-1,10-19,5-6")
	assert.Zero(t, testing.AllocsPerRun(100, func() { parseRanges(h, 1000, 100, dst) }))
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-99", "bytes=-5", "bytes=10-", "bytes=0-1,2-3", "bytes=9-1", "bytes=0-1,1-5,3-"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -size
		}
		rs, res := parseRanges([]byte(h), size, 100, nil)
		if res != rangeOK {
			return
		}
		var total int64
		for i, r := range rs {
			if r.start < 0 || r.start >= r.end || r.end > size {
				t.Fatalf("%q on %d gave %+v", h, size, rs)
			}
			for _, o := range rs[:i] {
				if o.start <= r.end && r.start <= o.end {
					t.Fatalf("%q on %d: %+v and %+v touch", h, size, o, r)
				}
			}
			total += r.end - r.start
		}
		if total > size {
			t.Fatalf("%q on %d: %d bytes in ranges", h, size, total)
		}
	})
}

var boundaryRE = regexp.MustCompile(`boundary=(twinloop[0-9a-f]{16})\r\n`)

// TestConnMultipart checks a multipart/byteranges answer byte for byte,
// from memory and from the file, and that HEAD gets the same header.
func TestConnMultipart(t *testing.T) {
	l, dir := newTestLoop(t, Config{})
	data := make([]byte, 200<<10)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "small.txt"), data[:1000], 0o644))

	for _, tc := range []struct {
		path string
		size int
	}{{path: "/small.txt", size: 1000}, {path: "/big.txt", size: 200 << 10}} {
		c := l.NewConn(netipNone)
		c.Feed(fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1, 900-909,5-6,-3\r\n\r\nGET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n", tc.path))
		var mem []byte
		var parts int
		for c.Next() == ActWrite {
			o := c.Out()
			mem = append(mem, o.Mem...)
			if o.File != nil {
				parts++
				mem = append(mem, data[o.Off:o.Off+o.N]...)
			}
			c.Sent(o.Len())
		}
		if tc.size > 1000 {
			assert.Equal(t, 4, parts, "each part's range goes out from the file")
		} else {
			assert.Zero(t, parts)
		}
		m := boundaryRE.FindSubmatch(mem)
		require.NotNil(t, m, string(mem))
		b := string(m[1])
		size := fmt.Sprint(tc.size)
		body := "--" + b + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 0-1/" + size + "\r\n\r\nab" +
			"\r\n--" + b + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 900-909/" + size + "\r\n\r\n" + string(data[900:910]) +
			"\r\n--" + b + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 5-6/" + size + "\r\n\r\nfg" +
			"\r\n--" + b + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes " + fmt.Sprint(tc.size-3, "-", tc.size-1, "/", tc.size) + "\r\n\r\n" + string(data[tc.size-3:tc.size]) +
			"\r\n--" + b + "--\r\n"
		s := string(mem)
		i := strings.Index(s, "\r\n\r\n")
		require.Greater(t, i, 0)
		head := s[:i+4]
		assert.True(t, strings.HasPrefix(head, "HTTP/1.1 206 Partial Content\r\n"), head)
		assert.Contains(t, head, "\r\nContent-Type: multipart/byteranges; boundary="+b+"\r\n")
		assert.Contains(t, head, fmt.Sprintf("\r\nContent-Length: %d\r\n", len(body)))
		assert.Contains(t, head, "\r\nAccept-Ranges: bytes\r\n")
		assert.NotContains(t, head, "Content-Range")
		rest := s[i+4:]
		require.True(t, strings.HasPrefix(rest, body), "%q", rest)
		assert.True(t, strings.HasPrefix(rest[len(body):], "HTTP/1.1 200 OK\r\n"), "the pipelined request is answered after the closing delimiter")
		assert.True(t, strings.HasSuffix(rest, "\r\n\r\nsub\n"))

		c.Feed(fmt.Appendf(nil, "HEAD %s HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1, 900-909,5-6,-3\r\n\r\n", tc.path))
		hm, n := drain(c)
		assert.Zero(t, n)
		assert.Equal(t, boundaryRE.ReplaceAllString(head, "B"), boundaryRE.ReplaceAllString(string(hm), "B"), "HEAD: the same header, no body")
		l.FreeConn(c)
	}
}

func TestConnRangeStatuses(t *testing.T) {
	l, _ := newTestLoop(t, Config{MaxRanges: 2})
	get := func(extra string) string {
		c := l.NewConn(netipNone)
		defer l.FreeConn(c)
		c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\n" + extra + "\r\n"))
		mem, _ := drain(c)
		return string(mem)
	}
	assert.True(t, strings.HasPrefix(get("Range: bytes=0-1,3-4,6-7\r\n"), "HTTP/1.1 200 OK\r\n"), "more than MaxRanges")
	assert.True(t, strings.HasPrefix(get("Range: bytes=0-1,3-4\r\n"), "HTTP/1.1 206 "))
	assert.True(t, strings.HasPrefix(get("Range: bytes=0-,0-\r\n"), "HTTP/1.1 200 OK\r\n"), "more than the file")
	one := get("Range: bytes=0-4,5-9\r\n")
	assert.Contains(t, one, "\r\nContent-Range: bytes 0-9/1500\r\nLast-Modified: ", "adjacent ranges coalesce into one part")
	assert.Contains(t, one, "\r\nContent-Length: 10\r\n")
	r416 := get("Range: bytes=2000-,3000-3001\r\n")
	assert.True(t, strings.HasPrefix(r416, "HTTP/1.1 416 Requested Range Not Satisfiable\r\n"), r416)
	assert.Contains(t, r416, "\r\nContent-Range: bytes */1500\r\n")

	off, _ := newTestLoop(t, Config{MaxRanges: -1})
	c := off.NewConn(netipNone)
	c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n"))
	mem, _ := drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")))
	assert.Contains(t, string(mem), "\r\nAccept-Ranges: none\r\n")
}

// TestConnMultipartFromFileInPieces sends a multipart body from the file a
// few bytes at a time, as a slow socket would take it.
func TestConnMultipartFromFileInPieces(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=10-5009,100000-100099\r\n\r\n"))
	var mem []byte
	var fileBytes int64
	for c.Next() == ActWrite {
		o := c.Out()
		k := min(int64(len(o.Mem)), 7)
		if k == 0 {
			k = min(o.N, 1000)
			fileBytes += k
			mem = append(mem, bytes.Repeat([]byte("b"), int(k))...)
		} else {
			mem = append(mem, o.Mem[:k]...)
		}
		c.Sent(k)
	}
	assert.Equal(t, int64(5100), fileBytes)
	m := boundaryRE.FindSubmatch(mem)
	require.NotNil(t, m)
	s := string(mem)
	i := strings.Index(s, "\r\n\r\n") + 4
	assert.Contains(t, s[:i], fmt.Sprintf("Content-Length: %d\r\n", len(s)-i))
	assert.True(t, strings.HasSuffix(s, "\r\n--"+string(m[1])+"--\r\n"))
	assert.Equal(t, ActRead, c.Next())
}
