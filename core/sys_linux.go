package core

import (
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

// fstatat is newfstatat(2), counted with fstat.
func (s sys) fstatat(dirfd int, name string, st *unix.Stat_t, flags int) error {
	s.st.Syscalls[SysFstat]++
	return unix.Fstatat(dirfd, name, st, flags)
}

func (s sys) pread(fd int, p []byte, off int64) (int, error) {
	s.st.Syscalls[SysPread]++
	return unix.Pread(fd, p, off)
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
	if f == nil || f.fd < 0 || f.info.size <= 0 {
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
