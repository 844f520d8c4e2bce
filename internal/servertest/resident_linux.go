package servertest

import (
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// KeepResident locks the pages of the file at path in the page cache, for
// a test that asserts how a cached file is served: the server's residency
// checks (the probe of a miss, cachestat before a body) send a file they
// find evicted the cold way, and on a busy machine a file written a moment
// ago can be evicted (memory pressure, proactive reclaim such as DAMON's).
// It skips the test, with the reason, when the pages cannot be locked. It
// returns the unlock; the test's end unlocks at the latest.
func KeepResident(t testing.TB, path string) (release func()) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	if err := unix.Mlock(mem); err != nil {
		unix.Munmap(mem)
		t.Skipf("cannot lock %s in the page cache (mlock: %v; RLIMIT_MEMLOCK?), and the test needs it there", path, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { unix.Munmap(mem) }) }
	t.Cleanup(release)
	return release
}
