package fusetest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is a mounted, pausable loopback of a directory.
type FS struct {
	dir        string       // mount point; immutable
	srv        *fuse.Server // immutable
	fusermount string       // the binary that mounted it, "" for mount(2); immutable
	conn       uint32       // its connection in /sys/fs/fuse/connections; immutable

	mu      sync.Mutex
	release chan struct{}  // non-nil while paused, closed by Resume; guarded by mu
	held    map[string]int // op name → requests held now; guarded by mu
}

// Option changes how Mount mounts.
type Option func(*options)

type options struct {
	cache time.Duration
}

// CacheFor sets how long the kernel may keep the entries (dentries) and
// attributes the daemon gives it before it asks again. The default is one
// second, as libfuse and sshfs default to; 0 makes every path walk and
// every stat reach the daemon. Names that do not exist are never cached
// (a negative timeout of 0, also libfuse's default).
func CacheFor(d time.Duration) Option {
	return func(o *options) { o.cache = d }
}

// Mount serves a loopback of dir, an existing directory, at a new mount
// point (Dir), until the test ends. It skips the test when FUSE cannot be
// mounted here, and fails it on any other error.
func Mount(t testing.TB, dir string, opts ...Option) *FS {
	t.Helper()
	o := options{cache: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("fusetest: FUSE is not available here: %v", err)
	}
	// The loopback joins names to its root's path: it must not depend on
	// the working directory.
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("fusetest: %v", err)
	}
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		t.Fatalf("fusetest: loopback of %s: %v", dir, err)
	}
	// Not t.TempDir: its cleanup removes the tree, and if the unmount
	// ever failed, that would walk into the mount and delete dir's files
	// through the loopback. An rmdir of the mount point is harmless.
	mnt, err := os.MkdirTemp("", "fusetest-")
	if err != nil {
		t.Fatalf("fusetest: %v", err)
	}

	f := &FS{dir: mnt, held: make(map[string]int)}
	neg := time.Duration(0)
	fsOpts := &fs.Options{
		EntryTimeout:    &o.cache,
		AttrTimeout:     &o.cache,
		NegativeTimeout: &neg,
		MountOptions: fuse.MountOptions{
			FsName: dir,
			Name:   "fusetest",
			// Strict, so that a failed mount(2) keeps its errno (EPERM,
			// ENODEV) for the skip below instead of turning into
			// "fusermount not found"; the fallback is ours.
			DirectMountStrict: true,
			// Passthrough (go-fuse offers it when root) has the kernel
			// read the loopback's files itself, so READ would never reach
			// the daemon; a network file system has no such thing.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
	}
	raw := &pausing{fs: fs.NewNodeFS(root, fsOpts), f: f}
	srv, err := fuse.NewServer(raw, mnt, &fsOpts.MountOptions)
	if bin := fusermount(); err != nil && bin != "" {
		directErr := err
		fsOpts.MountOptions.DirectMountStrict = false
		srv, err = fuse.NewServer(raw, mnt, &fsOpts.MountOptions)
		if err != nil {
			err = errors.Join(directErr, err)
		}
		f.fusermount = bin
	}
	if err != nil {
		// NewServer may fail after mount(2) succeeded (in INIT); a
		// detach of a mount point that holds nothing is harmless.
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		_ = os.Remove(mnt)
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) ||
			errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENOENT) {
			t.Skipf("fusetest: cannot mount FUSE here (no fuse module, or not privileged): %v", err)
		}
		t.Fatalf("fusetest: mount %s at %s: %v", dir, mnt, err)
	}
	f.srv = srv
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		f.unmount(t)
		t.Fatalf("fusetest: mount %s at %s: %v", dir, mnt, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err == nil {
		f.conn = unix.Minor(st.Dev) // the connection's number in fusectl
		mounts.Lock()
		mounts.conns[f.conn] = true
		mounts.Unlock()
	}
	t.Cleanup(func() { f.unmount(t) })
	return f
}

// fusermount returns the fusermount binary that the fallback uses, as
// go-fuse looks for it, or "" if there is none.
func fusermount() string {
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(bin); err == nil {
			return p
		}
	}
	return ""
}

// Dir returns the mount point.
func (f *FS) Dir() string { return f.dir }

// Pause makes every FUSE request received from now on wait until Resume.
// Requests already being served finish. Pausing a paused FS does nothing.
func (f *FS) Pause() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release == nil {
		f.release = make(chan struct{})
	}
}

// Resume lets every held request through, and the ones that follow.
func (f *FS) Resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release != nil {
		close(f.release)
		f.release = nil
	}
}

// Waiting returns how many requests the paused daemon holds now. A
// request the kernel has queued but the daemon has not read yet is not
// counted; with the daemon reading on while paused, that window is short.
func (f *FS) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.held {
		n += c
	}
	return n
}

// heldOps returns the names of the operations held now, sorted, with
// repeats: for test failure messages and the observations in this
// package's tests.
func (f *FS) heldOps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ops []string
	for op, c := range f.held {
		for range c {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

// wait holds a request for op while f is paused. It ignores the kernel's
// INTERRUPT (the cancel channel go-fuse closes on a signal to the
// caller), as a stopped daemon would: the caller keeps waiting unless the
// signal is fatal.
func (f *FS) wait(op string) {
	f.mu.Lock()
	release := f.release
	if release == nil {
		f.mu.Unlock()
		return
	}
	f.held[op]++
	f.mu.Unlock()

	<-release

	f.mu.Lock()
	f.held[op]--
	if f.held[op] == 0 {
		delete(f.held, op)
	}
	f.mu.Unlock()
}

// unmount resumes f, so that nothing waits on the daemon any longer, and
// unmounts it. The unmount fails while a file on it is still open
// (EBUSY); go-fuse retries a few times, and then the mount is detached
// (MNT_DETACH), so that no test leaves one behind: the kernel ends it
// when the last file on it is closed.
//
// The connection's number is its superblock's device number, which the
// kernel gives the next mount of any process once the superblock is gone
// (the lowest free one): an abort by number after that would end another
// mount, as a concurrent test process's AbortAll ended a paused mount's
// opens with ECONNABORTED (TestHungMountServesCached's 500s). So a number
// is aborted only while this mount's superblock is sure to exist: pinned
// by an fd on its root across the detach, or still mounted (AbortAll).
func (f *FS) unmount(t testing.TB) {
	f.Resume()
	err := f.srv.Unmount()
	if err != nil {
		t.Logf("fusetest: unmount %s: %v; detaching it", f.dir, err)
		// Mounted still (the unmount failed), so the superblock is ours
		// while pin is open, detached or not.
		pin, perr := unix.Open(f.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if f.fusermount != "" {
			err = exec.Command(f.fusermount, "-u", "-z", f.dir).Run()
		} else {
			err = unix.Unmount(f.dir, unix.MNT_DETACH)
		}
		if err != nil {
			if perr == nil {
				unix.Close(pin)
			}
			t.Errorf("fusetest: detach %s: %v", f.dir, err)
			return
		}
		// A file on it is still open: this process's own daemon must not
		// be what its close waits for when the process exits.
		if perr == nil {
			abort(f.conn)
			unix.Close(pin)
		}
	}
	mounts.Lock()
	delete(mounts.conns, f.conn)
	mounts.Unlock()
	if err := os.Remove(f.dir); err != nil {
		t.Errorf("fusetest: %v", err)
	}
}

// mounts are the connections of the mounts made and not unmounted yet,
// for AbortAll: a mount is taken out before its number can go to another.
var mounts = struct {
	sync.Mutex
	conns map[uint32]bool
}{conns: make(map[uint32]bool)}

// Main runs the tests of a package that mounts (call it from TestMain:
// os.Exit(fusetest.Main(m))). The daemon of each mount runs in the test's
// own process, so a file of the mount still open when the process exits
// would have its close (a FLUSH) wait for ever on a daemon that has died
// with the process: a test that fails before its cleanup, or a go test
// timeout, which ends the process without cleanups. So every mount's
// connection is aborted after the run, and 15 s before the timeout: their
// calls then fail with ENOTCONN instead of waiting.
func Main(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 30*time.Second {
			time.AfterFunc(d-15*time.Second, AbortAll)
		}
	}
	code := m.Run()
	AbortAll()
	return code
}

// AbortAll aborts the connection of every mount made and still mounted:
// what waits on one fails with ENOTCONN. One that unmount took out may
// have given its number to another process's mount.
func AbortAll() {
	mounts.Lock()
	defer mounts.Unlock()
	for c := range mounts.conns {
		abort(c)
	}
}

// abort writes to the connection's abort file in fusectl, mounting
// fusectl first where it is not.
func abort(conn uint32) {
	if conn == 0 {
		return
	}
	const ctl = "/sys/fs/fuse/connections"
	name := fmt.Sprintf("%s/%d/abort", ctl, conn)
	if _, err := os.Stat(name); os.IsNotExist(err) {
		unix.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	os.WriteFile(name, []byte("1"), 0)
}
