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

// munmap unmaps what mmap mapped.
func (s sys) munmap(b []byte) {
	s.st.Syscalls[SysMunmap]++
	unix.Munmap(b)
}
