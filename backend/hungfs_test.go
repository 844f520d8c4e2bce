package backend_test

// A document root on a file system that hangs (issue 25): a FUSE mount
// whose daemon stops answering, as a dead NFS server or a stalled sshfs
// does (internal/fusetest). No loop may call into it, so a cached file is
// served at once beside a request the daemon holds, which gets 503 at
// --fs-timeout.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/fusetest"
	"github.com/twinloop/twinloop/internal/servertest"
)

// eachHungBackend runs fn per backend that serves others while a request
// waits for the file system, with loops loops and the site's root on a
// pausable FUSE mount. The mount is resumed before the server stops.
func eachHungBackend(t *testing.T, cfg core.Config, loops int, fn func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server)) {
	eachHungBackendOf(t, cfg, loops, skipBlocking, fn)
}

// skipBlocking and allBackends are eachHungBackendOf's skipBlocking.
const (
	skipBlocking = true
	allBackends  = false
)

// eachHungBackendOf is eachHungBackend; skipBlocking false runs the
// blocking backend too.
func eachHungBackendOf(t *testing.T, cfg core.Config, loops int, skipBlocking bool, fn func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server), opts ...fusetest.Option) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			parallel(t)
			if skipBlocking {
				skipOneAtATime(t, "a request held by the file system holds the loop's only connection")
			}
			s := makeSite(t)
			for _, name := range []string{"fifo", "escape"} {
				require.NoError(t, os.Remove(filepath.Join(s.dir, name))) // FUSE's loopback would serve neither as the tests expect
			}
			for i := range 8 {
				require.NoError(t, os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644))
			}
			fs := fusetest.Mount(t, s.dir, opts...)
			c := cfg
			c.Dir = fs.Dir()
			srv := servertest.Start(t, b, c, loops)
			defer fs.Resume()
			fn(t, s, fs, srv)
		})
	}
}

// getWithin sends GET path on c and reads the answer within d.
func getWithin(t *testing.T, c *servertest.Client, path string, d time.Duration) *servertest.Raw {
	t.Helper()
	c.SetDeadline(time.Now().Add(d))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path)
	r := c.ReadRaw("GET")
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return r
}

// TestHungMountServesCached: with the daemon paused, a cached file is
// answered at once on every connection, on one loop and on two, while
// requests for files the daemon must be asked about (one never loaded,
// one another connection loaded, whose name the kernel holds) wait, and
// get 200 or, at --fs-timeout, 503 with Retry-After. The kernel holds the
// names and attributes of the files asked for, so that only their opens
// go to the daemon: a loop's open of one (epoll's probe, io_uring's first
// try of an OPENAT2) would wait with it.
func TestHungMountServesCached(t *testing.T) {
	for _, loops := range []int{1, 2} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			parallel(t)
			cfg := core.Config{FSTimeout: 2 * time.Second}
			eachHungBackend(t, cfg, loops, func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server) {
				// Enough connections that each loop has several; each
				// loads the cached file into its loop's cache.
				var kept []*servertest.Client
				for range 8 {
					c := servertest.Dial(t, srv.Addr)
					r := getWithin(t, c, "/index.html", 5*time.Second)
					require.Equal(t, 200, r.Code)
					kept = append(kept, c)
				}
				r := getWithin(t, servertest.Dial(t, srv.Addr), "/f0.txt", 5*time.Second) // loaded by one loop: the kernel holds its name
				require.Equal(t, 200, r.Code)

				for i := range 8 {
					// The kernel now holds their names and attributes, as
					// after any other process's look: only the open goes
					// to the daemon.
					_, err := os.Stat(filepath.Join(fs.Dir(), fmt.Sprintf("f%d.txt", i)))
					require.NoError(t, err)
				}
				fs.Pause()
				var held []<-chan string
				for i := range 6 {
					held = append(held, getAsync(t, srv.Addr, "/f0.txt"), getAsync(t, srv.Addr, fmt.Sprintf("/f%d.txt", i+1)))
				}
				require.Eventually(t, func() bool { return fs.Waiting() > 0 }, 5*time.Second, time.Millisecond, "a request reached the paused daemon")

				// Within the second the entries were loaded in: an entry
				// older than that would wait for its re-stat (cache.go).
				for i, c := range kept {
					r := getWithin(t, c, "/index.html", time.Second)
					require.Equal(t, 200, r.Code, "cached, on connection %d", i)
					assert.Equal(t, s.index, r.Body)
				}
				for _, ch := range held {
					got := <-ch
					assert.Regexp(t, `^HTTP/1.1 (200 OK\nfile \d\n|503 Service Unavailable\n)`, got, "the file, or 503 at --fs-timeout")
				}
				c := servertest.Dial(t, srv.Addr)
				fmt.Fprintf(c, "GET /f7.txt HTTP/1.1\r\nHost: t\r\n\r\n")
				resp, _ := c.ReadResponse("GET")
				assert.Equal(t, 503, resp.StatusCode)
				assert.NotEmpty(t, resp.Header.Get("Retry-After"))
				fs.Resume()
				resp, body := c.Get("/f7.txt")
				assert.Equal(t, 200, resp.StatusCode, "served once the daemon answers again")
				assert.Equal(t, "file 7\n", string(body))
			})
		})
	}
}

// TestHungMountBodies: files above the in-memory size on a paused mount:
// a client of a big body the daemon holds does not stop a cached file from
// being served on the same loop, and once the daemon answers the body
// arrives whole.
func TestHungMountBodies(t *testing.T) {
	eachHungBackend(t, core.Config{FSTimeout: 30 * time.Second}, 1, func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server) {
		c := servertest.Dial(t, srv.Addr)
		r := getWithin(t, c, "/index.html", 5*time.Second)
		require.Equal(t, 200, r.Code)
		big := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(big, "GET /mid.bin HTTP/1.1\r\nHost: t\r\n\r\n") // loaded and opened, then its pages are read
		// The answer began: the file is open.
		_, err := big.R.Peek(1)
		require.NoError(t, err)
		got := make(chan *servertest.Raw, 1)
		go func() { got <- big.ReadRaw("GET") }()
		fs.Pause()
		r = getWithin(t, c, "/index.html", time.Second)
		require.Equal(t, 200, r.Code, "cached, beside a body the daemon holds")
		fs.Resume()
		select {
		case r := <-got:
			require.Equal(t, 200, r.Code)
			assert.True(t, bytes.Equal(s.mid, r.Body), "the whole body")
		case <-time.After(20 * time.Second):
			t.Fatal("the body never came")
		}
		resp, body := big.Get("/big.bin") // many chunks, each read off the loop
		require.Equal(t, 200, resp.StatusCode)
		assert.True(t, bytes.Equal(s.big, body), "the whole 10 MiB body")
	})
}

// loadUncached has srv's cache load the entry of name (a HEAD: open,
// stat), and leaves none of its pages in the page cache, its name and
// attributes held by the kernel.
func loadUncached(t *testing.T, srv *servertest.Server, fs *fusetest.FS, name string) {
	h := servertest.Dial(t, srv.Addr)
	h.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(h, "HEAD /%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", name)
	require.Equal(t, 200, h.ReadRaw("HEAD").Code)
	dropPages(t, fs, name)
}

// dropPages leaves none of name's pages in the page cache, its name and
// attributes held by the kernel: FUSE drops a file's pages at an open
// without keep_cache, and DONTNEED drops what is left.
func dropPages(t *testing.T, fs *fusetest.FS, name string) {
	path := filepath.Join(fs.Dir(), name)
	f, err := os.Open(path)
	require.NoError(t, err)
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	require.NoError(t, f.Close())
	_, err = os.Stat(path)
	require.NoError(t, err)
}

// TestHungMountBodyAtFSTimeout: a 10 MiB file whose entry is cached (its
// header can go out at once) and whose pages are not in the page cache,
// on a mount whose daemon is paused, with a long write timeout: the
// response ends at --fs-timeout, not at --write-timeout: closed after its
// header when the header went out (the body's read hangs), or 503 with
// Retry-After when nothing was sent (the entry's re-stat hung first). A
// neighbour on the same loop is served meanwhile (not on the blocking
// backend, which serves one connection at a time), and the server serves
// on once the daemon answers. The test waits for the events (the answer,
// the close); it never sleeps.
func TestHungMountBodyAtFSTimeout(t *testing.T) {
	const fsTimeout = time.Second
	cfg := core.Config{FSTimeout: fsTimeout, WriteTimeout: time.Minute}
	eachHungBackendOf(t, cfg, 1, allBackends, func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server) {
		oneAtATime := strings.HasSuffix(t.Name(), "/blocking")
		var nb *servertest.Client
		if !oneAtATime {
			nb = servertest.Dial(t, srv.Addr)
			require.Equal(t, 200, getWithin(t, nb, "/index.html", 5*time.Second).Code)
		}
		loadUncached(t, srv, fs, "big.bin")
		fs.Pause()

		c := servertest.Dial(t, srv.Addr)
		c.SetDeadline(time.Now().Add(30 * time.Second)) // well before --write-timeout
		type result struct {
			resp *http.Response
			body int64
			err  error
			took time.Duration
		}
		got := make(chan result, 1)
		start := time.Now()
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		go func() {
			resp, err := http.ReadResponse(c.R, &http.Request{Method: "GET"})
			if err != nil {
				got <- result{err: err, took: time.Since(start)}
				return
			}
			n, err := io.Copy(io.Discard, resp.Body) // to the close, or the 503's end
			got <- result{resp: resp, body: n, err: err, took: time.Since(start)}
		}()
		if !oneAtATime {
			require.Eventually(t, func() bool { return fs.Waiting() > 0 }, 5*time.Second, time.Millisecond, "the body's read reached the paused daemon")
			r := getWithin(t, nb, "/index.html", time.Second)
			require.Equal(t, 200, r.Code, "a neighbour on the loop is served meanwhile")
		}
		var r result
		select {
		case r = <-got:
		case <-time.After(40 * time.Second):
			t.Fatal("no answer and no close")
		}
		require.NotNil(t, r.resp, "no response head at all: %v", r.err)
		switch r.resp.StatusCode {
		case 200:
			// The header went out before the body's read hung: closed
			// short of Content-Length.
			assert.Equal(t, int64(len(s.big)), r.resp.ContentLength)
			assert.Less(t, r.body, int64(len(s.big)), "closed short")
			var ne net.Error
			require.False(t, errors.As(r.err, &ne) && ne.Timeout(), "the test's deadline passed, not the server's close: %v", r.err)
			assert.Error(t, r.err, "cut short by the close")
			t.Logf("header, %d body bytes, then the close at %v", r.body, r.took.Round(time.Millisecond))
		case 503:
			assert.NotEmpty(t, r.resp.Header.Get("Retry-After"))
			assert.NoError(t, r.err)
			t.Logf("503 at %v: the entry's re-stat waited first", r.took.Round(time.Millisecond))
		default:
			t.Fatalf("status %d", r.resp.StatusCode)
		}
		assert.GreaterOrEqual(t, r.took, fsTimeout, "not before --fs-timeout")
		assert.Less(t, r.took, fsTimeout+5*time.Second, "at --fs-timeout (checked once a second), not at --write-timeout")

		fs.Resume()
		// A body of one part: with --fs-timeout this short, a loaded
		// machine (-race) may take longer than it over one of big.bin's
		// 40 to 80 parts.
		resp, body := servertest.Dial(t, srv.Addr).Get("/mid.bin")
		require.Equal(t, 200, resp.StatusCode, "served once the daemon answers again")
		assert.True(t, bytes.Equal(s.mid, body), "the whole body")
	})
}

// TestHungMountBodyRevalidated: the kernel answers stats from its
// attribute cache (held a minute here, as NFS's actimeo or sshfs's
// cache_timeout may) while reads wait for the paused daemon. A client
// asks for the file's head several times a second, and each second's
// first hit starts the entry's revalidation: a stat alone would come back
// at once, keeping the entry valid, and every GET would send its header
// and then nothing until --fs-timeout closed it. The revalidation also
// reads the body's first part, which does not come back: the entry is
// dropped, and the next request waits for the file system before any
// byte is sent, and gets 503 with Retry-After at --fs-timeout. The
// blocking backend re-stats inline, reading nothing.
func TestHungMountBodyRevalidated(t *testing.T) {
	const fsTimeout = time.Second
	cfg := core.Config{FSTimeout: fsTimeout, WriteTimeout: time.Minute}
	eachHungBackendOf(t, cfg, 1, skipBlocking, func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server) {
		h := servertest.Dial(t, srv.Addr)
		head := func() (status int, took time.Duration) {
			h.SetDeadline(time.Now().Add(20 * time.Second))
			start := time.Now()
			fmt.Fprintf(h, "HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
			r := h.ReadRaw("HEAD")
			return r.Code, time.Since(start)
		}
		status, _ := head() // loads the entry, reading no page of it
		require.Equal(t, 200, status)
		path := filepath.Join(fs.Dir(), "big.bin")
		f, err := os.Open(path)
		require.NoError(t, err)
		require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		require.NoError(t, f.Close())
		_, err = os.Stat(path) // held by the kernel for a minute
		require.NoError(t, err)
		fs.Pause()

		// A head every 50 ms, until one waits for the file system.
		pace := time.NewTicker(50 * time.Millisecond)
		defer pace.Stop()
		var took time.Duration
		for end := time.Now().Add(10 * time.Second); status == 200; <-pace.C {
			require.True(t, time.Now().Before(end), "the entry stayed valid: every GET would send its header, then hang")
			status, took = head()
		}
		assert.Equal(t, 503, status, "nothing sent before the file system answered")
		// At --fs-timeout by the loop's clock, which io_uring's loop may
		// have read a few milliseconds before the head came.
		assert.GreaterOrEqual(t, took, fsTimeout*9/10)
		assert.Less(t, took, fsTimeout+5*time.Second)

		c := servertest.Dial(t, srv.Addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		start := time.Now()
		fmt.Fprintf(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		resp, _ := c.ReadResponse("GET")
		assert.Equal(t, 503, resp.StatusCode, "a GET too: its header is not sent before its file is")
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		// It joined the load the head started: its own wait counts from
		// the loop's clock, read once a pass.
		assert.Less(t, time.Since(start), fsTimeout+5*time.Second)

		fs.Resume()
		// A body of one part: with --fs-timeout this short, a loaded
		// machine (-race) may take longer than it over one of big.bin's
		// 40 to 80 parts.
		resp, body := servertest.Dial(t, srv.Addr).Get("/mid.bin")
		require.Equal(t, 200, resp.StatusCode, "served once the daemon answers again")
		assert.True(t, bytes.Equal(s.mid, body), "the whole body")
	}, fusetest.CacheFor(time.Minute))
}

// TestHungMountErrorPage: issue 38's case, a large --error-page on a
// mount whose daemon is paused, its pages not in the page cache, its
// attributes held by the kernel. An error answered while the page's entry
// is still valid sends the page's header, then is closed at --fs-timeout
// (never held to --write-timeout); the page's revalidation, which reads
// its first part, does not come back, so the entry is dropped and the
// errors after it get the built-in page, at once. The blocking backend
// re-stats inline, reading nothing.
func TestHungMountErrorPage(t *testing.T) {
	const fsTimeout = time.Second
	cfg := core.Config{FSTimeout: fsTimeout, WriteTimeout: time.Minute, ErrorPages: map[int]string{405: "/big.bin"}}
	eachHungBackendOf(t, cfg, 1, skipBlocking, func(t *testing.T, s *site, fs *fusetest.FS, srv *servertest.Server) {
		// post sends POST / (405) on a new connection and reads the
		// answer to its end or to the close.
		post := func() (resp *http.Response, body int64, took time.Duration) {
			c := servertest.Dial(t, srv.Addr)
			c.SetDeadline(time.Now().Add(30 * time.Second))
			start := time.Now()
			fmt.Fprintf(c, "POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
			resp, err := http.ReadResponse(c.R, &http.Request{Method: "POST"})
			require.NoError(t, err)
			body, err = io.Copy(io.Discard, resp.Body)
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "no close before the test's deadline: %v", err)
			return resp, body, time.Since(start)
		}
		require.Eventually(t, func() bool {
			resp, body, _ := post()
			return resp.StatusCode == 405 && body == int64(len(s.big))
		}, 5*time.Second, 10*time.Millisecond, "the page is loaded")
		dropPages(t, fs, "big.bin")
		fs.Pause()

		for end := time.Now().Add(10 * time.Second); ; {
			require.True(t, time.Now().Before(end), "the page stayed in the cache: every error would send its header, then hang")
			resp, body, took := post()
			require.Equal(t, 405, resp.StatusCode)
			t.Logf("405 with Content-Length %d: %d bytes, ended at %v", resp.ContentLength, body, took.Round(time.Millisecond))
			if resp.ContentLength != int64(len(s.big)) {
				assert.Equal(t, resp.ContentLength, body, "the built-in page, whole")
				assert.Less(t, took, fsTimeout, "at once")
				break
			}
			assert.Less(t, body, int64(len(s.big)), "the page's header, then the close")
			assert.GreaterOrEqual(t, took, fsTimeout*9/10, "at --fs-timeout")
			assert.Less(t, took, fsTimeout+5*time.Second, "at --fs-timeout, not at --write-timeout")
		}
	}, fusetest.CacheFor(time.Minute))
}
