package core

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memLoop is a test loop with a 64 KiB file, kept in memory and so sent
// by reference (issue 20).
func memLoop(t testing.TB, cfg Config) (*Loop, []byte) {
	l, dir := newTestLoop(t, cfg)
	body := make([]byte, 64<<10)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "64k.bin"), body, 0o644))
	return l, body
}

// gather is what Out says to send from memory, in order.
func gather(o Out) []byte {
	if o.Vec == nil {
		return append([]byte(nil), o.Mem...)
	}
	return bytes.Join(o.Vec, nil)
}

func TestConnReferencesLargeMemoryBody(t *testing.T) {
	l, body := memLoop(t, Config{MemBodyMax: 64 << 10})
	a, b := l.NewConn(netipNone), l.NewConn(netipNone)
	a.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	b.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	oa, ob := a.Out(), b.Out()
	require.NotNil(t, oa.Body)
	assert.Contains(t, string(oa.Mem), "Content-Length: 65536\r\n")
	assert.True(t, bytes.HasSuffix(oa.Mem, []byte("\r\n\r\n")), "Mem is the header alone")
	assert.Equal(t, body, oa.Body)
	assert.Same(t, &oa.Body[0], &ob.Body[0], "both connections send the cached body itself")
	assert.Less(t, cap(a.out), 4<<10, "the body is not copied into out")
	assert.Equal(t, int64(2), l.Stats.BodyRefs)
	assert.Equal(t, int64(128<<10), l.Stats.BodyRefBytes)
	f := l.cache.m["64k.bin"]
	require.NotNil(t, f)
	assert.True(t, f.mapped, "a referenced body is mapped outside the Go heap")
	assert.Equal(t, 3, f.refs, "the cache and two queued responses")

	// Sent across the header/body boundary, in odd steps.
	var got []byte
	for a.Next() == ActWrite {
		o := a.Out()
		p := gather(o)
		k := min(len(p), 7777)
		got = append(got, p[:k]...)
		a.Sent(int64(k))
	}
	assert.True(t, bytes.HasSuffix(got, body))
	assert.Equal(t, 2, f.refs, "released once its last byte went")
	assert.Equal(t, int64(1), l.Stats.BodyRefs)

	// A connection reset with its body queued gives the reference back.
	b.Sent(10)
	l.FreeConn(b)
	assert.Equal(t, 1, f.refs)
	assert.Equal(t, int64(0), l.Stats.BodyRefs)
	assert.Equal(t, int64(0), l.Stats.BodyRefBytes)
}

func TestConnPipelinedReferencedBodiesInOneVec(t *testing.T) {
	l, body := memLoop(t, Config{MemBodyMax: 64 << 10})
	c := l.NewConn(netipNone)
	const reqs = "GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nGET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n"
	c.Feed([]byte(reqs))
	o := c.Out()
	// header, body, the 1.5 KB response (copied) with the next header,
	// body, the last response.
	require.Len(t, o.Vec, 5)
	assert.Same(t, &o.Vec[1][0], &o.Vec[3][0])
	all := gather(o)
	assert.Equal(t, 4, bytes.Count(all, []byte("HTTP/1.1 200 OK\r\n")))
	assert.Equal(t, 2, bytes.Count(all, body))
	assert.True(t, bytes.HasSuffix(all, []byte("sub\n")))
	assert.Equal(t, o.Len(), int64(len(all)))

	c.Sent(o.Len())
	assert.Equal(t, int64(0), l.Stats.BodyRefs)

	// Any split point gives the same byte stream.
	for _, step := range []int{1 << 10, 65536, 65537, 100000} {
		c.Feed([]byte(reqs))
		var got []byte
		for c.Next() == ActWrite {
			p := gather(c.Out())
			k := min(len(p), step)
			got = append(got, p[:k]...)
			c.Sent(int64(k))
		}
		assert.True(t, bytes.Equal(all, got), "step %d", step) // the Date line is the same within a test
		assert.Equal(t, int64(0), l.Stats.BodyRefs)
		assert.Equal(t, 1, l.cache.m["64k.bin"].refs)
	}
}

func TestConnSmallBodyStillCopied(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"))
	o := c.Out()
	assert.Nil(t, o.Vec)
	assert.Nil(t, o.Body)
	assert.True(t, bytes.HasSuffix(o.Mem, bytes.Repeat([]byte("a"), 1500)))
	assert.False(t, l.cache.m["index.html"].mapped, "a copied body stays on the heap")
}

func TestReferencedBodyOutlivesEviction(t *testing.T) {
	l, body := memLoop(t, Config{MemBodyMax: 64 << 10})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	f := l.cache.m["64k.bin"]
	l.cache.remove(f) // evicted, or replaced on disk
	munmaps := l.Stats.Syscalls[SysMunmap]
	o := c.Out()
	assert.Equal(t, body, o.Body, "the queued response still holds it")
	c.Sent(o.Len())
	assert.Nil(t, f.body)
	assert.Equal(t, munmaps+1, l.Stats.Syscalls[SysMunmap], "unmapped with the last reference")
}

func TestBufBytesFollowsBuffers(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /ind"))
	c.Next()
	assert.Equal(t, int64(cap(c.in)+cap(c.out)), l.Stats.BufBytes)
	assert.Positive(t, l.Stats.BufBytes)
	l.FreeConn(c)
	assert.Equal(t, int64(0), l.Stats.BufBytes)
}

// TestOutRefs: OutRefs names the entries of Vec that are referenced
// bodies, and their Files, as Out lays them out, also part way through
// a body; a Vec without bodies names none.
func TestOutRefs(t *testing.T) {
	l, _ := memLoop(t, Config{MemBodyMax: 64 << 10})
	f := func() *File { return l.cache.m["64k.bin"] }
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nGET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n"))
	o := c.Out()
	bodies, files := c.OutRefs(nil)
	assert.Equal(t, uint64(0b01010), bodies, "header, body, response + header, body, the last response")
	assert.Equal(t, []*File{f(), f()}, files)
	for i, v := range o.Vec {
		if bodies&(1<<i) != 0 {
			assert.Equal(t, 64<<10, len(v), "entry %d", i)
		}
	}
	// Into the first body: no Mem before it.
	c.Sent(int64(len(o.Vec[0]) + 10))
	o = c.Out()
	bodies, files = c.OutRefs(files[:0])
	assert.Equal(t, uint64(0b0101), bodies)
	assert.Len(t, files, 2)
	assert.Equal(t, 64<<10-10, len(o.Vec[0]))
	// Past both bodies: none.
	c.Sent(o.Len())
	bodies, files = c.OutRefs(files[:0])
	assert.Zero(t, bodies)
	assert.Empty(t, files)
}

// BenchmarkServeReferenced is BenchmarkServeHit for the 64 KiB body sent
// by reference: the header alone is built in out (outSlab lends it for
// the response and takes it back).
func BenchmarkServeReferenced(b *testing.B) {
	l, _ := memLoop(b, Config{MemBodyMax: 64 << 10})
	c := l.NewConn(netipNone)
	req := []byte("GET /64k.bin HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	b.ReportAllocs()
	for b.Loop() {
		c.Feed(req)
		for c.Next() == ActWrite {
			c.Sent(c.Out().Len())
		}
	}
}
