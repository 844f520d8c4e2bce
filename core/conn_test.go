package core

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive a Conn the way a backend does, without sockets.

func newTestLoop(t testing.TB, cfg Config) (*Loop, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), bytes.Repeat([]byte("a"), 1500), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("b"), 200<<10), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "index.html"), []byte("sub\n"), 0o644))
	cfg.Dir = dir
	srv, err := NewServer(cfg)
	require.NoError(t, err)
	l := srv.NewLoop(0)
	t.Cleanup(func() { l.Close(); srv.Close() })
	return l, dir
}

// drain sends everything the connection has to send, as a backend would
// with an infinitely fast socket, and returns the memory bytes and the
// number of file bytes.
func drain(c *Conn) (mem []byte, fileBytes int64) {
	for c.Next() == ActWrite {
		o := c.Out()
		mem = append(mem, o.Mem...)
		fileBytes += o.N
		c.Sent(o.Len())
	}
	return mem, fileBytes
}

func TestConnPipelinedInOneBuffer(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /sub/ HTTP/1.1\r\nHost: a\r\n\r\nGET /sub HTTP/1.1\r\nHost: a\r\n\r\n"))
	require.Equal(t, ActWrite, c.Next())
	o := c.Out()
	assert.Nil(t, o.File)
	// Three responses in one buffer, in order.
	s := string(o.Mem)
	assert.Equal(t, 3, strings.Count(s, "HTTP/1.1 "))
	i200, isub, i301 := strings.Index(s, "Content-Length: 1500"), strings.Index(s, "sub\n"), strings.Index(s, "301 Moved")
	assert.True(t, 0 < i200 && i200 < isub && isub < i301, s)
	c.Sent(o.Len())
	assert.Equal(t, ActRead, c.Next())
	assert.Equal(t, uint64(3), l.Stats.Requests)
}

func TestConnSplitAtEveryByte(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	req := []byte("GET /index.html HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n")
	for split := 1; split < len(req); split++ {
		c := l.NewConn(netipNone)
		c.Feed(req[:split])
		require.Equal(t, ActRead, c.Next(), "split %d", split)
		c.Feed(req[split:])
		require.Equal(t, ActWrite, c.Next(), "split %d", split)
		mem, _ := drain(c)
		require.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")))
		require.True(t, bytes.HasSuffix(mem, bytes.Repeat([]byte("a"), 1500)))
		l.FreeConn(c)
	}
}

func TestConnFileBodyHoldsLaterRequests(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	o := c.Out()
	require.NotNil(t, o.File)
	assert.Equal(t, int64(200<<10), o.N)
	assert.Equal(t, int64(0), o.Off)
	assert.Contains(t, string(o.Mem), "Content-Length: 204800\r\n")
	assert.NotContains(t, string(o.Mem), "Content-Length: 1500", "the second response must wait for the file body")
	// Half the header, then the header and some of the file.
	c.Sent(int64(len(o.Mem) / 2))
	c.Sent(int64(len(o.Mem)-len(o.Mem)/2) + 1000)
	o = c.Out()
	assert.Empty(t, o.Mem)
	assert.Equal(t, int64(1000), o.Off)
	c.Sent(o.N)
	o = c.Out()
	assert.Nil(t, o.File)
	assert.Contains(t, string(o.Mem), "Content-Length: 1500")
}

func TestConnCloseAndLinger(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	mem, _ := drain(c)
	assert.Equal(t, 1, bytes.Count(mem, []byte("HTTP/1.1 200")), "nothing is answered after Connection: close")
	assert.Contains(t, string(mem), "Connection: close\r\n")
	assert.Equal(t, ActLinger, c.Next(), "input was left unread: a close now would send a RST")
	c = l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
	require.Equal(t, ActWrite, c.Next())
	assert.True(t, c.WantRead(), "input is read and dropped, not left in the socket")
	c.Feed([]byte("GET / HTTP/1.1\r\n"))
	drain(c)
	assert.Equal(t, ActLinger, c.Next())
	c = l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
	drain(c)
	assert.Equal(t, ActClose, c.Next(), "nothing unread: a plain close")

	// A malformed request: error page, then linger until EOF.
	c = l.NewConn(netipNone)
	c.Feed([]byte("BAD REQUEST LINE\r\n\r\nGET / HTTP/1.1\r\n"))
	mem, _ = drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 400 Bad Request\r\n")))
	require.Equal(t, ActLinger, c.Next())
	c.Linger()
	c.Feed([]byte("more garbage"))
	assert.Equal(t, ActRead, c.Next())
	c.EOF()
	assert.Equal(t, ActClose, c.Next())
}

func TestConnEOFAfterRequest(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	// A client may shut down its write side right after its request: the
	// response still goes out, then the connection closes.
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	c.EOF()
	require.Equal(t, ActWrite, c.Next())
	drain(c)
	assert.Equal(t, ActClose, c.Next())
}

func TestConnTimeouts(t *testing.T) {
	l, _ := newTestLoop(t, Config{HeaderTimeout: 10 * time.Second, KeepAlive: 20 * time.Second, WriteTimeout: 30 * time.Second})
	start := time.Now()
	l.Tick(start)

	partial := l.NewConn(netipNone)
	partial.Feed([]byte("GET / HTTP/1.1\r\nHo"))
	idle := l.NewConn(netipNone)
	idle.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	drain(idle)
	writing := l.NewConn(netipNone)
	writing.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	fresh := l.NewConn(netipNone)

	l.Tick(start.Add(5 * time.Second))
	for _, c := range []*Conn{partial, idle, writing, fresh} {
		assert.Equal(t, ActNone, c.CheckTimeout())
	}
	l.Tick(start.Add(11 * time.Second))
	require.Equal(t, ActWrite, partial.CheckTimeout())
	mem, _ := drain(partial)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 408 Request Timeout\r\n")), string(mem))
	assert.Contains(t, string(mem), "Connection: close")
	assert.Equal(t, ActClose, fresh.CheckTimeout(), "no first request within the header timeout")
	assert.Equal(t, ActNone, idle.CheckTimeout())
	l.Tick(start.Add(21 * time.Second))
	assert.Equal(t, ActClose, idle.CheckTimeout())
	assert.Equal(t, ActNone, writing.CheckTimeout())
	l.Tick(start.Add(31 * time.Second))
	assert.Equal(t, ActClose, writing.CheckTimeout())
}

// TestConnBodyWait: while the backend reads the next part of a file body
// (BodyWait), the wait is held to FSTimeout, not to the write timeout,
// which the peer is not to blame for; once the part is read (Waited) the
// write timeout counts from then.
func TestConnBodyWait(t *testing.T) {
	l, _ := newTestLoop(t, Config{WriteTimeout: 10 * time.Second, FSTimeout: 30 * time.Second})
	start := time.Now()
	l.Tick(start)
	hung := l.NewConn(netipNone)
	hung.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	read := l.NewConn(netipNone)
	read.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	hung.BodyWait()
	read.BodyWait()

	l.Tick(start.Add(5 * time.Second))
	read.Waited()
	l.Tick(start.Add(11 * time.Second))
	assert.Equal(t, ActNone, hung.CheckTimeout(), "past the write timeout: the file system, not the peer, is waited for")
	assert.Equal(t, ActNone, read.CheckTimeout(), "the write timeout counts from the read's end")
	l.Tick(start.Add(16 * time.Second))
	assert.Equal(t, ActClose, read.CheckTimeout(), "no progress for the write timeout after the read")
	timeouts := l.Stats.Timeouts
	l.Tick(start.Add(29 * time.Second))
	hung.BodyWait() // a wait under way is not restarted
	l.Tick(start.Add(31 * time.Second))
	assert.Equal(t, ActClose, hung.CheckTimeout(), "at FSTimeout: closed, its header being out")
	assert.Equal(t, timeouts+1, l.Stats.Timeouts)
}

func TestConnDrainClosesAfterResponse(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	l.Drain()
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	mem, _ := drain(c)
	assert.Contains(t, string(mem), "Connection: close\r\n")
	assert.Equal(t, ActClose, c.Next())
}

func TestConnInputBoundWhileBlocked(t *testing.T) {
	l, _ := newTestLoop(t, Config{InBufMax: 4096})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	require.Equal(t, ActWrite, c.Next())
	assert.True(t, c.WantRead())
	c.Feed(bytes.Repeat([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 200))
	assert.False(t, c.WantRead(), "input waiting behind an unsent response is bounded")
	mem, _ := drain(c)
	// The queued requests are answered once the file body is out, in
	// batches of OutBufMax.
	assert.Equal(t, 201, bytes.Count(mem, []byte("HTTP/1.1 200 OK")))
	assert.True(t, c.WantRead())
}

func TestConnNoFileCache(t *testing.T) {
	l, _ := newTestLoop(t, Config{NoFileCache: true})
	for range 3 {
		c := l.NewConn(netipNone)
		c.Feed([]byte("GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"))
		drain(c)
		l.FreeConn(c)
	}
	// Per request: an O_PATH open to learn the type, then the open for
	// reading (issue 19: no special file is opened for I/O), both closed.
	assert.Equal(t, uint64(6), l.Stats.Syscalls[SysOpen], "two opens per request without the cache")
	assert.Equal(t, uint64(6), l.Stats.Syscalls[SysClose])
}

func TestCacheSeesChangedFile(t *testing.T) {
	l, dir := newTestLoop(t, Config{})
	now := time.Now()
	l.Tick(now)
	get := func() []byte {
		c := l.NewConn(netipNone)
		defer l.FreeConn(c)
		c.Feed([]byte("GET /sub/ HTTP/1.1\r\nHost: a\r\n\r\n"))
		mem, _ := drain(c)
		return mem
	}
	assert.True(t, bytes.HasSuffix(get(), []byte("\r\n\r\nsub\n")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "index.html"), []byte("changed!\n"), 0o644))
	assert.True(t, bytes.HasSuffix(get(), []byte("\r\n\r\nsub\n")), "within the second, the cached entry is served")
	l.Tick(now.Add(1100 * time.Millisecond))
	assert.True(t, bytes.HasSuffix(get(), []byte("\r\n\r\nchanged!\n")), "a second later the change is seen")
	require.NoError(t, os.Remove(filepath.Join(dir, "sub", "index.html")))
	l.Tick(now.Add(2200 * time.Millisecond))
	assert.True(t, bytes.HasPrefix(get(), []byte("HTTP/1.1 403 Forbidden")))
}

func TestCacheEvictionClosesFiles(t *testing.T) {
	l, dir := newTestLoop(t, Config{CacheEntries: 4})
	for i := range 20 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o644))
	}
	before := countFDs(t)
	for i := range 20 {
		c := l.NewConn(netipNone)
		c.Feed(fmt.Appendf(nil, "GET /f%d.txt HTTP/1.1\r\nHost: a\r\n\r\n", i))
		mem, _ := drain(c)
		require.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200")))
		l.FreeConn(c)
	}
	assert.LessOrEqual(t, countFDs(t)-before, 4, "the cache keeps at most CacheEntries files open")
	assert.Equal(t, 4, l.cache.n)
}

// TestCacheCountsSidecarFiles: with --precompressed an entry holds its
// sidecars open too, and CacheEntries bounds them all: a client asking for
// many precompressed files cannot make a loop hold four fds per entry.
func TestCacheCountsSidecarFiles(t *testing.T) {
	l, dir := newTestLoop(t, Config{CacheEntries: 8, Precompressed: true})
	old := time.Now().Add(-time.Hour)
	for i := range 10 {
		for _, ext := range []string{"", ".br", ".zst", ".gz"} {
			p := filepath.Join(dir, fmt.Sprintf("f%d.js%s", i, ext))
			body := []byte("x" + ext) // the file itself larger than its sidecars
			if ext == "" {
				body = bytes.Repeat([]byte("x"), 100)
			}
			require.NoError(t, os.WriteFile(p, body, 0o644))
			require.NoError(t, os.Chtimes(p, old, old))
		}
	}
	before := countFDs(t)
	for i := range 10 {
		c := l.NewConn(netipNone)
		c.Feed(fmt.Appendf(nil, "GET /f%d.js HTTP/1.1\r\nHost: a\r\nAccept-Encoding: br\r\n\r\n", i))
		mem, _ := drain(c)
		require.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200")), "%s", mem)
		require.Contains(t, string(mem), "Content-Encoding: br\r\n")
		l.FreeConn(c)
	}
	assert.LessOrEqual(t, countFDs(t)-before, 8, "the cache keeps at most CacheEntries files open, sidecars included")
	assert.Equal(t, 8, l.cache.n, "two entries of four files each")
}

func countFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestCacheHitAllocatesNothing(t *testing.T) {
	for _, rules := range [][]HeaderRule{nil, threeRules} {
		l, _ := newTestLoop(t, Config{Headers: rules})
		c := l.NewConn(netipNone)
		req := []byte("GET /index.html HTTP/1.1\r\nHost: localhost\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
		c.Feed(req)
		mem, _ := drain(c)
		if rules != nil {
			require.Contains(t, string(mem), "X-Content-Type-Options: nosniff\r\n")
		}
		allocs := testing.AllocsPerRun(1000, func() {
			c.Feed(req)
			o := c.Out()
			c.Sent(o.Len())
		})
		assert.Zero(t, allocs, "%d rules", len(rules))
	}
}

// threeRules are three --header rules that match /index.html, as an
// operator's HSTS, CSP and nosniff would.
var threeRules = []HeaderRule{
	{Pattern: "/**", Name: "Strict-Transport-Security", Value: "max-age=63072000"},
	{Pattern: "*.html", Name: "Content-Security-Policy", Value: "default-src 'self'"},
	{Pattern: "/index.html", Name: "X-Content-Type-Options", Value: "nosniff"},
}

// BenchmarkServeHit is the whole core path of one keep-alive request that
// hits the cache: parse, look up, build the response, account for it;
// without --header rules and with three that match (built into the
// cached header, so they cost the bytes and nothing else).
func BenchmarkServeHit(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rules []HeaderRule
	}{
		{name: "rules=0"},
		{name: "rules=3", rules: threeRules},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, _ := newTestLoop(b, Config{Headers: bc.rules})
			c := l.NewConn(netipNone)
			req := []byte("GET /index.html HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				c.Feed(req)
				o := c.Out()
				c.Sent(o.Len())
			}
		})
	}
}

// BenchmarkServePipelined16 answers 16 pipelined requests per Feed.
func BenchmarkServePipelined16(b *testing.B) {
	l, _ := newTestLoop(b, Config{})
	c := l.NewConn(netipNone)
	req := bytes.Repeat([]byte("GET /index.html HTTP/1.1\r\nHost: localhost:8080\r\n\r\n"), 16)
	b.ReportAllocs()
	for b.Loop() {
		c.Feed(req)
		o := c.Out()
		c.Sent(o.Len())
	}
}

var netipNone = netip.AddrPort{}

// A second wave of connections reuses the first one's Conns, however many
// were open at once; a minute or two after the wave the free list is back
// to minFree, and big buffers are not kept.
func TestFreeConnsFollowTheHighWater(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	const n = 3 * minFree
	open := func() map[*Conn]bool {
		seen := make(map[*Conn]bool, n)
		cs := make([]*Conn, 0, n)
		for range n {
			c := l.NewConn(netipNone)
			seen[c] = true
			cs = append(cs, c)
		}
		for _, c := range cs {
			l.FreeConn(c)
		}
		return seen
	}
	first := open()
	assert.Len(t, l.free, n, "every Conn of the wave is kept")
	second := open()
	for c := range second {
		require.True(t, first[c], "a Conn of the second wave was allocated anew")
	}

	c := l.NewConn(netipNone)
	c.in = make([]byte, 0, 64<<10)
	c.out = make([]byte, 0, 64<<10)
	l.FreeConn(c)
	assert.Nil(t, c.in, "a 64 KiB input buffer is not kept")
	assert.Nil(t, c.out, "a 64 KiB output buffer is not kept")

	// A held head (a miss's, or a request with a body) is bounded as the
	// others are, and all the kept buffers together stay within
	// freeBufMax, however many Conns with 8 KiB buffers come back.
	held := make([]*Conn, 0, 3*freeBufMax/(8<<10))
	for range cap(held) {
		c := l.NewConn(netipNone)
		c.in, c.out, c.more().held = make([]byte, 0, 8<<10), make([]byte, 0, 8<<10), make([]byte, 0, 32<<10)
		held = append(held, c)
	}
	for _, c := range held {
		l.FreeConn(c)
	}
	assert.Nil(t, held[0].heldHead(), "a 32 KiB held head is not kept")
	assert.Equal(t, 8<<10, cap(held[0].in), "an 8 KiB buffer is kept")
	total := 0
	for _, c := range l.free {
		total += cap(c.in) + cap(c.out) + cap(c.heldHead())
	}
	assert.LessOrEqual(t, total, freeBufMax, "bytes in the free list's buffers")
	assert.Equal(t, total, l.freeBufs)
	for range held {
		l.FreeConn(l.NewConn(netipNone)) // taken and given back: the sum follows
	}
	assert.LessOrEqual(t, l.freeBufs, freeBufMax)

	now := l.Now()
	l.Tick(now.Add(time.Minute))
	assert.Len(t, l.free, n, "the last minute's high water still counts")
	l.Tick(now.Add(2 * time.Minute))
	assert.Len(t, l.free, minFree, "two idle minutes later")
}

// TestConnSize holds a Conn, of which the loop keeps one per connection
// and as many again free (keepFree), to its size class: at 10,000
// connections each 32 bytes more is 320 KB. The request being parsed is
// the Loop's (Loop.req), not each Conn's: a Conn was 1,000 bytes with it;
// what only some requests use is in connRare: a Conn was 576 bytes with
// it.
func TestConnSize(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Conn{}), uintptr(320))
}

// TestRetire: once the drain before a shutdown started, every response
// says Connection: close and its connection closes; a keep-alive
// connection idle for drainIdle is closed by CheckTimeout, one in use is
// not; before it, the keep-alive timeout holds as ever.
func TestRetire(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	get := []byte("GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n")
	idle := l.NewConn(netipNone)
	idle.Feed(get)
	mem, _ := drain(idle)
	require.NotContains(t, string(mem), "Connection: close")
	require.Equal(t, ActRead, idle.Next())
	l.Tick(l.Now().Add(drainIdle + time.Second))
	assert.Equal(t, ActNone, idle.CheckTimeout(), "not retired: the keep-alive timeout holds")

	l.srv.Retire()
	c := l.NewConn(netipNone)
	c.Feed(get)
	mem, _ = drain(c)
	assert.Contains(t, string(mem), "\r\nConnection: close\r\n")
	assert.Equal(t, ActClose, c.Next(), "closed once the response is out")

	assert.Equal(t, ActClose, idle.CheckTimeout(), "idle for longer than drainIdle: closed")
	busy := l.NewConn(netipNone)
	busy.Feed([]byte("GET /index.html HTTP/1.1\r\nHo"))
	l.Tick(l.Now().Add(drainIdle + time.Second))
	assert.Equal(t, ActNone, busy.CheckTimeout(), "a head half received is not closed")
}
