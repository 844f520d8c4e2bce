package core

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Which file systems a loop may call into. A loop's calls must never wait
// for a file system that can hang: a FUSE daemon that stops answering, an
// NFS, CIFS or 9p server that is gone. On those an open asks the daemon
// (FUSE's OPEN), a stat may (GETATTR, once the attributes time out), a
// close may (FUSE's and NFS's FLUSH), and the calling thread waits for as
// long as the server takes, which may be for ever. A local file system
// (one on a block device, or in memory) waits only for the disk, which
// the probe's non-waiting calls and cachestat already keep off the loop.
//
// So every file carries the mount it lives on (statx's STATX_MNT_ID,
// Linux 5.8) and the Server keeps the mount table's answer for each
// mount: local or not, by the file system's type in /proc/self/mountinfo.
// Nothing here asks a file system anything: the mount ID comes with a stat
// the load makes anyway, and mountinfo is procfs. What follows from it:
//
//   - the loop's probe (both backends) runs only when the document root is on a
//     local mount, and with RESOLVE_NO_XDEV, so that a path which crosses
//     into another mount (one mounted under the root since, say) fails
//     with EXDEV and goes to a helper instead;
//   - io_uring's ring, whose OPENAT2 the kernel first tries on the loop's
//     thread, is asked only for opens confined to a local root's mount;
//     beneath a root that is not local the helpers make every call
//     themselves (core.FileCalls, helperFS);
//   - a File on a mount that is not local (File.Local) is closed by a
//     helper, is never mapped, and its body never goes by sendfile(2) on
//     the loop: the backends read it off the loop;
//   - the table is read again when the mount table changes (watch: a
//     mount ID freed by an unmount is given to the next mount), and when
//     a helper's load meets a mount it does not know.
//
// A type not on the list counts as not local: the cost of a wrong "not
// local" is a helper round trip on a miss; of a wrong "local", a frozen
// loop.

// localTypes are the file systems a loop may call into: on a block device
// or in memory, with no server behind them. overlay is Docker's and
// Kubernetes' image root, whose layers are local directories.
var localTypes = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true,
	"f2fs": true, "jfs": true, "reiserfs": true, "bcachefs": true, "zfs": true,
	"vfat": true, "exfat": true, "ntfs3": true, "hfsplus": true,
	"tmpfs": true, "ramfs": true, "overlay": true,
	"squashfs": true, "erofs": true, "iso9660": true, "udf": true,
}

// mountTable maps mount IDs to whether the mount is local, read by every
// loop without a lock (a snapshot behind an atomic pointer) and replaced,
// under mu, when a helper meets a mount it does not know.
type mountTable struct {
	mu   sync.Mutex // serialises rereads
	snap atomic.Pointer[mountSnap]
}

// mountSnap is one read of mountinfo: each mount's file-system type.
type mountSnap struct {
	fs map[uint64]string
}

// mountinfo is the mount table's source; tests point it elsewhere.
var mountinfo = "/proc/self/mountinfo"

// load reads mountinfo into a new snapshot.
func (t *mountTable) load() error {
	f, err := os.Open(mountinfo)
	if err != nil {
		return err
	}
	defer f.Close()
	s := &mountSnap{fs: map[uint64]string{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		id, fstype, ok := parseMountinfo(sc.Bytes())
		if !ok {
			continue
		}
		s.fs[id] = fstype
	}
	if err := sc.Err(); err != nil {
		return err
	}
	t.snap.Store(s)
	return nil
}

// parseMountinfo reads a line of /proc/self/mountinfo (proc(5)): "36 35
// 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the mount ID
// first, the type after the "-" that ends the optional fields.
func parseMountinfo(line []byte) (id uint64, fstype string, ok bool) {
	f := bytes.Fields(line)
	if len(f) < 7 {
		return 0, "", false
	}
	id, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	for i := 6; i+1 < len(f); i++ {
		if string(f[i]) == "-" {
			return id, string(f[i+1]), true
		}
	}
	return 0, "", false
}

// local reports whether mount id is known to be local: on the loop's
// thread, no call.
func (t *mountTable) local(id uint64) bool {
	s := t.snap.Load()
	return s != nil && localTypes[s.fs[id]]
}

// known reports whether id is in the table, and its type.
func (t *mountTable) known(id uint64) (string, bool) {
	s := t.snap.Load()
	if s == nil {
		return "", false
	}
	fs, ok := s.fs[id]
	return fs, ok
}

// learn makes sure id is in the table, reading mountinfo again if it is
// not: on a helper, for a file found on a mount mounted since the last
// read. A mount gone again before the read stays unknown, and not local.
func (t *mountTable) learn(id uint64) {
	if _, ok := t.known(id); ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.known(id); !ok {
		t.load()
	}
}

// watch reads the table again each time the mount table changes, until
// the stop it returns is called: /proc/self/mountinfo polls with POLLPRI
// when a mount is made or removed (proc(5)), and a mount ID freed by an
// unmount is given to the next mount, which may be of another type. stop
// returns once the watcher has closed its fds. Without mountinfo or an
// eventfd nothing is watched, and stop does nothing.
func (t *mountTable) watch() (stop func()) {
	// A raw fd, not an *os.File: os.Open adds a file that polls, as
	// mountinfo does, to the runtime's epoll set, and every poll of it
	// there takes the change it reports (the kernel reports each once per
	// open file), so that this watcher's poll could miss it.
	mfd, err := unix.Open(mountinfo, unix.O_RDONLY|unix.O_CLOEXEC, 0) // uncounted: at start, not a loop's
	if err != nil {
		return func() {}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // uncounted: at start, not a loop's
	if err != nil {
		unix.Close(mfd) // uncounted: at start
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(mfd) // uncounted: the watcher's
		defer unix.Close(efd) // uncounted: the watcher's
		fds := []unix.PollFd{{Fd: int32(mfd), Events: unix.POLLPRI}, {Fd: int32(efd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1) // uncounted: the watcher's, not a loop's
			switch {
			case err == unix.EINTR:
			case err != nil || fds[1].Revents != 0:
				return
			case fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0:
				t.mu.Lock()
				t.load()
				t.mu.Unlock()
			}
		}
	}()
	return func() {
		unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}) // uncounted: Server.Close's
		<-done
	}
}

// mountOf is the mount ID of the file open as fd, from a statx that asks
// nothing of the file system (AT_STATX_DONT_SYNC: FUSE, NFS and CIFS
// answer from what the kernel holds): at start, for the roots.
func mountOf(fd int) (uint64, error) {
	var st unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st) // uncounted: at start
	if err != nil {
		return 0, err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return 0, unix.EOPNOTSUPP // before Linux 5.8: every mount counts as not local
	}
	return st.Mnt_id, nil
}

// RootFS describes the document root's file system for the startup line:
// its type, and whether loops call into it (a local one) or leave every
// call to the helpers.
func (s *Server) RootFS() string {
	fs, ok := s.mounts.known(s.rootMnt)
	if !ok {
		fs = "unknown"
	}
	if s.rootLocal {
		return fs + ", local: warm files load on the loop"
	}
	return fs + ", not local: no loop calls into it"
}

// localRoot is the mount of a root fd, and whether it is local.
func (s *Server) localRoot(fd int) (uint64, bool) {
	id, err := mountOf(fd)
	if err != nil {
		return 0, false
	}
	return id, s.mounts.local(id)
}
