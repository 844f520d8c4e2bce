package core

import (
	"time"

	"golang.org/x/sys/unix"
)

// sys makes the system calls the core makes on a loop's thread (a cache
// miss's opens, stats and reads, a CGI script's lookup, pipe and kill)
// and counts each in the loop's Stats, once per call, EINTR retries too.
// As with the backends' loops.Sys, counting here and nowhere else keeps
// the counters in step with strace (TestSyscallsCountedInWrappers). The
// calls the core makes elsewhere are not a loop's: the roots opened at
// start, and a CGI job's fork, exec, pipes and wait on its goroutines.
type sys struct{ st *Stats }

func (l *Loop) sys() sys      { return sys{&l.Stats} }
func (c *fileCache) sys() sys { return sys{c.stats} }

// openat2 is openat2(2), retried on EINTR.
func (s sys) openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	for {
		s.st.Syscalls[SysOpen]++
		fd, err := unix.Openat2(dirfd, name, how)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func (s sys) fstat(fd int, st *unix.Stat_t) error {
	s.st.Syscalls[SysFstat]++
	return unix.Fstat(fd, st)
}

func (s sys) pread(fd int, p []byte, off int64) (int, error) {
	s.st.Syscalls[SysPread]++
	return unix.Pread(fd, p, off)
}

// dupfd duplicates fd (close-on-exec), for a helper to read from.
func (s sys) dupfd(fd int) (int, error) {
	s.st.Syscalls[SysFcntl]++
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
}

func (s sys) close(fd int) {
	s.st.Syscalls[SysClose]++
	unix.Close(fd)
}

func (s sys) pipe2(p *[2]int, flags int) error {
	s.st.Syscalls[SysPipe]++
	return unix.Pipe2(p[:], flags)
}

// getdents is getdents64(2), through unix.ReadDirent.
func (s sys) getdents(fd int, buf []byte) (int, error) {
	s.st.Syscalls[SysGetdents]++
	return unix.ReadDirent(fd, buf)
}

// killGroup sends SIGKILL to process group pgid.
func (s sys) killGroup(pgid int) {
	s.st.Syscalls[SysKill]++
	unix.Kill(-pgid, unix.SIGKILL)
}

// mmap maps n bytes of anonymous, private memory: a cached memory body.
func (s sys) mmap(n int) ([]byte, error) {
	s.st.Syscalls[SysMmap]++
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// mmapFile maps n bytes of file fd read-only and shared: a File's view.
func (s sys) mmapFile(fd int, n int) ([]byte, error) {
	s.st.Syscalls[SysMmap]++
	return unix.Mmap(fd, 0, n, unix.PROT_READ, unix.MAP_SHARED)
}

// munmap unmaps what mmap or mmapFile mapped.
func (s sys) munmap(b []byte) {
	s.st.Syscalls[SysMunmap]++
	unix.Munmap(b)
}

// statx is statx(2), counted with fstat: every stat the core makes (of an
// fd with AT_EMPTY_PATH, or of a path beneath a directory fd) is one.
func (s sys) statx(dirfd int, name string, flags int, st *unix.Statx_t) error {
	for {
		s.st.Syscalls[SysFstat]++
		err := unix.Statx(dirfd, name, flags|unix.AT_STATX_SYNC_AS_STAT, statxMask, st)
		if err != unix.EINTR {
			return err
		}
	}
}

// preadNowait is preadv2(2) with RWF_NOWAIT, counted with pread: it reads
// only what the page cache holds, and fails with EAGAIN where it would
// wait for the disk (the loop's probe of a small body, load.go).
func (s sys) preadNowait(fd int, p []byte, off int64) (int, error) {
	for {
		s.st.Syscalls[SysPread]++
		n, err := unix.Preadv2(fd, [][]byte{p}, off, unix.RWF_NOWAIT)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// addOffloaded adds the calls a helper made for the loop (fsOp.calls) to
// its counters, when the operation lands on the loop's thread: the
// counters then agree with strace for the process, whichever thread made
// the call.
func (s sys) addOffloaded(calls *[NumSys]uint64) {
	for k, v := range calls {
		s.st.Syscalls[k] += v
	}
}

// statxMask is what every stat asks for: the basic stats and the mount
// ID, which tells whether a loop may call into the file's file system.
const statxMask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID

// resolveCached is RESOLVE_CACHED (openat2(2), Linux 5.12), which
// golang.org/x/sys/unix does not define.
const resolveCached = 0x20

// loopFS is a load's fileSys on the loop's thread: each call made and
// counted by sys. With nowait it is the probe (load.go): openat2 adds
// RESOLVE_CACHED, which fails with EAGAIN when the path is not all in the
// dentry cache, and RESOLVE_NO_XDEV, which fails with EXDEV when it leaves
// the root's mount; a small body is read with RWF_NOWAIT; a directory is never
// listed (getdents64 has no non-waiting form), so a listing goes to a
// helper.
type loopFS struct {
	s      sys
	nowait bool
}

func (f loopFS) openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	if f.nowait {
		// RESOLVE_NO_XDEV: the probe stays on the root's mount, the
		// one known to be local (mounts_linux.go); a path into another
		// fails with EXDEV and goes to a helper.
		h := *how
		h.Resolve |= resolveCached | unix.RESOLVE_NO_XDEV
		return f.s.openat2(dirfd, name, &h)
	}
	return f.s.openat2(dirfd, name, how)
}

func (f loopFS) statx(dirfd int, name string, flags int, st *unix.Statx_t) error {
	return f.s.statx(dirfd, name, flags, st)
}

func (f loopFS) pread(fd int, p []byte, off int64) (int, error) {
	if f.nowait {
		return f.s.preadNowait(fd, p, off)
	}
	for {
		n, err := f.s.pread(fd, p, off)
		if err != unix.EINTR {
			return n, err
		}
	}
}

func (f loopFS) close(fd int) { f.s.close(fd) }

func (f loopFS) mmap(n int) ([]byte, error) { return f.s.mmap(n) }
func (f loopFS) munmap(b []byte)            { f.s.munmap(b) }

func (f loopFS) getdents(fd int, buf []byte) (int, error) {
	if f.nowait {
		return 0, unix.EAGAIN
	}
	return f.s.getdents(fd, buf)
}

// helperFS is a load's fileSys on a helper goroutine: openat2, statx,
// pread and close through the loop's FileCalls, getdents64 (no io_uring
// opcode has it) and the listing's stats made here. It counts what it
// makes in the operation's calls, which the loop adds to its Stats when
// the operation lands (addOffloaded), when the FileCalls makes system
// calls (DirectCalls.MakesSyscalls); io_uring's ring counts its own work,
// as SQEs.
type helperFS struct {
	fc     FileCalls
	direct bool // fc makes system calls (MakesSyscalls): count them
	calls  *[NumSys]uint64
	// localRoot is the loader's root when its mount is local, else -1:
	// an open beneath it is first tried confined to that mount.
	localRoot int
}

func (f helperFS) count(k Sys) {
	if f.direct {
		f.calls[k]++
	}
}

// openat2 opens through fc, when fc makes its calls on this goroutine
// (DirectCalls). Through io_uring's ring an open is first tried on the
// loop's thread, where it must not reach a file system that can hang, and
// one that lands after its loop has gone installs an fd that nobody
// closes: so the ring is asked only for an open confined to the local
// root's mount (RESOLVE_NO_XDEV); a path that leaves it (EXDEV) is opened
// here, on the helper, where a late answer is closed with its operation
// (discard). Beneath a root that is not local fc is DirectCalls (startOp).
func (f helperFS) openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	if f.direct {
		f.count(SysOpen)
		return f.fc.Openat2(dirfd, name, how)
	}
	if dirfd == f.localRoot {
		h := *how
		h.Resolve |= unix.RESOLVE_NO_XDEV
		if fd, err := f.fc.Openat2(dirfd, name, &h); err != unix.EXDEV {
			return fd, err
		}
	}
	f.calls[SysOpen]++
	return DirectCalls{}.Openat2(dirfd, name, how)
}

func (f helperFS) statx(dirfd int, name string, flags int, st *unix.Statx_t) error {
	f.count(SysFstat)
	return f.fc.Statx(dirfd, name, flags|unix.AT_STATX_SYNC_AS_STAT, statxMask, st)
}

func (f helperFS) pread(fd int, p []byte, off int64) (int, error) {
	f.count(SysPread)
	return f.fc.Pread(fd, p, off)
}

func (f helperFS) close(fd int) {
	f.count(SysClose)
	f.fc.Close(fd)
}

func (f helperFS) mmap(n int) ([]byte, error) {
	f.calls[SysMmap]++
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS) // uncounted: here, in calls
}

func (f helperFS) munmap(b []byte) {
	f.calls[SysMunmap]++
	unix.Munmap(b) // uncounted: here, in calls
}

func (f helperFS) getdents(fd int, buf []byte) (int, error) {
	f.calls[SysGetdents]++
	for {
		n, err := unix.ReadDirent(fd, buf) // uncounted: here, in calls; the loop adds them when the listing lands
		if err != unix.EINTR {
			return n, err
		}
	}
}

// handOffClose counts a close the loop hands to a helper
// (Loop.closeOff), which makes it with closeOffLoop.
func (s sys) handOffClose() { s.st.Syscalls[SysClose]++ }

// closeOffLoop is the close handOffClose counted, on a helper.
func closeOffLoop(fd int) { unix.Close(fd) } // uncounted: counted by handOffClose when the loop handed it off

// closeLate closes an fd of an operation that landed after its loop had
// closed (fsOp.discard), or of a cache its loop's Close handed over
// (Server.closeLater): no loop counts it any more.
func closeLate(fd int) { unix.Close(fd) } // uncounted: the loop is gone

// unmapLate unmaps a body of such an operation.
func unmapLate(b []byte) { unix.Munmap(b) } // uncounted: the loop is gone

// statxInfo is the part of a statx that the cache keeps.
func statxInfo(st *unix.Statx_t) fileInfo {
	return fileInfo{
		mode:  uint32(st.Mode),
		size:  int64(st.Size),
		mtime: time.Unix(st.Mtime.Sec, int64(st.Mtime.Nsec)),
		ino:   st.Ino,
		dev:   unix.Mkdev(st.Dev_major, st.Dev_minor),
		mnt:   st.Mnt_id, // 0, never a mount's ID, where the kernel lacks STATX_MNT_ID
	}
}

// BodyView is a read-only shared mapping of the whole file that Out().File
// sends from, as it was when opened (info.size bytes): the io_uring
// backend sends from it instead of reading into a buffer of its own. It is
// made on first use, one per File (and so per loop), and unmapped with the
// File's last reference; the Conn holds one until the body is Sent. nil
// when there is no file body or it cannot be mapped (an empty file, a file
// system without mmap). The caller must never read it itself (a page past
// the end of a file truncated since faults with SIGBUS); the kernel's copy
// of a send from it gets EFAULT instead.
func (c *Conn) BodyView() []byte {
	f := c.file
	if f == nil || f.fd < 0 || f.info.size <= 0 || !f.local {
		// Not local: mapping it may ask the server (NFS revalidates on
		// mmap), and a send from it faults its pages in on the loop.
		return nil
	}
	if f.view == nil {
		v, err := c.l.cache.sys().mmapFile(f.fd, int(f.info.size))
		if err != nil {
			return nil
		}
		f.view = v
	}
	return f.view
}
