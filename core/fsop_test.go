package core

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// These tests drive a loop whose loads are offloaded (it has a waker, as
// epoll's and io_uring's loops do), through a FileCalls that holds the
// calls for chosen paths until the test lets them go: what a slow disk
// does, without timing anything.

// gatedCalls is DirectCalls, but a call naming a gated path waits until
// its gate is opened.
type gatedCalls struct {
	DirectCalls
	mu    sync.Mutex
	gates map[string]chan struct{}
	finds map[string]int      // O_PATH opens and path stats, by path: one per load or revalidation
	flags map[string][]uint64 // every open's flags, by path
}

func newGatedCalls() *gatedCalls {
	return &gatedCalls{gates: map[string]chan struct{}{}, finds: map[string]int{}, flags: map[string][]uint64{}}
}

// gate makes calls for path wait until the returned func is called.
func (g *gatedCalls) gate(path string) (open func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.gates[path] = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.gates, path)
			g.mu.Unlock()
			close(ch)
		})
	}
}

func (g *gatedCalls) wait(path string, find bool) {
	g.mu.Lock()
	if find {
		g.finds[path]++
	}
	ch := g.gates[path]
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (g *gatedCalls) count(path string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.finds[path]
}

func (g *gatedCalls) Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	g.mu.Lock()
	g.flags[path] = append(g.flags[path], how.Flags)
	g.mu.Unlock()
	g.wait(path, how.Flags&unix.O_PATH != 0)
	return g.DirectCalls.Openat2(dirfd, path, how)
}

func (g *gatedCalls) Statx(dirfd int, path string, flags, mask int, st *unix.Statx_t) error {
	if path != "" {
		g.wait(path, true)
	}
	return g.DirectCalls.Statx(dirfd, path, flags, mask, st)
}

// asyncLoop is a loop that offloads every load through g, and a channel
// that says a completion was posted.
type asyncLoop struct {
	*Loop
	srv   *Server
	dir   string
	woken chan struct{}
}

func newAsyncLoop(t *testing.T, cfg Config, g *gatedCalls) *asyncLoop {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), bytes.Repeat([]byte("a"), 1500), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "slow.txt"), []byte("slow body\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "index.html"), []byte("sub\n"), 0o644))
	cfg.Dir = dir
	srv, err := NewServer(cfg)
	require.NoError(t, err)
	a := &asyncLoop{Loop: srv.NewLoop(0), srv: srv, dir: dir, woken: make(chan struct{}, 1)}
	a.SetWaker(func() {
		select {
		case a.woken <- struct{}{}:
		default:
		}
	})
	a.SetFileCalls(g)
	a.fs.noProbe = true // every load through g, warm or not
	return a
}

// close ends the loop and the server as a backend does; the test's gates
// must be open.
func (a *asyncLoop) close() {
	a.Close()
	a.srv.Close()
}

// land waits for posted completions and runs them, as a backend's
// wake-up does, until cond holds.
func (a *asyncLoop) land(t *testing.T, cond func() bool) []*Conn {
	t.Helper()
	var ready []*Conn
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-a.woken:
			ready = append(ready, a.RunPosted()...)
		case <-deadline:
			require.FailNow(t, "no completion landed")
		}
	}
	return ready
}

func (a *asyncLoop) idle() bool { return a.fs.inflight == 0 }

func get(path string) []byte {
	return []byte("GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n")
}

// TestFSSlowMissDoesNotDelayHit: while one request waits for a slow file,
// a cached one on the same loop is answered at once.
func TestFSSlowMissDoesNotDelayHit(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	warm := a.NewConn(netipNone)
	warm.Feed(get("/index.html")) // the first request misses too: it loads
	assert.Equal(t, stateFile, warm.state)
	a.land(t, a.idle)
	mem, _ := drain(warm)
	require.True(t, bytes.HasSuffix(mem, bytes.Repeat([]byte("a"), 1500)), string(mem))

	open := g.gate("slow.txt")
	defer open()
	slow := a.NewConn(netipNone)
	slow.Feed(get("/slow.txt"))
	assert.Equal(t, ActRead, slow.Next(), "waiting for the file: nothing to send")
	assert.Equal(t, stateFile, slow.state)

	warm.Feed(get("/index.html"))
	require.Equal(t, ActWrite, warm.Next(), "the cached file is answered while the slow one waits")
	mem, _ = drain(warm)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")))
	assert.Equal(t, ActRead, slow.Next(), "still waiting")

	open()
	ready := a.land(t, a.idle)
	assert.Equal(t, []*Conn{slow}, ready, "the waiting connection is handed back to be driven")
	mem, _ = drain(slow)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")), string(mem))
	assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nslow body\n")), string(mem))
	assert.Equal(t, ActRead, slow.Next())
	assert.Equal(t, uint64(2), a.Stats.FS.Ops[FSLoad])
	assert.NotZero(t, a.Stats.Syscalls[SysOpen], "the helpers' calls are counted in the loop's Stats")
}

// TestFSMissesCoalesce: concurrent misses for one key share one load, and
// a missing path's 404 is kept for its second.
func TestFSMissesCoalesce(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	for _, path := range []string{"slow.txt", "missing.txt"} {
		open := g.gate(path)
		var cs []*Conn
		for range 10 {
			c := a.NewConn(netipNone)
			c.Feed(get("/" + path))
			require.Equal(t, stateFile, c.state)
			cs = append(cs, c)
		}
		open()
		ready := a.land(t, a.idle)
		assert.ElementsMatch(t, cs, ready)
		assert.Equal(t, 1, g.count(path), "one load for ten requests of %s", path)
		for _, c := range cs {
			mem, _ := drain(c)
			if path == "slow.txt" {
				assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nslow body\n")), string(mem))
			} else {
				assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 404 Not Found\r\n")), string(mem))
			}
			a.FreeConn(c)
		}
	}
	hits := a.Stats.CacheHits
	c := a.NewConn(netipNone)
	c.Feed(get("/missing.txt"))
	mem, _ := drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 404 Not Found\r\n")))
	assert.Equal(t, hits+1, a.Stats.CacheHits, "the 404 is answered from the cache within its second")
	assert.Equal(t, 1, g.count("missing.txt"))
}

// TestFSRevalidateServesOldEntry: the first hit of a new second is
// answered from the entry as it is, and one stat starts; the entry goes
// once the stat lands and finds the file changed.
func TestFSRevalidateServesOldEntry(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	// On a whole second, so that +1.1 s and +2.2 s are the next two
	// seconds: one later and the entry could be served no more
	// while its stat is in flight (cacheValid).
	now := time.Unix(time.Now().Unix(), 0)
	a.Tick(now)
	c := a.NewConn(netipNone)
	c.Feed(get("/slow.txt"))
	a.land(t, a.idle)
	drain(c)
	require.NoError(t, os.WriteFile(filepath.Join(a.dir, "slow.txt"), []byte("new body, longer\n"), 0o644))

	open := g.gate("slow.txt")
	defer open()
	a.Tick(now.Add(1100 * time.Millisecond))
	finds := g.count("slow.txt")
	for range 3 {
		c.Feed(get("/slow.txt"))
		require.Equal(t, ActWrite, c.Next(), "served without waiting")
		mem, _ := drain(c)
		assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nslow body\n")), "the old entry until the stat lands")
	}
	assert.Equal(t, 1, a.fs.inflight, "one revalidation in flight for three hits")
	open()
	a.land(t, a.idle)
	assert.Equal(t, finds+1, g.count("slow.txt"), "one stat")
	assert.Equal(t, uint64(1), a.Stats.FS.Ops[FSStat])

	c.Feed(get("/slow.txt"))
	a.land(t, a.idle)
	mem, _ := drain(c)
	assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nnew body, longer\n")), string(mem))

	// A file removed: the revalidation drops its entry.
	require.NoError(t, os.Remove(filepath.Join(a.dir, "slow.txt")))
	a.Tick(now.Add(2200 * time.Millisecond))
	c.Feed(get("/slow.txt"))
	mem, _ = drain(c)
	assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nnew body, longer\n")))
	a.land(t, a.idle)
	assert.Nil(t, a.cache.m["slow.txt"], "the file is gone: so is its entry")
	c.Feed(get("/slow.txt"))
	a.land(t, a.idle)
	mem, _ = drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 404 Not Found\r\n")), string(mem))
}

// TestFSTimeout: a request that waited FSTimeout gets 503 with
// Retry-After; the load lands later without it, in the cache.
func TestFSTimeout(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{FSTimeout: 2 * time.Second}, g)
	defer a.close()
	now := time.Now()
	a.Tick(now)
	open := g.gate("slow.txt")
	defer open()
	c := a.NewConn(netipNone)
	c.Feed(append(get("/slow.txt"), get("/sub/")...))
	a.Tick(now.Add(1100 * time.Millisecond))
	assert.Equal(t, ActNone, c.CheckTimeout())
	a.Tick(now.Add(1900 * time.Millisecond))
	assert.Equal(t, ActNone, c.CheckTimeout())
	a.Tick(now.Add(2100 * time.Millisecond))
	require.Equal(t, ActWrite, c.CheckTimeout())
	mem, _ := drain(c)
	s := string(mem)
	require.True(t, strings.HasPrefix(s, "HTTP/1.1 503 Service Unavailable\r\n"), s)
	assert.Contains(t, s, "\r\nRetry-After: 5\r\n")
	assert.Equal(t, 1, strings.Count(s, "HTTP/1.1 "), s)
	open()
	ready := a.land(t, a.idle)
	assert.Equal(t, []*Conn{c}, ready, "for the request behind it, which loaded on its own")
	mem, _ = drain(c)
	assert.True(t, strings.HasSuffix(string(mem), "\r\n\r\nsub\n"), "then the request behind it: %s", mem)
	assert.NotNil(t, a.cache.m["slow.txt"], "what was loaded for the 503'd request is cached")
	assert.Equal(t, ActRead, c.Next())
}

// TestFSPipelinedBehindWait: a response queued before a waiting request
// still goes out; the requests behind it are answered after it, in order.
func TestFSPipelinedBehindWait(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	c := a.NewConn(netipNone)
	c.Feed(append(get("/index.html"), get("/sub/")...))
	a.land(t, a.idle)
	a.land(t, func() bool { drain(c); return a.idle() && c.Next() == ActRead })

	open := g.gate("slow.txt")
	defer open()
	c.Feed(bytes.Join([][]byte{get("/sub/"), get("/slow.txt"), get("/index.html"), get("/sub/")}, nil))
	require.Equal(t, ActWrite, c.Next(), "the answer queued before the wait goes out")
	mem, _ := drain(c)
	assert.Equal(t, 1, bytes.Count(mem, []byte("HTTP/1.1 ")))
	assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nsub\n")))
	assert.Equal(t, ActRead, c.Next())
	open()
	a.land(t, a.idle)
	mem, _ = drain(c)
	s := string(mem)
	require.Equal(t, 3, strings.Count(s, "HTTP/1.1 200 OK\r\n"), s)
	i, j, k := strings.Index(s, "slow body\n"), strings.Index(s, strings.Repeat("a", 1500)), strings.LastIndex(s, "\r\n\r\nsub\n")
	assert.True(t, 0 < i && i < j && j < k && k == len(s)-len("\r\n\r\nsub\n"), s)
}

// TestFSConnGoneWhileWaiting: a connection freed (and reused) while its
// request waits is left alone when the load lands.
func TestFSConnGoneWhileWaiting(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	open := g.gate("slow.txt")
	defer open()
	c := a.NewConn(netipNone)
	c.Feed(get("/slow.txt"))
	other := a.NewConn(netipNone)
	other.Feed(get("/slow.txt"))
	a.FreeConn(c)
	reused := a.NewConn(netipNone)
	require.Same(t, c, reused, "the freed Conn is reused")
	reused.Feed([]byte("GET /sub/ HTTP/1.1\r\nHo"))
	open()
	ready := a.land(t, a.idle)
	assert.Equal(t, []*Conn{other}, ready)
	assert.NotNil(t, a.cache.m["slow.txt"], "the load went on, and is cached")
	assert.Equal(t, ActRead, reused.Next(), "the reused connection got nothing")
	reused.Feed([]byte("st: a\r\n\r\n"))
	a.land(t, a.idle) // its own load
	mem, _ := drain(reused)
	assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nsub\n")), string(mem))
	mem, _ = drain(other)
	assert.True(t, bytes.HasSuffix(mem, []byte("\r\n\r\nslow body\n")), string(mem))
}

// TestFSShutdownClosesFDs: a loop closed with loads in flight, and loads
// that land after it closed, leave no fd open, and the server's Close
// waits for the helpers.
func TestFSShutdownClosesFDs(t *testing.T) {
	before := countFDs(t)
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{AutoIndex: true}, g)
	open := g.gate("slow.txt")
	openSub := g.gate("sub")
	var cs []*Conn
	for _, p := range []string{"/slow.txt", "/sub/", "/index.html"} {
		c := a.NewConn(netipNone)
		c.Feed(get(p))
		cs = append(cs, c)
	}
	a.land(t, func() bool { return a.fs.inflight == 2 }) // index.html landed; the others wait
	for _, c := range cs {
		a.FreeConn(c)
	}
	openSub() // may land before or after the loop closes
	a.Close()
	open() // lands after: discarded, its file closed
	a.srv.Close()
	assert.Equal(t, before, countFDs(t), "every fd closed")
}

// TestHelpersCloseBounded (issue 25): with a load stuck in the file
// system, the server's Close waits for it only until the exit deadline,
// drops the load queued behind it, and says so; the stuck load, when it
// returns at last, has its file closed.
func TestHelpersCloseBounded(t *testing.T) {
	before := countFDs(t)
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{AutoIndex: true}, g)
	a.srv.helpers.init(1, 16) // one helper: /sub/ queues behind /slow.txt
	open := g.gate("slow.txt")
	defer open()
	var cs []*Conn
	for _, p := range []string{"/slow.txt", "/sub/"} {
		c := a.NewConn(netipNone)
		c.Feed(get(p))
		cs = append(cs, c)
	}
	require.Eventually(t, func() bool { return g.count("slow.txt") == 1 }, 10*time.Second, time.Millisecond)
	for _, c := range cs {
		a.FreeConn(c)
	}
	a.Close()
	a.srv.mu.Lock()
	a.srv.exitBy = time.Now().Add(100 * time.Millisecond) // as a drained loop sets it, without the wait
	a.srv.mu.Unlock()

	closed := make(chan error, 1)
	go func() { closed <- a.srv.Close() }()
	var err error
	select {
	case err = <-closed:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Close waited for a file system that does not answer")
	}
	var ab *Abandoned
	require.ErrorAs(t, err, &ab)
	assert.Equal(t, Abandoned{Ops: 1, Dropped: 1}, *ab)
	assert.Contains(t, err.Error(), "1 file-system operation")
	assert.Same(t, err, a.srv.Close(), "Close again: the same answer, nothing closed twice")

	open() // the stuck load finishes after its loop and the server closed
	require.Eventually(t, func() bool { return countFDs(t) == before }, 10*time.Second, time.Millisecond,
		"the late load's file is closed where it lands")
}

// TestFSQueueFull: no room for an operation answers 503 at once.
func TestFSQueueFull(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	a.srv.helpers.init(1, 0)
	c := a.NewConn(netipNone)
	c.Feed(get("/slow.txt"))
	mem, _ := drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 503 Service Unavailable\r\n")), string(mem))
	assert.Contains(t, string(mem), "\r\nRetry-After: 5\r\n")
}

// TestFSRefusesEscapes: on the offloaded path too, a symlink that leaves
// the root is 403, and a path that climbs is refused before any call.
func TestFSRefusesEscapes(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(a.dir, "escape")))
	for path, want := range map[string]string{
		"/escape":           "HTTP/1.1 403 Forbidden\r\n",
		"/../secret":        "HTTP/1.1 ",
		"/sub/%2e%2e/../x":  "HTTP/1.1 ",
		"/sub/../../secret": "HTTP/1.1 ",
	} {
		c := a.NewConn(netipNone)
		c.Feed(get(path))
		a.land(t, a.idle)
		mem, _ := drain(c)
		assert.True(t, bytes.HasPrefix(mem, []byte(want)), "%s: %s", path, mem)
		assert.NotContains(t, string(mem), "secret", path)
		assert.NotContains(t, string(mem), " 200 ", path)
		a.FreeConn(c)
	}
}

// TestSpecialFilesNeverOpened: a socket, a FIFO and a device node in the
// root answer 403 (a socket answered 500: its open failed with ENXIO),
// and none is opened for I/O: their type is found through O_PATH.
func TestSpecialFilesNeverOpened(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{}, g)
	defer a.close()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(a.dir, "sock"), Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, syscall.Mkfifo(filepath.Join(a.dir, "fifo"), 0o644))
	paths := []string{"sock", "fifo"}
	if err := unix.Mknod(filepath.Join(a.dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
		paths = append(paths, "null")
	} else {
		t.Logf("no device node (mknod: %v): not root", err)
	}
	for _, p := range paths {
		c := a.NewConn(netipNone)
		c.Feed(get("/" + p))
		a.land(t, a.idle)
		mem, _ := drain(c)
		assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 403 Forbidden\r\n")), "%s: %s", p, mem)
		require.NotEmpty(t, g.flags[p], p)
		for _, fl := range g.flags[p] {
			assert.NotZero(t, fl&unix.O_PATH, "%s opened with flags %#x, not O_PATH", p, fl)
		}
		a.FreeConn(c)
	}
}

// TestCacheInactive: an entry no request used for CacheInactive is closed.
func TestCacheInactive(t *testing.T) {
	l, dir := newTestLoop(t, Config{CacheInactive: 3 * time.Second})
	now := time.Now()
	l.Tick(now)
	c := l.NewConn(netipNone)
	c.Feed(get("/index.html"))
	drain(c)
	c.Feed(get("/sub/"))
	drain(c)
	require.Len(t, l.cache.m, 2)
	require.NoError(t, os.Remove(filepath.Join(dir, "sub", "index.html")))
	l.Tick(now.Add(2 * time.Second))
	c.Feed(get("/index.html"))
	drain(c)
	l.Tick(now.Add(4 * time.Second))
	assert.Len(t, l.cache.m, 1, "sub/ unused for more than 3 s: closed")
	assert.NotNil(t, l.cache.m["index.html"])
	l.Tick(now.Add(6 * time.Second))
	assert.Empty(t, l.cache.m)
	assert.Zero(t, l.cache.n)
}

// TestErrorsDoNotEvict (issue 25): a stream of distinct missing paths,
// more than the cache holds, evicts no file, directory index, listing or
// redirect: each is still a hit after it, and the errors kept stay within
// their own bound.
func TestErrorsDoNotEvict(t *testing.T) {
	const entries = 8
	l, dir := newTestLoop(t, Config{CacheEntries: entries, AutoIndex: true})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "list"), 0o755))
	kept := []struct{ path, status string }{
		{path: "/index.html", status: "200 OK"},
		{path: "/sub/", status: "200 OK"},
		{path: "/list/", status: "200 OK"},
		{path: "/sub", status: "301 Moved Permanently"},
	}
	c := l.NewConn(netipNone)
	ask := func(path, status string) {
		t.Helper()
		c.Feed(get(path))
		mem, _ := drain(c)
		require.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 "+status+"\r\n")), "%s: %q", path, mem)
	}
	for _, k := range kept {
		ask(k.path, k.status)
	}
	for i := range 10 * entries {
		ask(fmt.Sprintf("/missing-%d", i), "404 Not Found")
	}
	hits, misses := l.Stats.CacheHits, l.Stats.CacheMiss
	for _, k := range kept {
		ask(k.path, k.status)
	}
	assert.Equal(t, hits+uint64(len(kept)), l.Stats.CacheHits, "each kept entry a hit")
	assert.Equal(t, misses, l.Stats.CacheMiss, "and none a miss")
	assert.LessOrEqual(t, len(l.cache.m)-len(kept), maxErrors(entries), "errors kept within their bound")
	ask(fmt.Sprintf("/missing-%d", 10*entries-1), "404 Not Found")
	assert.Equal(t, hits+uint64(len(kept))+1, l.Stats.CacheHits, "the latest error is still kept: a flood of one path shares its calls")
}

// TestListingBounded: a listing holds at most maxListed entries, and says
// it was truncated.
func TestListingBounded(t *testing.T) {
	defer func(n int) { maxListed = n }(maxListed)
	maxListed = 5
	l, dir := newTestLoop(t, Config{AutoIndex: true})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "many"), 0o755))
	for i := range 12 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "many", string(rune('a'+i))+".txt"), nil, 0o644))
	}
	c := l.NewConn(netipNone)
	c.Feed(get("/many/"))
	mem, _ := drain(c)
	s := string(mem)
	require.True(t, strings.HasPrefix(s, "HTTP/1.1 200 OK\r\n"), s)
	assert.Equal(t, 5+1, strings.Count(s, "<a href="), "five entries and ../")
	assert.Contains(t, s, "(listing truncated: only 5 entries are shown)")
}

// TestFSNoFileCache: without the cache a landed load answers the requests
// that waited for it, and its file is closed once they are sent.
func TestFSNoFileCache(t *testing.T) {
	g := newGatedCalls()
	a := newAsyncLoop(t, Config{NoFileCache: true, Sendfile: SendfileAlways}, g)
	defer a.close()
	before := countFDs(t)
	open := g.gate("slow.txt")
	var cs []*Conn
	for range 3 {
		c := a.NewConn(netipNone)
		c.Feed(get("/slow.txt"))
		cs = append(cs, c)
	}
	open()
	a.land(t, a.idle)
	assert.Equal(t, 1, g.count("slow.txt"))
	assert.Equal(t, before+1, countFDs(t), "one fd, held by the three senders")
	for _, c := range cs {
		mem, n := drain(c)
		assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")), string(mem))
		assert.Equal(t, int64(len("slow body\n")), n, "sent from the file")
		a.FreeConn(c)
	}
	assert.Equal(t, before, countFDs(t))
	assert.Empty(t, a.cache.m)
}
