//go:build linux

package uring

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// startFiles starts a one-loop server on dir and returns the loop's
// FileCalls, the ones the core uses, and the server.
func startFiles(t *testing.T, dir string) (*fileCalls, *servertest.Server) {
	t.Helper()
	if err := New().Probe(); err != nil {
		t.Skip(err)
	}
	got := make(chan *fileCalls, 1)
	b := New()
	b.onSetup = func(l *loop) { got <- l.files }
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
	return <-got, srv
}

// beneath is how the core opens a file under its root (open_linux.go).
var beneath = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
}

func openRoot(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestFileCallsThroughRing makes the core's file-system calls through a
// serving loop's ring: RESOLVE_BENEATH still refuses ".." and a symlink
// out of the root (giouring's PrepareOpenat2 would issue OPENAT and open
// both), a file beneath opens, statx reports its size and inode, pread
// reads its exact bytes, and close closes it.
func TestFileCallsThroughRing(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "x"), []byte("outside"), 0o644))
	require.NoError(t, os.Symlink("../x", filepath.Join(dir, "out")))
	body := make([]byte, 100_000)
	_, err := rand.Read(body)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.bin"), body, 0o644))
	f, srv := startFiles(t, dir)
	root := openRoot(t, dir)
	before := srv.Core.Stats().Own[ownSQEs]

	for _, name := range []string{"../x", "out"} {
		fd, err := f.Openat2(root, name, &beneath)
		assert.Equal(t, unix.EXDEV, err, name)
		assert.Equal(t, 0, fd, name)
	}
	_, err = f.Openat2(root, "missing", &beneath)
	assert.Equal(t, unix.ENOENT, err)

	fd, err := f.Openat2(root, "f.bin", &beneath)
	require.NoError(t, err)
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	require.NoError(t, err)
	assert.NotZero(t, fl&unix.O_NONBLOCK, "open_how's flags reached the kernel")

	var want unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(dir, "f.bin"), &want))
	var st unix.Statx_t
	require.NoError(t, f.Statx(root, "f.bin", 0, unix.STATX_BASIC_STATS, &st))
	assert.Equal(t, uint64(len(body)), st.Size)
	assert.Equal(t, want.Ino, st.Ino)
	var st2 unix.Statx_t
	require.NoError(t, f.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &st2))
	assert.Equal(t, want.Ino, st2.Ino)
	assert.Equal(t, unix.ENOENT, f.Statx(root, "missing", 0, unix.STATX_BASIC_STATS, &st))

	p := make([]byte, len(body)+10)
	n, err := f.Pread(fd, p, 0)
	require.NoError(t, err)
	require.Equal(t, len(body), n)
	assert.True(t, bytes.Equal(body, p[:n]))
	n, err = f.Pread(fd, p[:7], 1234)
	require.NoError(t, err)
	assert.Equal(t, body[1234:1241], p[:n])

	require.NoError(t, f.Close(fd))
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	assert.Equal(t, unix.EBADF, err, "closed")
	assert.Equal(t, unix.EBADF, f.Close(fd))

	require.NoError(t, srv.Stop())
	assert.GreaterOrEqual(t, srv.Core.Stats().Own[ownSQEs]-before, int64(12), "each call was an SQE")
}

// TestFileCallsConcurrent: 64 goroutines at once, as many as the loop has
// slots, each opening, stating, reading and closing its own file.
func TestFileCallsConcurrent(t *testing.T) {
	const n = 64
	files := map[string][]byte{}
	for i := range n {
		files[string(rune('a'+i%26))+string(rune('a'+i/26))] = bytes.Repeat([]byte{byte(i)}, 1000+i)
	}
	dir := servertest.Site(t, files)
	fds, goroutines := baseline(t)
	f, srv := startFiles(t, dir)
	root := openRoot(t, dir)
	var wg sync.WaitGroup
	for name, body := range files {
		wg.Go(func() {
			for range 20 {
				fd, err := f.Openat2(root, name, &beneath)
				if !assert.NoError(t, err) {
					return
				}
				var st unix.Statx_t
				assert.NoError(t, f.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_SIZE, &st))
				assert.Equal(t, uint64(len(body)), st.Size)
				p := make([]byte, len(body))
				k, err := f.Pread(fd, p, 0)
				assert.NoError(t, err)
				assert.Equal(t, body, p[:k])
				assert.NoError(t, f.Close(fd))
			}
		})
	}
	wg.Wait()
	require.NoError(t, srv.Stop())
	unix.Close(root)
	settle(t, fds+1, goroutines) // +1: openRoot's cleanup has not run
}

// TestFileCallsShutdownInFlight stops the server while an open and a
// read wait in the kernel: an open of a FIFO with no writer (on an
// io-wq worker) and a read of an empty pipe. Neither caller hangs, both
// are answered ECANCELED, calls after the stop are refused, Close still
// closes, the server stops cleanly, and no fd is left open.
func TestFileCallsShutdownInFlight(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	fds, goroutines := baseline(t)
	f, srv := startFiles(t, dir)
	root := openRoot(t, dir)
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))

	// O_TRUNC (dropped for a FIFO) makes io_uring run the open on a
	// worker (io_openat_force_async), where, without O_NONBLOCK, it waits
	// for a writer; inline it would add O_NONBLOCK and return at once.
	blocking := beneath
	blocking.Flags = blocking.Flags&^unix.O_NONBLOCK | unix.O_TRUNC
	openErr, readErr := make(chan error, 1), make(chan error, 1)
	buf := make([]byte, 64)
	go func() {
		fd, err := f.Openat2(root, "fifo", &blocking)
		if err == nil {
			unix.Close(fd)
		}
		openErr <- err
	}()
	go func() {
		_, err := f.Pread(p[0], buf, 0)
		readErr <- err
	}()
	// Both are in the kernel once the loop has issued them.
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case e := <-openErr:
			t.Fatal("open", e)
		case e := <-readErr:
			t.Fatal("read", e)
		default:
		}
		return len(f.free) == fileSlots-2 && len(f.q) == 0 && !f.posted
	}, 5*time.Second, time.Millisecond)
	// issue prepared the SQEs; the pass's enter submits them. A function
	// posted now runs in a later pass (RunPosted took issue's queue), so
	// after that enter.
	passed := make(chan struct{})
	f.l.core.Post(func() { close(passed) })
	select {
	case <-passed:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop made no pass after issuing the calls")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not stop with file calls in flight")
	}
	assert.Equal(t, unix.ECANCELED, <-openErr)
	assert.Equal(t, unix.ECANCELED, <-readErr)
	_, err := f.Openat2(root, "fifo", &beneath)
	assert.Equal(t, unix.ECANCELED, err, "after the stop")

	// Close after the stop still closes.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close(fd))
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	assert.Equal(t, unix.EBADF, err)

	unix.Close(p[0])
	unix.Close(p[1])
	unix.Close(root)
	settle(t, fds+1, goroutines)
}

// fuseRoot mounts src at a new directory with bindfs (FUSE) and returns
// it, or skips the test when bindfs or /dev/fuse is not there.
func fuseRoot(t *testing.T, src string) string {
	t.Helper()
	bin, err := exec.LookPath("bindfs")
	if err != nil {
		t.Skip("bindfs is not installed (apt-get install bindfs fuse3): no FUSE docroot to test")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	mnt := t.TempDir()
	if out, err := exec.Command(bin, src, mnt).CombinedOutput(); err != nil {
		t.Skipf("bindfs %s %s: %v: %s", src, mnt, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			t.Errorf("fusermount3 -u %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// TestFUSEDocroot serves a docroot on FUSE (bindfs), where files opened
// O_NONBLOCK lack FMODE_NOWAIT: every body arrives whole, by splice and
// by read, cold (the first request after the mount) and warm.
func TestFUSEDocroot(t *testing.T) { eachBody(t, testFUSEDocroot) }

func testFUSEDocroot(t *testing.T, b *Backend) {
	src, index, big := docroot(t, 3<<20+12345)
	dir := fuseRoot(t, src)
	srv := servertest.Start(t, b, core.Config{Dir: dir}, 1)
	c := servertest.Dial(t, srv.Addr)
	for range 2 {
		resp, body := c.Get("/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, strconv.Itoa(len(big)), resp.Header.Get("Content-Length"))
		require.True(t, bytes.Equal(big, body), "big.bin: %d bytes of %d, or different", len(body), len(big))
		resp, body = c.Get("/index.html")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, index, body)
	}
	resp, body := c.Do("GET", "/big.bin", "Range: bytes=1000-300000\r\n")
	require.Equal(t, 206, resp.StatusCode)
	require.True(t, bytes.Equal(big[1000:300001], body))
	require.NoError(t, srv.Stop())
}

// TestChunkReadAgain: a chunk's READ that the kernel completes with
// -EAGAIN (here RWF_NOWAIT on a file evicted from the page cache, as a
// READ of an O_NONBLOCK file on FUSE, NFS or 9p may) is tried again, and
// the body arrives whole after its full Content-Length; before, the
// connection was closed mid-body.
func TestChunkReadAgain(t *testing.T) {
	src, _, big := docroot(t, 1<<20)
	f, err := os.Open(filepath.Join(src, "big.bin"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync())
	var nowait sync.Once
	chunkReadFlags = func() uint32 {
		var fl uint32
		nowait.Do(func() {
			// Out of the page cache, so that RWF_NOWAIT cannot be served.
			require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
			fl = unix.RWF_NOWAIT
		})
		return fl
	}
	defer func() { chunkReadFlags = nil }()
	b := New()
	b.Body = BodyRead
	srv := servertest.Start(t, b, core.Config{Dir: src}, 1)
	c := servertest.Dial(t, srv.Addr)
	resp, body := c.Get("/big.bin")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, strconv.Itoa(len(big)), resp.Header.Get("Content-Length"))
	require.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
	require.NoError(t, srv.Stop())
}

// TestColdBodyByChunk: a body whose next part is not in the page cache
// goes by chunk (read and send), not by sendfile, which would wait for the
// disk on the loop's thread, nor by splice, whose file → pipe half would
// hold an io-wq worker while the disk reads; a cached one goes by sendfile
// (or splice). Both arrive whole.
func TestColdBodyByChunk(t *testing.T) {
	for _, splice := range []bool{false, true} {
		t.Run(fmt.Sprintf("splice=%v", splice), func(t *testing.T) {
			src, _, big := docroot(t, 4<<20)
			b := New()
			if splice {
				b.Body = BodySplice
			}
			srv := servertest.Start(t, b, core.Config{Dir: src}, 1)
			c := servertest.Dial(t, srv.Addr)
			get := func() {
				resp, body := c.Get("/big.bin")
				require.Equal(t, 200, resp.StatusCode)
				require.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
			}
			resident := servertest.KeepResident(t, filepath.Join(src, "big.bin"))
			get() // cached: written just now, and locked there
			resident()
			f, err := os.Open(filepath.Join(src, "big.bin"))
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, f.Sync())
			// Pages that the socket still holds (until the client's ACK)
			// stay in the cache through DONTNEED: drop them until some
			// are gone, as cachestat counts.
			pages := uint64((int64(len(big)) + pageSize - 1) / pageSize)
			for i := 0; ; i++ {
				require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
				var cs unix.Cachestat_t
				require.NoError(t, unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Len: uint64(len(big))}, &cs, 0))
				if cs.Cache < pages {
					break
				}
				if i == 50 {
					t.Skipf("all %d pages stayed in the page cache after DONTNEED", pages)
				}
				time.Sleep(10 * time.Millisecond)
			}
			get()
			require.NoError(t, srv.Stop())
			st := srv.Core.Stats()
			assert.Equal(t, int64(1), st.Own[ownBodyCold], "the cold body went by chunk, the cached one not")
			assert.NotZero(t, st.Own[ownChunks], "a chunk was made for the cold body")
			assert.Zero(t, st.Own[ownBodyFallbacks])
			assert.NotZero(t, st.Syscalls[core.SysCachestat])
			if splice {
				assert.Zero(t, st.Syscalls[core.SysSendfile])
			} else {
				assert.NotZero(t, st.Syscalls[core.SysSendfile], "the cached body went by sendfile")
			}
		})
	}
}

// TestFileCallsLateOpenClosed: an open whose caller was answered at
// shutdown (gone) and whose CQE then brings an fd has that fd closed by
// the loop, and its slot freed; a late statx writes nowhere.
func TestFileCallsLateOpenClosed(t *testing.T) {
	var st core.Stats
	l := &loop{stats: &st, sys: loops.NewSys(&st)}
	f, err := newFileCalls(l)
	require.NoError(t, err)
	defer f.unmap()
	fd, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	take := func(k fileKind) *fileReq {
		r := f.free[len(f.free)-1]
		f.free = f.free[:len(f.free)-1]
		r.kind, r.gen, r.gone = k, 7, true
		f.issued++
		return r
	}
	r := take(fileOpen)
	f.complete(7, r.idx, int32(fd))
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	assert.Equal(t, unix.EBADF, err, "the late fd is closed")
	assert.Equal(t, uint64(1), st.Syscalls[core.SysClose])
	r = take(fileStatx) // r.st is nil: a write would fault
	f.complete(7, r.idx, 0)
	assert.Len(t, f.free, fileSlots, "both slots are free again")
	assert.Zero(t, f.issued)
}

// TestResidencyOncePerPass: many clients of one cached 1 MiB file at once
// (pipelined, so their chains plan in the same passes) get the exact
// bytes, and the loop asks cachestat about the file at most once per pass
// of the loop, not once per chain; a file evicted from the page cache is
// still seen as cold (TestColdBodyByChunk).
func TestResidencyOncePerPass(t *testing.T) {
	src, _, big := docroot(t, 1<<20)
	servertest.KeepResident(t, filepath.Join(src, "big.bin"))
	srv := servertest.Start(t, New(), core.Config{Dir: src}, 1)
	servertest.Dial(t, srv.Addr).Get("/big.bin") // loaded and cached
	const clients, each = 40, 3
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			c := servertest.Dial(t, srv.Addr)
			defer c.Close()
			for range each {
				io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
			}
			for range each {
				resp, body := c.ReadResponse("GET")
				assert.Equal(t, 200, resp.StatusCode)
				assert.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
			}
		})
	}
	wg.Wait()
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.Zero(t, st.Own[ownBodyCold])
	assert.NotZero(t, st.Syscalls[core.SysCachestat])
	assert.LessOrEqual(t, st.Syscalls[core.SysCachestat], st.Syscalls[core.SysUringEnter]+2,
		"cachestat calls against io_uring_enter calls (one per pass)")
}

// TestCachedBodySplicesWhileDiskInPlay: within the server's cold window of a
// cold part, a cached body goes by splice, not by sendfile, which would
// wait on the loop's thread for a page that cachestat counts while a read
// still fills it; once the window has passed, by sendfile again.
func TestCachedBodySplicesWhileDiskInPlay(t *testing.T) {
	src, _, big := docroot(t, 2<<20)
	servertest.KeepResident(t, filepath.Join(src, "big.bin"))
	srv := servertest.Start(t, New(), core.Config{Dir: src}, 1)
	c := servertest.Dial(t, srv.Addr)
	srv.Core.Cold.Note(time.Now())
	resp, body := c.Get("/big.bin")
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
	srv.Core.Cold.Reset()
	resp, body = c.Get("/big.bin")
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, bytes.Equal(big, body), "%d bytes of %d, or different", len(body), len(big))
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.NotZero(t, st.Syscalls[core.SysPipe], "the first body went by splice, through a pipe")
	assert.NotZero(t, st.Syscalls[core.SysSendfile], "the second by sendfile")
	assert.Zero(t, st.Own[ownBodyCold])
}
