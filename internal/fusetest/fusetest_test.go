//go:build linux

package fusetest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// resolveCached is RESOLVE_CACHED (openat2(2), Linux 5.12), which
// golang.org/x/sys/unix does not define.
const resolveCached = 0x20

// grace is how long an operation may take before it counts as held by
// the paused daemon: a request answered from the kernel's caches takes
// microseconds, one held never finishes until Resume.
const grace = 200 * time.Millisecond

// site makes a directory holding files.
func site(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func TestReadThroughMount(t *testing.T) {
	f := Mount(t, site(t, map[string]string{"index.html": "<h1>hello</h1>\n"}))

	got, err := os.ReadFile(filepath.Join(f.Dir(), "index.html"))
	require.NoError(t, err)
	assert.Equal(t, []byte("<h1>hello</h1>\n"), got)
	assert.Zero(t, f.Waiting())
}

// TestAbortAllSparesAGivenNumber: a mount's connection number goes, once
// it is unmounted, to the next mount of any process. AbortAll, which runs
// at every test process's exit, must not abort it there: it ended another
// process's paused requests with ECONNABORTED (TestHungMountServesCached,
// beside a second test process). The other process's mount is played by
// one this process made and then forgot.
func TestAbortAllSparesAGivenNumber(t *testing.T) {
	dir := site(t, map[string]string{"index.html": "<h1>hello</h1>\n"})
	var first uint32
	t.Run("unmounted", func(t *testing.T) {
		first = Mount(t, dir).conn
	})
	other := Mount(t, dir)
	if other.conn != first {
		t.Skipf("the next mount was given number %d, not %d: another process took it", other.conn, first)
	}
	mounts.Lock()
	delete(mounts.conns, other.conn) // not this process's
	mounts.Unlock()
	AbortAll()
	got, err := os.ReadFile(filepath.Join(other.Dir(), "index.html"))
	require.NoError(t, err, "AbortAll aborted a number it had given up")
	assert.Equal(t, "<h1>hello</h1>\n", string(got))
}

func TestPauseHoldsRequestsUntilResume(t *testing.T) {
	f := Mount(t, site(t, map[string]string{
		"index.html": "<h1>hello</h1>\n",
		"other.txt":  "other body\n",
	}))
	_, err := os.ReadFile(filepath.Join(f.Dir(), "index.html"))
	require.NoError(t, err)

	f.Pause()
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// other.txt was never looked up, so the kernel must ask the daemon.
		body, err := os.ReadFile(filepath.Join(f.Dir(), "other.txt"))
		done <- result{body, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("read finished while paused: %q, %v", r.body, r.err)
	case <-time.After(grace):
	}
	assert.Positive(t, f.Waiting())
	// With the LOOKUP, the RELEASE of index.html may be held: the kernel
	// sends it after close(2) returns, without waiting for it.
	assert.Contains(t, f.heldOps(), "LOOKUP")

	f.Resume()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		assert.Equal(t, []byte("other body\n"), r.body)
	case <-time.After(10 * time.Second):
		t.Fatal("read did not finish after Resume")
	}
	assert.Zero(t, f.Waiting())
}

// While many requests are held, the daemon goes on receiving (each one
// parks only its own goroutine) and the Go runtime goes on: a garbage
// collection, which stops the world, completes.
func TestManyHeldRequestsDoNotStopTheProcess(t *testing.T) {
	const n = 20
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("f%d", i)] = fmt.Sprintf("body %d", i)
	}
	f := Mount(t, site(t, files))

	f.Pause()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			body, err := os.ReadFile(filepath.Join(f.Dir(), fmt.Sprintf("f%d", i)))
			if err == nil && string(body) != fmt.Sprintf("body %d", i) {
				err = fmt.Errorf("f%d: got %q", i, body)
			}
			errs <- err
		}()
	}
	require.Eventually(t, func() bool { return f.Waiting() >= n }, 5*time.Second, 10*time.Millisecond,
		"held: %v", f.heldOps())
	runtime.GC()

	f.Resume()
	for range n {
		require.NoError(t, <-errs)
	}
}

// A test that ends paused, with a file on the mount still open, leaves no
// mount behind: the cleanup resumes, fails to unmount (busy), and detaches.
func TestCleanupDetachesBusyPausedMount(t *testing.T) {
	dir := site(t, map[string]string{"a": "a"})
	var mnt string
	fd := -1
	t.Run("leaves it paused and busy", func(t *testing.T) {
		f := Mount(t, dir)
		mnt = f.Dir()
		var err error
		fd, err = unix.Open(filepath.Join(mnt, "a"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		f.Pause()
	})
	require.NotEmpty(t, mnt)
	assert.False(t, mounted(t, mnt), "%s is still mounted", mnt)
	assert.NoDirExists(t, mnt)
	// The detached mount lives on until this close. Its connection was
	// aborted when the cleanup could only detach it, so the FLUSH fails
	// at once (ENOTCONN) instead of waiting on the daemon; the fd is
	// closed either way.
	if err := unix.Close(fd); err != nil {
		require.ErrorIs(t, err, unix.ENOTCONN)
	}
	require.ErrorIs(t, unix.Close(fd), unix.EBADF, "closed")
}

// mounted reports whether dir is a mount point of this process's namespace.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	mi, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer mi.Close()
	s := bufio.NewScanner(mi)
	for s.Scan() {
		// The fifth field is the mount point.
		if fields := strings.Fields(s.Text()); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	require.NoError(t, s.Err())
	return false
}

// probe is the state of one case of TestWhatWaitsOnAPausedDaemon: fd is
// open on the file (or the root) when the case asks for one; what the
// case's op opens, it adds to opened, to be closed after Resume.
type probe struct {
	path   string
	fd     int
	opened []int
}

// TestWhatWaitsOnAPausedDaemon records which system calls on a file of a
// hung FUSE mount wait on its daemon and which the kernel answers from its
// caches: the facts a server whose document root may hang is designed on.
func TestWhatWaitsOnAPausedDaemon(t *testing.T) {
	const body = "0123456789"
	tests := []struct {
		name  string
		cache time.Duration // CacheFor
		// open is the flags of the fd the case holds open before the
		// pause; -1 for none.
		open int
		read bool // read the fd through before the pause
		dir  bool // open the mount's root directory, not the file
		op   func(p *probe) error
		held []string // the ops held while paused, nil if none
		err  error    // op's error once resumed
	}{
		{
			name:  "stat, entry and attributes cached",
			cache: time.Minute,
			open:  -1,
			op:    stat,
		},
		{
			name:  "stat, entry expired",
			cache: 0,
			open:  -1,
			op:    stat,
			held:  []string{"LOOKUP"},
		},
		{
			name:  "statx AT_STATX_DONT_SYNC, entry and attributes cached",
			cache: time.Minute,
			open:  -1,
			op:    statxDontSync,
		},
		{
			name:  "statx AT_STATX_DONT_SYNC, entry expired",
			cache: 0,
			open:  -1,
			op:    statxDontSync,
			held:  []string{"LOOKUP"},
		},
		{
			name:  "fstat, attributes cached",
			cache: time.Minute,
			open:  unix.O_RDONLY,
			op:    fstat,
		},
		{
			// A READ marks the atime stale (fuse_invalidate_atime), and a
			// stat that asks for it goes to the daemon, cache or not.
			name:  "fstat after a read, attributes cached",
			cache: time.Minute,
			open:  unix.O_RDONLY,
			read:  true,
			op:    fstat,
			held:  []string{"GETATTR"},
		},
		{
			name:  "statx of an fd without STATX_ATIME after a read, attributes cached",
			cache: time.Minute,
			open:  unix.O_RDONLY,
			read:  true,
			op: func(p *probe) error {
				var stx unix.Statx_t
				return unix.Statx(p.fd, "", unix.AT_EMPTY_PATH,
					unix.STATX_TYPE|unix.STATX_MODE|unix.STATX_INO|unix.STATX_SIZE|unix.STATX_MTIME, &stx)
			},
		},
		{
			name:  "fstat, attributes expired",
			cache: 0,
			open:  unix.O_RDONLY,
			op:    fstat,
			held:  []string{"GETATTR"},
		},
		{
			name:  "statx AT_EMPTY_PATH|AT_STATX_DONT_SYNC of an fd after a read, attributes expired",
			cache: 0,
			open:  unix.O_RDONLY,
			read:  true,
			op: func(p *probe) error {
				var stx unix.Statx_t
				return unix.Statx(p.fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_BASIC_STATS, &stx)
			},
		},
		{
			name:  "open O_RDONLY, entry cached",
			cache: time.Minute,
			open:  -1,
			op:    func(p *probe) error { return p.openat2(unix.O_RDONLY, 0) },
			held:  []string{"OPEN"},
		},
		{
			name:  "open O_PATH, entry cached",
			cache: time.Minute,
			open:  -1,
			op:    func(p *probe) error { return p.openat2(unix.O_PATH, 0) },
		},
		{
			name:  "open O_PATH, entry expired",
			cache: 0,
			open:  -1,
			op:    func(p *probe) error { return p.openat2(unix.O_PATH, 0) },
			held:  []string{"LOOKUP"},
		},
		{
			name:  "openat2 RESOLVE_CACHED O_RDONLY, entry cached",
			cache: time.Minute,
			open:  -1,
			op:    func(p *probe) error { return p.openat2(unix.O_RDONLY, resolveCached) },
			held:  []string{"OPEN"},
		},
		{
			name:  "openat2 RESOLVE_CACHED O_PATH, entry cached",
			cache: time.Minute,
			open:  -1,
			op:    func(p *probe) error { return p.openat2(unix.O_PATH, resolveCached) },
		},
		{
			name:  "openat2 RESOLVE_CACHED O_RDONLY, entry expired",
			cache: 0,
			open:  -1,
			op:    func(p *probe) error { return p.openat2(unix.O_RDONLY, resolveCached) },
			err:   unix.EAGAIN,
		},
		{
			name:  "pread of pages already read, attributes cached",
			cache: time.Minute,
			open:  unix.O_RDONLY,
			read:  true,
			op:    func(p *probe) error { return p.pread(body) },
		},
		{
			name:  "pread of pages already read, attributes expired",
			cache: 0,
			open:  unix.O_RDONLY,
			read:  true,
			op:    func(p *probe) error { return p.pread(body) },
			held:  []string{"GETATTR"},
		},
		{
			name:  "preadv2 RWF_NOWAIT of pages already read, attributes cached",
			cache: time.Minute,
			open:  unix.O_RDONLY,
			read:  true,
			op: func(p *probe) error {
				_, err := unix.Preadv2(p.fd, [][]byte{make([]byte, len(body))}, 0, unix.RWF_NOWAIT)
				return err
			},
			// FUSE files do not take RWF_NOWAIT (no FMODE_NOWAIT).
			err: unix.EOPNOTSUPP,
		},
		{
			name:  "close of an O_RDONLY fd",
			cache: time.Minute,
			open:  unix.O_RDONLY,
			read:  true,
			op:    func(p *probe) error { return p.close() },
			held:  []string{"FLUSH"},
		},
		{
			name:  "close of an O_PATH fd",
			cache: time.Minute,
			open:  unix.O_PATH,
			op:    func(p *probe) error { return p.close() },
		},
		{
			// A FUSE directory has no flush; its RELEASEDIR is sent
			// without waiting for the answer.
			name:  "close of a directory fd",
			cache: time.Minute,
			open:  unix.O_RDONLY | unix.O_DIRECTORY,
			dir:   true,
			op:    func(p *probe) error { return p.close() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Mount(t, site(t, map[string]string{"file": body}), CacheFor(tt.cache))
			p := &probe{path: filepath.Join(f.Dir(), "file"), fd: -1}
			t.Cleanup(func() { p.closeAll(t) })
			// Look the file up and read its attributes, so that what the
			// kernel caches, it has.
			var st unix.Stat_t
			require.NoError(t, unix.Stat(p.path, &st))
			if tt.open >= 0 {
				name := p.path
				if tt.dir {
					name = f.Dir()
				}
				fd, err := unix.Open(name, tt.open|unix.O_CLOEXEC, 0)
				require.NoError(t, err)
				p.fd = fd
			}
			if tt.read {
				require.NoError(t, p.pread(body))
			}

			held, err := whilePaused(t, f, func() error { return tt.op(p) })
			t.Logf("held %v, then %v", held, err)
			assert.Equal(t, tt.held, held)
			assert.Equal(t, tt.err, err)
		})
	}
}

// whilePaused pauses f and runs op. If op is still waiting after grace,
// it returns the operations the daemon holds then; it resumes f and
// returns op's result.
func whilePaused(t *testing.T, f *FS, op func() error) (held []string, err error) {
	t.Helper()
	f.Pause()
	defer f.Resume()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return nil, err
	case <-time.After(grace):
	}
	require.Eventually(t, func() bool { return f.Waiting() > 0 }, 5*time.Second, 10*time.Millisecond,
		"op is waiting, but not in the daemon")
	held = f.heldOps()
	f.Resume()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("op did not finish after Resume")
	}
	return held, err
}

func stat(p *probe) error {
	var st unix.Stat_t
	return unix.Stat(p.path, &st)
}

func fstat(p *probe) error {
	var st unix.Stat_t
	return unix.Fstat(p.fd, &st)
}

func statxDontSync(p *probe) error {
	var stx unix.Statx_t
	return unix.Statx(unix.AT_FDCWD, p.path, unix.AT_STATX_DONT_SYNC, unix.STATX_BASIC_STATS, &stx)
}

// openat2 opens p.path with flags and resolve, keeping the fd to close
// after Resume (its close would wait on a paused daemon).
func (p *probe) openat2(flags int, resolve uint64) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, p.path, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: resolve,
	})
	if err != nil {
		return err
	}
	p.opened = append(p.opened, fd)
	return nil
}

// pread reads p.fd from its start and checks it holds want.
func (p *probe) pread(want string) error {
	buf := make([]byte, len(want)+1)
	n, err := unix.Pread(p.fd, buf, 0)
	if err != nil {
		return err
	}
	if string(buf[:n]) != want {
		return fmt.Errorf("read %q, want %q", buf[:n], want)
	}
	return nil
}

func (p *probe) close() error {
	fd := p.fd
	p.fd = -1
	return unix.Close(fd)
}

func (p *probe) closeAll(t *testing.T) {
	if p.fd >= 0 {
		assert.NoError(t, p.close())
	}
	for _, fd := range p.opened {
		assert.NoError(t, unix.Close(fd))
	}
	p.opened = nil
}

func TestMain(m *testing.M) { os.Exit(Main(m)) }
