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
	// The detached mount lives on until this close; its daemon still
	// answers the FLUSH.
	require.NoError(t, unix.Close(fd))
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
