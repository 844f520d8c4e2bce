package core

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAcceptEncoding(t *testing.T) {
	// br, zstd, gzip; identity.
	for _, tc := range []struct {
		h        string
		codings  [numCodings]int
		identity int
	}{
		{h: "", identity: 1000},
		{h: "gzip, deflate, br, zstd", codings: [numCodings]int{1000, 1000, 1000}, identity: 1000},
		{h: "gzip;q=0.5, br;q=0.8", codings: [numCodings]int{800, 0, 500}, identity: 1000},
		{h: "GZIP ; Q=1.0", codings: [numCodings]int{0, 0, 1000}, identity: 1000},
		{h: "x-gzip", codings: [numCodings]int{0, 0, 1000}, identity: 1000},
		{h: "*", codings: [numCodings]int{1000, 1000, 1000}, identity: 1000},
		{h: "*;q=0", codings: [numCodings]int{0, 0, 0}, identity: 0},
		{h: "*;q=0, identity", codings: [numCodings]int{0, 0, 0}, identity: 1000},
		{h: "br;q=0, *;q=0.3", codings: [numCodings]int{0, 300, 300}, identity: 300},
		{h: "identity;q=0, gzip", codings: [numCodings]int{0, 0, 1000}, identity: 0},
		{h: "gzip;q=0.001, zstd;q=0.", codings: [numCodings]int{0, 0, 1}, identity: 1000},
		// Malformed weights drop their element.
		{h: "gzip;q=2, br;q=0.1234, zstd;level=3, , identity;q=1.5", identity: 1000},
		{h: "br, br;q=0", codings: [numCodings]int{1000, 0, 0}, identity: 1000},
	} {
		a := parseAcceptEncoding([]byte(tc.h))
		assert.Equal(t, tc.codings, a.coding, tc.h)
		assert.Equal(t, tc.identity, a.identity, tc.h)
	}
}

// precompressedSite writes app.js and its sidecars; the gzip one is the
// smallest, br the largest.
func precompressedSite(t *testing.T, dir string) (js, br, zst, gz []byte) {
	t.Helper()
	js = bytes.Repeat([]byte("console.log(1);\n"), 100)
	br, zst, gz = []byte("BROTLI-BYTES-1234"), []byte("ZSTD-BYTES-123"), []byte("GZIP-BYTES")
	old := time.Now().Add(-time.Hour)
	for name, b := range map[string][]byte{"app.js": js, "app.js.br": br, "app.js.zst": zst, "app.js.gz": gz} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		require.NoError(t, os.Chtimes(p, old, old))
	}
	return js, br, zst, gz
}

func TestConnPrecompressed(t *testing.T) {
	l, dir := newTestLoop(t, Config{Precompressed: true})
	js, br, zst, gz := precompressedSite(t, dir)
	get := func(method, fields string) (head, body string) {
		c := l.NewConn(netipNone)
		defer l.FreeConn(c)
		c.Feed([]byte(method + " /app.js HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n"))
		mem, _ := drain(c)
		s := string(mem)
		i := strings.Index(s, "\r\n\r\n") + 4
		return s[:i], s[i:]
	}
	for _, tc := range []struct {
		ae, coding string
		body       []byte
	}{
		{ae: "", body: js},                      // no field: the file as it is
		{ae: "Accept-Encoding: \r\n", body: js}, // empty: no coding wanted
		{ae: "Accept-Encoding: gzip, deflate, br, zstd\r\n", coding: "gzip", body: gz}, // the smallest
		{ae: "Accept-Encoding: br, zstd\r\n", coding: "zstd", body: zst},
		{ae: "Accept-Encoding: br\r\n", coding: "br", body: br},
		{ae: "Accept-Encoding: gzip;q=0.5, br\r\n", coding: "br", body: br}, // weight before size
		{ae: "Accept-Encoding: gzip;q=0.5\r\n", body: js},                   // identity, unnamed, is acceptable at 1
		{ae: "Accept-Encoding: gzip;q=0.5, identity;q=0.1\r\n", coding: "gzip", body: gz},
		{ae: "Accept-Encoding: *\r\n", coding: "gzip", body: gz},
		{ae: "Accept-Encoding: *;q=0, br\r\n", coding: "br", body: br},
		{ae: "Accept-Encoding: gzip;q=0, zstd;q=0, br;q=0\r\n", body: js},
		{ae: "Accept-Encoding: deflate\r\n", body: js},
		{ae: "Accept-Encoding: identity;q=0, deflate\r\n", body: js}, // nothing acceptable: the field is disregarded
	} {
		head, body := get("GET", tc.ae)
		assert.Equal(t, string(tc.body), body, tc.ae)
		assert.Contains(t, head, "\r\nVary: Accept-Encoding\r\n", tc.ae)
		assert.Contains(t, head, "\r\nContent-Type: text/javascript; charset=utf-8\r\n", tc.ae)
		if tc.coding == "" {
			assert.NotContains(t, head, "Content-Encoding", tc.ae)
			assert.Regexp(t, `\r\nETag: "[0-9a-f]+-640"\r\n`, head, tc.ae)
		} else {
			assert.Contains(t, head, "\r\nContent-Encoding: "+tc.coding+"\r\n", tc.ae)
			assert.Regexp(t, `\r\nETag: "[0-9a-f]+-[0-9a-f]+-`+tc.coding+`"\r\n`, head, tc.ae)
		}
		hh, hb := get("HEAD", tc.ae)
		assert.Equal(t, head, hh, "HEAD "+tc.ae)
		assert.Empty(t, hb)
	}

	// Each representation has its ETag; conditionals and ranges apply to
	// the one selected.
	ae := "Accept-Encoding: gzip\r\n"
	head, _ := get("GET", ae)
	etag := head[strings.Index(head, "ETag: ")+6:]
	etag = etag[:strings.Index(etag, "\r\n")]
	idHead, _ := get("GET", "")
	idTag := idHead[strings.Index(idHead, "ETag: ")+6:]
	idTag = idTag[:strings.Index(idTag, "\r\n")]
	assert.NotEqual(t, etag, idTag)

	h304, b304 := get("GET", ae+"If-None-Match: "+etag+"\r\n")
	assert.True(t, strings.HasPrefix(h304, "HTTP/1.1 304 Not Modified\r\n"), h304)
	assert.Contains(t, h304, "\r\nVary: Accept-Encoding\r\n")
	assert.Contains(t, h304, "\r\nETag: "+etag+"\r\n")
	assert.Empty(t, b304)
	hID304, _ := get("GET", "If-None-Match: "+idTag+"\r\n")
	assert.True(t, strings.HasPrefix(hID304, "HTTP/1.1 304 "), "identity's 304")
	assert.Contains(t, hID304, "\r\nVary: Accept-Encoding\r\n", "identity's 304 varies too")
	h, _ := get("GET", ae+"If-None-Match: "+idTag+"\r\n")
	assert.True(t, strings.HasPrefix(h, "HTTP/1.1 200 "), "the identity ETag is not the gzip one's")
	h, _ = get("GET", ae+"If-Match: "+idTag+"\r\n")
	assert.True(t, strings.HasPrefix(h, "HTTP/1.1 412 "), h)
	assert.Contains(t, h, "\r\nVary: Accept-Encoding\r\n")

	h, b := get("GET", ae+"Range: bytes=2-5\r\n")
	assert.True(t, strings.HasPrefix(h, "HTTP/1.1 206 "), h)
	assert.Contains(t, h, "\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\nContent-Range: bytes 2-5/10\r\n")
	assert.Equal(t, string(gz[2:6]), b)
	_, b = get("GET", ae+"Range: bytes=2-5\r\nIf-Range: "+etag+"\r\n")
	assert.Equal(t, string(gz[2:6]), b)
	_, b = get("GET", ae+"Range: bytes=2-5\r\nIf-Range: "+idTag+"\r\n")
	assert.Equal(t, string(gz), b, "If-Range with another representation's ETag: the whole representation")
	h, _ = get("GET", ae+"Range: bytes=20-\r\n")
	assert.Contains(t, h, "416 ")
	assert.Contains(t, h, "\r\nContent-Range: bytes */10\r\n")
	h, b = get("GET", ae+"Range: bytes=0-1,8-9\r\n")
	assert.Contains(t, h, "multipart/byteranges")
	assert.NotContains(t, h, "Content-Encoding", "the multipart wrapper is not gzip")
	assert.Contains(t, b, "\r\nContent-Type: text/javascript; charset=utf-8\r\nContent-Encoding: gzip\r\nContent-Range: bytes 0-1/10\r\n\r\nGZ\r\n")

	// The sidecar itself is an ordinary gzip file.
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /app.js.gz HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"))
	mem, _ := drain(c)
	assert.Contains(t, string(mem), "\r\nContent-Type: application/gzip\r\nContent-Length: 10\r\n")
	assert.NotContains(t, string(mem), "Content-Encoding")
	assert.NotContains(t, string(mem), "Vary")
	assert.True(t, bytes.HasSuffix(mem, gz))
	l.FreeConn(c)

	// A file without sidecars does not vary.
	c = l.NewConn(netipNone)
	c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"))
	mem, _ = drain(c)
	assert.NotContains(t, string(mem), "Vary")
	l.FreeConn(c)
}

func TestPrecompressedHitCostsNoSyscall(t *testing.T) {
	l, dir := newTestLoop(t, Config{Precompressed: true})
	precompressedSite(t, dir)
	c := l.NewConn(netipNone)
	req := []byte("GET /app.js HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n\r\n")
	c.Feed(req)
	drain(c)
	before := l.Stats.Syscalls
	allocs := testing.AllocsPerRun(100, func() {
		c.Feed(req)
		o := c.Out()
		c.Sent(o.Len())
	})
	assert.Zero(t, allocs)
	assert.Equal(t, before, l.Stats.Syscalls, "the sidecars are looked up with the file, not per request")
}

func TestPrecompressedStaleAndChanged(t *testing.T) {
	l, dir := newTestLoop(t, Config{Precompressed: true})
	js, _, _, gz := precompressedSite(t, dir)
	now := time.Now()
	l.Tick(now)
	get := func() []byte {
		c := l.NewConn(netipNone)
		defer l.FreeConn(c)
		c.Feed([]byte("GET /app.js HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"))
		mem, _ := drain(c)
		return mem
	}
	require.True(t, bytes.HasSuffix(get(), gz))

	// The source changes: its sidecars are now older, and ignored.
	js2 := append(js, "//v2\n"...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.js"), js2, 0o644))
	now = now.Add(1100 * time.Millisecond)
	l.Tick(now)
	mem := get()
	assert.True(t, bytes.HasSuffix(mem, js2), "a sidecar older than its source is not sent")
	assert.NotContains(t, string(mem), "Vary", "no usable sidecar: nothing varies")

	// A new sidecar is seen within a second.
	gz2 := []byte("NEW-GZIP")
	future := time.Now().Add(time.Minute)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.js.gz"), gz2, 0o644))
	require.NoError(t, os.Chtimes(filepath.Join(dir, "app.js.gz"), future, future))
	now = now.Add(1100 * time.Millisecond)
	l.Tick(now)
	assert.True(t, bytes.HasSuffix(get(), gz2))

	// Removed again: the file itself.
	require.NoError(t, os.Remove(filepath.Join(dir, "app.js.gz")))
	now = now.Add(1100 * time.Millisecond)
	l.Tick(now)
	assert.True(t, bytes.HasSuffix(get(), js2))
}

func TestPrecompressedClosesSidecars(t *testing.T) {
	l, dir := newTestLoop(t, Config{Precompressed: true, MemBodyMax: 1})
	precompressedSite(t, dir)
	before := countFDs(t)
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /app.js HTTP/1.1\r\nHost: a\r\nAccept-Encoding: br\r\n\r\n"))
	o := c.Out()
	require.NotNil(t, o.File, "sent from the sidecar's fd")
	assert.Equal(t, int64(17), o.N)
	assert.Equal(t, before+4, countFDs(t), "the file and its three sidecars")
	l.cache.close()
	assert.Equal(t, before+1, countFDs(t), "the sidecar being sent stays open")
	c.Sent(o.Len())
	assert.Equal(t, before, countFDs(t))
	l.FreeConn(c)
}
