package backend_test

// A document root on a file system that hangs (issue 25): a FUSE mount
// whose daemon stops answering, as a dead NFS server or a stalled sshfs
// does (internal/fusetest). No loop may call into it, so a cached file is
// served at once beside a request the daemon holds, which gets 503 at
// --fs-timeout.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			skipOneAtATime(t, "a request held by the file system holds the loop's only connection")
			s := makeSite(t)
			for _, name := range []string{"fifo", "escape"} {
				require.NoError(t, os.Remove(filepath.Join(s.dir, name))) // FUSE's loopback would serve neither as the tests expect
			}
			for i := range 8 {
				require.NoError(t, os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644))
			}
			fs := fusetest.Mount(t, s.dir)
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
