package epoll

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// coldFile writes size random bytes to dir/name, fsyncs them and drops
// them from the page cache (POSIX_FADV_DONTNEED), and checks with
// cachestat that none is resident. t.TempDir is on the disk here; on a
// tmpfs the pages cannot be dropped, and the test is skipped.
func coldFile(t *testing.T, dir, name string, size int) []byte {
	t.Helper()
	body := make([]byte, size)
	rand.Read(body)
	f, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(body)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	var cs unix.Cachestat_t
	err = unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Len: uint64(size)}, &cs, 0)
	if err == unix.ENOSYS || err == unix.EPERM {
		t.Skipf("cachestat(2) unavailable (%v): cannot check that the file is cold", err)
	}
	require.NoError(t, err)
	if cs.Cache > 0 {
		t.Skipf("%d pages of %s stayed in the page cache after DONTNEED (a tmpfs?)", cs.Cache, dir)
	}
	return body
}

// lockResident maps the file at path and locks the mapping, so that all of
// it is in the page cache until the test ends, and reports whether it
// could (mlock needs RLIMIT_MEMLOCK).
func lockResident(t *testing.T, path string, size int) bool {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(m) })
	if err := unix.Mlock(m); err != nil {
		t.Logf("mlock of %d bytes: %v; the second response may need a read-ahead", size, err)
		return false
	}
	return true
}

// holdReadaheads makes the first read-ahead wait, on its helper, until
// release is closed; entered is closed when it has begun. Later ones run.
func holdReadaheads(t *testing.T) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	loops.ReadaheadHook = func() {
		if n.Add(1) == 1 {
			close(entered)
			<-release
		}
	}
	t.Cleanup(func() { loops.ReadaheadHook = nil })
	return entered, release
}

// wait fails the test if ch is not closed within 10 s: what it waits for
// did not happen.
func wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// sockets counts the process's open sockets.
func sockets(t *testing.T) int {
	_, n := openFiles(t, "socket:")
	return n
}

// openFiles lists the process's open fds that name path.
func openFiles(t *testing.T, path string) (all int, named int) {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, path) {
			named++
		}
	}
	return len(ents), named
}

// TestColdBodyIsReadAhead: a body whose pages are not in the page cache
// is sent whole and exact, its chunks read ahead on a helper; sent again,
// now resident, it needs no read-ahead. Each sendfile chunk costs one
// probe at most. With the RWF_NOWAIT probe (no cachestat) too.
func TestColdBodyIsReadAhead(t *testing.T) {
	for _, nowait := range []bool{false, true} {
		t.Run(fmt.Sprintf("nowait=%v", nowait), func(t *testing.T) {
			loops.NoCachestat = nowait
			t.Cleanup(func() { loops.NoCachestat = false })
			dir := t.TempDir()
			const size = 3<<20 + 123 // four chunks, the last one page
			body := coldFile(t, dir, "cold.bin", size)
			srv := servertest.Start(t, New(), core.Config{Dir: dir}, 1)
			c := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(c, "GET /cold.bin HTTP/1.1\r\nHost: t\r\n\r\n")
			r := c.ReadRaw("GET")
			require.Equal(t, 200, r.Code)
			require.True(t, bytes.Equal(body, r.Body), "the body, byte for byte (got %d bytes of %d)", len(r.Body), size)
			// Once published (each second), the first response's counts. A
			// snapshot published before its last chunk went may count as
			// many bytes as the body alone (the head makes up for the
			// chunk), and one read-ahead fewer: so wait for head and body.
			sent := uint64(len(r.Status)+2+2) + size
			for _, f := range r.Fields {
				sent += uint64(len(f) + 2)
			}
			var first core.Stats
			require.Eventually(t, func() bool { first = srv.Core.Stats(); return first.BytesOut >= sent }, 5*time.Second, 10*time.Millisecond)
			if !nowait {
				assert.NotZero(t, first.Own[ownReadaheads], "the cold chunks were read ahead on a helper")
			}
			// A RWF_NOWAIT probe starts the read of the page it asks for,
			// and here that read sometimes lands before the probe returns:
			// 7 of 200 probes of a just-dropped page read it. So the probe
			// may find a cold chunk resident, and only cachestat's answer
			// is asserted. The nowait probe is the fallback where cachestat
			// is missing.
			t.Logf("first response: %d read-aheads", first.Own[ownReadaheads])
			assert.Zero(t, first.Own[ownReadaheadsInline])

			// This machine's kernel drops pages of a file just read even with
			// memory to spare: a loop of write, DONTNEED, read lost 1-8 of
			// 769 pages within 100 ms in 2 runs of 100, with no reclaim
			// counted in /proc/vmstat. The server then rightly reads the
			// chunk ahead again. So the test locks the file in the page
			// cache (mlock of a mapping: 0 of 100 lost pages), and where it
			// cannot, it does not assert that the second needs none.
			locked := lockResident(t, filepath.Join(dir, "cold.bin"), size)
			resp, got := c.Get("/cold.bin")
			require.Equal(t, 200, resp.StatusCode)
			require.True(t, bytes.Equal(body, got))
			c.Close()
			require.NoError(t, srv.Stop())
			st := srv.Core.Stats()
			if locked {
				assert.Equal(t, first.Own[ownReadaheads], st.Own[ownReadaheads], "resident now: no read-ahead")
			}
			probes := st.Syscalls[core.SysCachestat]
			if nowait {
				assert.Zero(t, probes)
				probes = st.Syscalls[core.SysPread]
			}
			assert.NotZero(t, probes)
			// One probe per sendfile chunk; and in the cold window a chunk
			// read ahead is probed again once read, before its sendfile.
			assert.LessOrEqual(t, probes, st.Syscalls[core.SysSendfile]+uint64(st.Own[ownReadaheads]+st.Own[ownReadaheadsInline]),
				"one probe per sendfile chunk, and one per read-ahead, at most")
		})
	}
}

// TestHotPageServedDuringReadAhead: while a cold body's read-ahead is
// held on its helper, a cached page on the same loop is answered; then
// the cold body is sent whole.
func TestHotPageServedDuringReadAhead(t *testing.T) {
	for _, level := range []bool{false, true} {
		t.Run(fmt.Sprintf("level=%v", level), func(t *testing.T) {
			entered, release := holdReadaheads(t)
			dir := servertest.Site(t, map[string]string{"index.html": "hot page"})
			body := coldFile(t, dir, "cold.bin", 2<<20)
			srv := servertest.Start(t, &Backend{LevelTriggered: level}, core.Config{Dir: dir}, 1)
			hot := servertest.Dial(t, srv.Addr)
			_, got := hot.Get("/index.html")
			require.Equal(t, "hot page", string(got))

			cold := servertest.Dial(t, srv.Addr)
			fmt.Fprintf(cold, "GET /cold.bin HTTP/1.1\r\nHost: t\r\n\r\n")
			wait(t, entered, "a read-ahead")
			for range 3 {
				resp, got := hot.Get("/index.html")
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, "hot page", string(got), "answered while the cold read-ahead is held")
			}
			close(release)
			resp, got := cold.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode)
			require.True(t, bytes.Equal(body, got), "the cold body, byte for byte")
			require.NoError(t, srv.Stop())
			assert.NotZero(t, srv.Core.Stats().Own[ownReadaheads])
		})
	}
}

// TestCloseDuringReadAhead: a client that resets its connection while its
// body's read-ahead runs is closed at once; the file stays open until the
// helper is done, then closes (no cache: the connection held the last
// reference), and the loop goes on serving, a connection that took the
// closed one's fd number too.
func TestCloseDuringReadAhead(t *testing.T) {
	entered, release := holdReadaheads(t)
	dir := servertest.Site(t, map[string]string{"index.html": "hot page"})
	coldFile(t, dir, "cold.bin", 2<<20)
	path := filepath.Join(dir, "cold.bin")
	srv := servertest.Start(t, New(), core.Config{Dir: dir, NoFileCache: true}, 1)

	s0 := sockets(t)
	cold := servertest.Dial(t, srv.Addr)
	fmt.Fprintf(cold, "GET /cold.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	wait(t, entered, "a read-ahead")
	require.NoError(t, cold.Conn.(*net.TCPConn).SetLinger(0))
	cold.Close() // a reset
	require.Eventually(t, func() bool { return sockets(t) == s0 }, 5*time.Second, time.Millisecond,
		"the server closes the reset connection while its read-ahead is held")
	_, held := openFiles(t, path)
	assert.Equal(t, 1, held, "the file is open while its helper reads")
	// The loop serves on, with the helper still held; once the server
	// has closed the reset connection, the next ones may reuse its fd.
	for range 3 {
		hot := servertest.Dial(t, srv.Addr)
		_, got := hot.Get("/index.html")
		require.Equal(t, "hot page", string(got))
		hot.Close()
	}
	hot := servertest.Dial(t, srv.Addr)
	_, got := hot.Get("/index.html")
	require.Equal(t, "hot page", string(got))

	close(release)
	require.Eventually(t, func() bool { _, n := openFiles(t, path); return n == 0 },
		5*time.Second, 10*time.Millisecond, "the file is closed once the read-ahead is done")
	_, got = hot.Get("/index.html")
	require.Equal(t, "hot page", string(got), "the late done did not disturb the connection now on the loop")
	hot.Close()
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	assert.Equal(t, int64(1), st.Own[ownReadaheads])
	assert.Equal(t, st.Accepts, st.Closes, "every connection closed")
}

// TestShutdownDuringReadAhead: the shutdown closes a connection whose
// read-ahead is still on its helper once its deadline passes, waits for
// the read-ahead, and leaves no fd open.
func TestShutdownDuringReadAhead(t *testing.T) {
	entered, release := holdReadaheads(t)
	dir := t.TempDir()
	coldFile(t, dir, "cold.bin", 2<<20)
	path := filepath.Join(dir, "cold.bin")
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the runtime's poller opens its fds on first use
	require.NoError(t, err)
	ln.Close()
	before, _ := openFiles(t, path)
	srv := servertest.Start(t, New(), core.Config{Dir: dir, ShutdownTimeout: 50 * time.Millisecond}, 1)
	cold := servertest.Dial(t, srv.Addr)
	fmt.Fprintf(cold, "GET /cold.bin HTTP/1.1\r\nHost: t\r\n\r\n")
	wait(t, entered, "a read-ahead")
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop() }()
	// The connection is closed by the loop's teardown, the helper still held.
	io.ReadAll(cold) // the header, then the close, or a reset
	_, held := openFiles(t, path)
	assert.Equal(t, 1, held, "the file is open while its helper reads")
	close(release)
	require.NoError(t, <-stopped)
	cold.Close()
	after, held := openFiles(t, path)
	assert.Zero(t, held)
	assert.Equal(t, before, after, "no fd left open")
}
