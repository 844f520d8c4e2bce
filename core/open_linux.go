package core

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the file system calls of the core: opening the document
// root, and on a cache miss opening, stating and reading a file (made and
// counted by sys_linux.go). A cache hit makes none.

// openRoot opens the document root as an O_PATH directory fd; every file is
// opened relative to it with RESOLVE_BENEATH.
func openRoot(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // uncounted: at start, not a loop's
	if err != nil {
		return -1, err
	}
	// O_PATH does not check read permission; a root we cannot list or
	// open files in should fail at start-up, not on the first request.
	probe, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // uncounted
	if err != nil {
		unix.Close(fd) // uncounted
		return -1, err
	}
	unix.Close(probe) // uncounted
	return fd, nil
}

// closeFD closes a root: at start or at the Server's end, not a loop's.
func closeFD(fd int) { unix.Close(fd) } // uncounted

// fileInfo is the part of a stat that the cache keeps.
type fileInfo struct {
	mode  uint32
	size  int64
	mtime time.Time
	ino   uint64
	dev   uint64
}

func (fi *fileInfo) isDir() bool     { return fi.mode&unix.S_IFMT == unix.S_IFDIR }
func (fi *fileInfo) isReg() bool     { return fi.mode&unix.S_IFMT == unix.S_IFREG }
func (fi *fileInfo) isSymlink() bool { return fi.mode&unix.S_IFMT == unix.S_IFLNK }
func (fi *fileInfo) same(o *fileInfo) bool {
	return fi.ino == o.ino && fi.dev == o.dev && fi.size == o.size && fi.mtime.Equal(o.mtime) && fi.mode == o.mode
}

func infoOf(st *unix.Stat_t) fileInfo {
	return fileInfo{
		mode:  st.Mode,
		size:  st.Size,
		mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		ino:   st.Ino,
		dev:   st.Dev,
	}
}

// openBeneath opens name below root for reading. RESOLVE_BENEATH makes the
// kernel refuse any path, symlink or ".." that would leave the root (EXDEV);
// O_NONBLOCK keeps a FIFO from blocking the loop in open.
func (c *fileCache) openBeneath(name string) (int, fileInfo, error) {
	if name == "" {
		name = "."
	}
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if c.cfg.FollowSymlinks {
		// The path itself was cleaned and cannot climb with "..": only
		// symlinks may lead out, and here the operator allows it.
		how.Resolve = unix.RESOLVE_NO_MAGICLINKS
	}
	fd, err := c.sys().openat2(c.root, name, &how)
	if err != nil {
		return -1, fileInfo{}, err
	}
	var st unix.Stat_t
	if err := c.sys().fstat(fd, &st); err != nil {
		c.sys().close(fd)
		return -1, fileInfo{}, err
	}
	return fd, infoOf(&st), nil
}

// statBeneath re-stats name to see whether a cached entry is still current.
func (c *fileCache) statBeneath(name string) (fileInfo, error) {
	if name == "" {
		name = "."
	}
	var st unix.Stat_t
	if err := c.sys().fstatat(c.root, name, &st, 0); err != nil {
		return fileInfo{}, err
	}
	return infoOf(&st), nil
}

// readBody reads f's body, size bytes from the start of fd, into memory.
// A body larger than copyBodyMax is sent from that memory by reference
// (Conn.segs), and a completion-based backend hands its address to the
// kernel, which reads it after the call returns: so it is mapped outside
// the Go heap (an anonymous mmap, unmapped when f's last reference goes),
// which the DESIGN rule on kernel-read memory asks. A smaller body is
// always copied into out with its header, and stays on the heap, where it
// does not round up to a page.
func (c *fileCache) readBody(f *File, fd int, size int64) error {
	var buf []byte
	if size > copyBodyMax {
		b, err := c.sys().mmap(int(size))
		if err != nil {
			return err
		}
		buf = b
	} else {
		buf = make([]byte, size)
	}
	for off := 0; off < len(buf); {
		n, err := c.sys().pread(fd, buf[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = errors.New("file shrank while being read")
		}
		if err != nil {
			if size > copyBodyMax {
				c.sys().munmap(buf)
			}
			return err
		}
		off += n
	}
	f.body, f.mapped = buf, size > copyBodyMax
	return nil
}

func (c *fileCache) closeFile(fd int) { c.sys().close(fd) }

// openStatus maps an open error to the status nginx would give.
func openStatus(err error) int {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENAMETOOLONG):
		return 404
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		// EXDEV: the path or a symlink in it leads outside the root.
		return 403
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM):
		return 503
	}
	return 500
}

// dirNames lists the directory open as fd, without "." and "..". The fd
// is fresh from openBeneath and read once, from its start.
func (c *fileCache) dirNames(fd int) ([]string, error) {
	buf := make([]byte, 8<<10)
	var names []string
	for {
		n, err := c.sys().getdents(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, err
		case n <= 0:
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// lstatAt stats name in the directory open as dirfd; a symlink is not
// followed.
func (c *fileCache) lstatAt(dirfd int, name string) (fileInfo, error) {
	var st unix.Stat_t
	if err := c.sys().fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileInfo{}, err
	}
	return infoOf(&st), nil
}
