package backend_test

// The file system off the loops (core/fsop.go), on every backend, with a
// slow file system: core.Config.WrapFileCalls holds the calls that name a
// gated path until the test lets them go. A listing always leaves the
// loop (getdents64 has no non-waiting form, and epoll's probe hands it to
// a helper), so a gated directory is a slow file on every backend but
// blocking, which runs every load inline and serves one connection at a
// time.

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

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/fusetest"
	"github.com/twinloop/twinloop/internal/servertest"
)

// slowFS is core.DirectCalls, but the calls naming a gated path wait
// until open is called.
type slowFS struct {
	core.FileCalls
	path     string
	statOnly bool // only a stat by path waits (a revalidation), not the opens
	gate     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	finds    int // O_PATH opens of path: one per load
	stats    int // stats by path: one per revalidation
	passed   int // calls that waited at the gate and have returned since
}

func newSlowFS(path string) *slowFS { return &slowFS{path: path, gate: make(chan struct{})} }

func (s *slowFS) open() { s.once.Do(func() { close(s.gate) }) }

func (s *slowFS) loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finds
}

func (s *slowFS) revalidations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *slowFS) returned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passed
}

// through notes that a call that waited at the gate has returned.
func (s *slowFS) through() {
	s.mu.Lock()
	s.passed++
	s.mu.Unlock()
}

func (s *slowFS) Statx(dirfd int, path string, flags, mask int, st *unix.Statx_t) error {
	if path == s.path {
		s.mu.Lock()
		s.stats++
		s.mu.Unlock()
		<-s.gate
		defer s.through()
	}
	return s.FileCalls.Statx(dirfd, path, flags, mask, st)
}

func (s *slowFS) Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	if path == s.path && !s.statOnly {
		s.mu.Lock()
		if how.Flags&unix.O_PATH != 0 {
			s.finds++
		}
		s.mu.Unlock()
		<-s.gate
		defer s.through()
	}
	return s.FileCalls.Openat2(dirfd, path, how)
}

// eachSlowBackend runs fn per backend that can wait for the file system
// while it serves others, with one loop, /slowdir/ gated and --autoindex.
func eachSlowBackend(t *testing.T, cfg core.Config, fn func(t *testing.T, s *site, srv *servertest.Server, fs *slowFS)) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			parallel(t)
			skipOneAtATime(t, "it loads every file inline, and one slow request holds the rest anyway")
			s := makeSite(t)
			require.NoError(t, os.MkdirAll(filepath.Join(s.dir, "slowdir"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(s.dir, "slowdir", "a.txt"), []byte("a\n"), 0o644))
			fs := newSlowFS("slowdir")
			defer fs.open()
			c := cfg
			c.Dir, c.AutoIndex = s.dir, true
			c.WrapFileCalls = func(fc core.FileCalls) core.FileCalls {
				fs.FileCalls = fc
				return fs
			}
			srv := servertest.Start(t, b, c, 1)
			fn(t, s, srv, fs)
		})
	}
}

// getAsync sends GET path on a new connection and answers on the
// channel with the status and body, once the connection is closed.
func getAsync(t *testing.T, addr, path string) <-chan string {
	ch := make(chan string, 1)
	c := servertest.Dial(t, addr)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path)
	go func() {
		r, err := servertest.ReadRaw(c.R, "GET")
		// Closed before the answer is sent, so that a test which counts
		// its fds after the answer does not count this one.
		c.Close()
		if err != nil {
			ch <- err.Error()
			return
		}
		ch <- r.Status + "\n" + string(r.Body)
	}()
	return ch
}

// TestSlowFileDoesNotDelayCached: while a request waits for the file
// system, a cached file on the same loop is answered; then the slow one.
func TestSlowFileDoesNotDelayCached(t *testing.T) {
	eachSlowBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server, fs *slowFS) {
		c := servertest.Dial(t, srv.Addr)
		resp, body := c.Get("/index.html") // cached from here on
		require.Equal(t, 200, resp.StatusCode)
		slow := getAsync(t, srv.Addr, "/slowdir/")
		require.Eventually(t, func() bool { return fs.loads() == 1 }, 5*time.Second, time.Millisecond)
		for range 3 {
			resp, body = c.Get("/index.html")
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, s.index, body)
		}
		select {
		case got := <-slow:
			t.Fatalf("the slow request was answered before its file system: %s", got)
		default:
		}
		fs.open()
		got := <-slow
		assert.True(t, strings.HasPrefix(got, "HTTP/1.1 200 OK\n"), got)
		assert.Contains(t, got, `<a href="a.txt">a.txt</a>`)
	})
}

// TestSlowMissesCoalesce: ten requests for one slow path make one load.
func TestSlowMissesCoalesce(t *testing.T) {
	eachSlowBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server, fs *slowFS) {
		var answers []<-chan string
		for range 10 {
			answers = append(answers, getAsync(t, srv.Addr, "/slowdir/"))
		}
		// Each request is in before the gate opens: the loop answered a
		// request sent after them on another connection.
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, _ := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		fs.open()
		for _, a := range answers {
			got := <-a
			assert.True(t, strings.HasPrefix(got, "HTTP/1.1 200 OK\n"), got)
		}
		assert.Equal(t, 1, fs.loads(), "one load for ten requests")
	})
}

// TestSlowPipelinedInOrder: a response before a waiting request goes out
// at once; those behind it follow it, in order, with their exact bytes.
func TestSlowPipelinedInOrder(t *testing.T) {
	eachSlowBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server, fs *slowFS) {
		c := servertest.Dial(t, srv.Addr)
		c.Get("/style.css")
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\nGET /slowdir/ HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, body := c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body, "the answer before the wait came while it waits")
		fs.open()
		resp, body = c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Contains(t, string(body), "Index of /slowdir/")
		resp, body = c.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, "body{}\n", string(body))
		resp, _ = c.Get("/index.html")
		assert.Equal(t, 200, resp.StatusCode, "the connection goes on")
	})
}

// TestFSTimeout: a request that waits longer than --fs-timeout gets 503
// with Retry-After, and the connection goes on.
func TestFSTimeout(t *testing.T) {
	eachSlowBackend(t, core.Config{FSTimeout: time.Second}, func(t *testing.T, s *site, srv *servertest.Server, fs *slowFS) {
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /slowdir/ HTTP/1.1\r\nHost: t\r\n\r\n")
		r := c.ReadRaw("GET")
		assert.Equal(t, "HTTP/1.1 503 Service Unavailable", r.Status)
		assert.Equal(t, "5", r.Header.Get("Retry-After"))
		fs.open()
		resp, body := c.Get("/index.html")
		require.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, s.index, body)
		resp, body = c.Get("/slowdir/")
		require.Equal(t, 200, resp.StatusCode)
		assert.Contains(t, string(body), "a.txt")
	})
}

// TestRevalidationServesOldEntry: once a second has passed, a cached file
// is served as it is while its re-stat is in flight, and the change is
// seen once the stat lands.
func TestRevalidationServesOldEntry(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			parallel(t)
			c, fs := changedUnderStat(t, b)
			// Within a second the loop's clock moves on and a hit starts
			// the stat; every answer until it lands is the old entry.
			require.Eventually(t, func() bool {
				_, body := c.Get("/reval.txt")
				require.Equal(t, "old\n", string(body))
				return fs.revalidations() == 1
			}, 5*time.Second, 10*time.Millisecond)
			for range 3 {
				_, body := c.Get("/reval.txt")
				assert.Equal(t, "old\n", string(body), "served while the stat is in flight")
			}
			assert.Equal(t, 1, fs.revalidations(), "one stat in flight, for every hit")
			fs.open()
			require.Eventually(t, func() bool {
				_, body := c.Get("/reval.txt")
				return string(body) == "new, longer\n"
			}, 5*time.Second, 10*time.Millisecond, "the change is seen once the stat lands")
		})
	}
}

// changedUnderStat serves /reval.txt ("old\n") from one loop of backend b
// (skipping blocking, which re-stats inline), then changes the file while
// its stats by path are held until the returned slowFS is opened (at the
// test's end, at the latest).
func changedUnderStat(t *testing.T, b core.Backend) (*servertest.Client, *slowFS) {
	if b.Name() == "blocking" {
		t.Skip("the blocking backend re-stats inline, before it serves the entry")
	}
	s := makeSite(t)
	file := filepath.Join(s.dir, "reval.txt")
	require.NoError(t, os.WriteFile(file, []byte("old\n"), 0o644))
	fs := newSlowFS("reval.txt")
	fs.statOnly = true
	cfg := core.Config{Dir: s.dir, WrapFileCalls: func(fc core.FileCalls) core.FileCalls { fs.FileCalls = fc; return fs }}
	srv := servertest.Start(t, b, cfg, 1)
	t.Cleanup(fs.open) // before the server stops: cleanups run last first
	c := servertest.Dial(t, srv.Addr)
	_, body := c.Get("/reval.txt")
	require.Equal(t, "old\n", string(body))
	require.NoError(t, os.WriteFile(file, []byte("new, longer\n"), 0o644))
	return c, fs
}

// TestRevalidationNotServedPastValid: an entry whose stat does not come
// back (a hung file system) is served only while it was seen within a
// second or so; then its request loads the file again, which here the
// file system answers, with what it holds now.
func TestRevalidationNotServedPastValid(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			parallel(t)
			c, fs := changedUnderStat(t, b)
			require.Eventually(t, func() bool {
				_, body := c.Get("/reval.txt")
				return string(body) == "new, longer\n"
			}, 5*time.Second, 10*time.Millisecond, "loaded again while the stat is still held")
			assert.Equal(t, 1, fs.revalidations(), "the held stat was the only one")
		})
	}
}

// TestChangedAfterIdle (issue 25): a file served, left idle for two
// seconds, then deleted, replaced by rename (an atomic deploy) or
// truncated in place is answered as the file system now says: 404, the
// new file, the new length. Blocking and nginx did; the event loops
// served the past.
func TestChangedAfterIdle(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 10_000) // 100,000 bytes: sent from the file
	eachBackendLoops(t, core.Config{}, 1, func(t *testing.T, s *site, srv *servertest.Server) {
		for name, body := range map[string][]byte{"gone.txt": []byte("gone\n"), "deploy.txt": []byte("v1\n"), "trunc.bin": big} {
			require.NoError(t, os.WriteFile(filepath.Join(s.dir, name), body, 0o644))
		}
		c := servertest.Dial(t, srv.Addr)
		for _, p := range []string{"/gone.txt", "/deploy.txt", "/trunc.bin", "/gone.txt", "/deploy.txt", "/trunc.bin"} {
			resp, _ := c.Get(p)
			require.Equal(t, 200, resp.StatusCode, p)
		}
		time.Sleep(2100 * time.Millisecond) // idle: past the second a stat-in-flight entry may be served
		require.NoError(t, os.Remove(filepath.Join(s.dir, "gone.txt")))
		next := filepath.Join(s.dir, ".deploy.new")
		require.NoError(t, os.WriteFile(next, []byte("version two\n"), 0o644))
		require.NoError(t, os.Rename(next, filepath.Join(s.dir, "deploy.txt")))
		require.NoError(t, os.Truncate(filepath.Join(s.dir, "trunc.bin"), 10))
		for range 2 {
			resp, _ := c.Get("/gone.txt")
			assert.Equal(t, 404, resp.StatusCode, "deleted")
			resp, body := c.Get("/deploy.txt")
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "version two\n", string(body), "replaced by rename")
			resp, body = c.Get("/trunc.bin")
			assert.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, "10", resp.Header.Get("Content-Length"), "truncated")
			assert.Equal(t, big[:10], body)
		}
	})
}

// TestShutdownWithFSInFlight: a server stopped while a request waits for
// the file system returns cleanly and leaves no fd open, whether the
// operation lands before its loop closes or after.
func TestShutdownWithFSInFlight(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			skipOneAtATime(t, "it loads every file inline")
			srv, fs, slow, before := heldListing(t, b)
			stopped := make(chan error, 1)
			go func() { stopped <- srv.Stop() }()
			fs.open()
			require.NoError(t, <-stopped)
			<-slow
			assert.Equal(t, before, countFDs(t), "every fd the server opened is closed")
		})
	}
}

// TestShutdownBoundedWithFSHung (issue 25): a server stopped while a
// request waits for a file system that never answers exits all the same:
// Serve and the core's Close return within the shutdown timeout plus
// core.ShutdownGrace (the bound here adds 2 s of slack for a loaded
// machine), with the call still held, and Close says it abandoned that
// operation. When the file system answers at last, after the server is
// gone, nothing breaks and the fds the late operation opened are closed.
func TestShutdownBoundedWithFSHung(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			skipOneAtATime(t, "it loads every file inline, on the loop's own thread, where a call that never returns holds the loop itself")
			srv, fs, slow, before := heldListing(t, b)

			stopWithin(t, srv, heldShutdown)
			assert.Zero(t, fs.returned(), "the call is still held: the exit did not wait for it")
			var ab *core.Abandoned
			require.ErrorAs(t, srv.CloseErr, &ab)
			assert.Equal(t, 1, ab.Ops, "the held load")
			<-slow // its connection was closed unanswered

			fs.open() // the file system answers, after the server is gone
			require.Eventually(t, func() bool { return fs.returned() > 0 && countFDs(t) == before }, 10*time.Second, time.Millisecond,
				"the late load ran to its end and closed what it opened")
		})
	}
}

// TestShutdownBoundedWithFUSEPaused (issue 25) is the same on a real FUSE
// mount whose daemon answers nothing (internal/fusetest), as a hung mount
// does: a miss waits in the kernel's lookup, and a cached file's close
// waits for its FLUSH, which the kernel sends on every close of a FUSE
// file, at exit too. Serve and Close still return within the bound and
// count the close left waiting; once the daemon answers every fd is
// closed.
func TestShutdownBoundedWithFUSEPaused(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			skipOneAtATime(t, "its loop makes every call itself, and would wait in the lookup")
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
			fs := fusetest.Mount(t, dir)
			defer fs.Resume()
			before := serverFDs(t)
			srv := servertest.Start(t, b, core.Config{Dir: fs.Dir(), ShutdownTimeout: heldShutdown}, 1)
			c := servertest.Dial(t, srv.Addr)
			resp, body := c.Get("/index.html") // cached: its fd open on the mount
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, "hello\n", string(body))
			c.Close()
			fs.Pause()
			slow := getAsync(t, srv.Addr, "/missing.html") // a lookup the daemon never answers
			require.Eventually(t, func() bool { return srv.Core.Stats().FS.InFlight == 1 }, 5*time.Second, 10*time.Millisecond,
				"the miss waits for the file system (published once a second)")

			stopWithin(t, srv, heldShutdown)
			var ab *core.Abandoned
			require.ErrorAs(t, srv.CloseErr, &ab)
			assert.Equal(t, 1, ab.Files, "index.html's close waits for the FLUSH")
			<-slow

			fs.Resume()
			require.Eventually(t, func() bool { return serverFDs(t) == before }, 10*time.Second, 10*time.Millisecond,
				"the close and the lookup end once the daemon answers")
		})
	}
}

// serverFDs counts the fds that are not pipes or /dev/null: an in-process
// FUSE daemon (internal/fusetest) keeps pipes to splice its replies
// through, as many as it had READs at once, and /dev/null to empty them.
func serverFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if !strings.HasPrefix(l, "pipe:") && l != "/dev/null" {
			n++
		}
	}
	return n
}

// heldShutdown is the shutdown timeout of the tests that stop a server
// while the file system holds a call.
const heldShutdown = 500 * time.Millisecond

// heldListing starts backend b on one loop with --autoindex and /slowdir/
// gated, the fds open before it counted, and asks for /slowdir/ on a
// connection of its own (slow answers once it closes): once it returns,
// the load's call is held until fs.open (at the test's end at the
// latest, before the server stops).
func heldListing(t *testing.T, b core.Backend) (srv *servertest.Server, fs *slowFS, slow <-chan string, before int) {
	s := makeSite(t)
	require.NoError(t, os.MkdirAll(filepath.Join(s.dir, "slowdir"), 0o755))
	before = countFDs(t)
	fs = newSlowFS("slowdir")
	cfg := core.Config{Dir: s.dir, AutoIndex: true, ShutdownTimeout: heldShutdown,
		WrapFileCalls: func(fc core.FileCalls) core.FileCalls { fs.FileCalls = fc; return fs }}
	srv = servertest.Start(t, b, cfg, 1)
	t.Cleanup(fs.open) // before the server stops: cleanups run last first
	slow = getAsync(t, srv.Addr, "/slowdir/")
	require.Eventually(t, func() bool { return fs.loads() == 1 }, 5*time.Second, time.Millisecond)
	return srv, fs, slow, before
}

// stopWithin stops srv (Serve, then the core's Close) and fails the test
// unless that returns within its shutdown timeout plus
// core.ShutdownGrace, with 2 s of slack for a loaded machine.
func stopWithin(t *testing.T, srv *servertest.Server, shutdown time.Duration) {
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	bound := shutdown + core.ShutdownGrace + 2*time.Second
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(bound):
		require.FailNow(t, "the server did not exit while the file system held a call", "bound %v", bound)
	}
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// TestSpecialFilesForbidden (issue 19 item 4): a UNIX socket, a FIFO and a
// device node in the root answer 403; a socket answered 500, its open
// failing with ENXIO. None is opened for I/O (core's
// TestSpecialFilesNeverOpened counts the opens).
func TestSpecialFilesForbidden(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(s.dir, "sock"), Net: "unix"})
		require.NoError(t, err)
		defer ln.Close()
		paths := []string{"/sock", "/fifo"}
		if err := unix.Mknod(filepath.Join(s.dir, "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
			paths = append(paths, "/null")
		} else {
			t.Logf("device node not tested: mknod: %v (needs root)", err)
		}
		c := servertest.Dial(t, srv.Addr)
		for _, p := range paths {
			resp, _ := c.Get(p)
			assert.Equal(t, 403, resp.StatusCode, p)
		}
	})
}

// TestWarmMissOnLoop: on every backend with a loop that may not wait, a
// miss for a warm file, and one for a name the kernel knows is missing,
// is loaded by the probe on the loop (core/fsop.go, fsMode), one rule
// for both: no helper, no call through io_uring's ring (issue 37).
func TestWarmMissOnLoop(t *testing.T) {
	eachBackend(t, core.Config{}, func(t *testing.T, s *site, srv *servertest.Server) {
		skipOneAtATime(t, "it loads every miss inline, waiting, and counts none as probed")
		for _, name := range []string{"index.html", "style.css"} {
			servertest.KeepResident(t, filepath.Join(s.dir, name)) // warm, however busy the machine
		}
		_, err := os.Stat(filepath.Join(s.dir, "nope"))
		require.True(t, os.IsNotExist(err), "the kernel now knows /nope is missing")
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\nGET /style.css HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
		assert.Equal(t, s.index, c.ReadRaw("GET").Body)
		assert.Equal(t, "body{}\n", string(c.ReadRaw("GET").Body))
		assert.Equal(t, "HTTP/1.1 404 Not Found", c.ReadRaw("GET").Status)
		require.NoError(t, srv.Stop())
		st := srv.Core.Stats()
		assert.Equal(t, uint64(3), st.FS.Inline, "loaded on the loop")
		assert.Zero(t, st.FS.Ops[core.FSLoad], "none handed to a helper")
	})
}
