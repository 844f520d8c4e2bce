package core

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the file system calls of the core: opening the document
// root, and a load's opens, stats and reads (load.go), made through its
// fileSys (sys_linux.go). A cache hit makes none.

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
	mnt   uint64 // the mount ID (STATX_MNT_ID): whether a loop may call into it (mounts_linux.go)
}

func (fi *fileInfo) isDir() bool     { return fi.mode&unix.S_IFMT == unix.S_IFDIR }
func (fi *fileInfo) isReg() bool     { return fi.mode&unix.S_IFMT == unix.S_IFREG }
func (fi *fileInfo) isSymlink() bool { return fi.mode&unix.S_IFMT == unix.S_IFLNK }
func (fi *fileInfo) same(o *fileInfo) bool {
	return fi.ino == o.ino && fi.dev == o.dev && fi.size == o.size && fi.mtime.Equal(o.mtime) && fi.mode == o.mode
}

// errSpecial: the path names a FIFO, a device or a socket, which is
// never served (403) and never opened for I/O.
var errSpecial = errors.New("not a regular file or directory")

// errChanged: the file was replaced between the look at its type and its
// open (the two stats disagree).
var errChanged = errors.New("file replaced while being opened")

// errShrank: the file ended before the size its stat gave, while its
// body was read: it was truncated or replaced meanwhile, which is
// answered as errChanged is.
var errShrank = fmt.Errorf("file shrank while being read: %w", errChanged)

// how is the open_how of every open beneath the root. RESOLVE_BENEATH
// makes the kernel refuse any path, symlink or ".." that would leave the
// root (EXDEV); O_NONBLOCK and O_NOCTTY are belt and braces, since no
// special file gets this far (openBeneath). openat2 refuses them with
// O_PATH (EINVAL), which opens nothing for I/O anyway.
func (ld *loader) how(flags uint64) unix.OpenHow {
	how := unix.OpenHow{
		Flags:   flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&unix.O_PATH == 0 {
		how.Flags |= unix.O_NONBLOCK | unix.O_NOCTTY
	}
	if ld.cfg.FollowSymlinks {
		// The path itself was cleaned and cannot climb with "..": only
		// symlinks may lead out, and here the operator allows it.
		how.Resolve = unix.RESOLVE_NO_MAGICLINKS
	}
	return how
}

// openBeneath opens name below the root: a regular file for reading, a
// directory as O_PATH (enough to find index.html or to redirect;
// openDir opens it for a listing). Its type is found before anything is
// opened for reading, so that a FIFO, a device or a socket is never
// opened for I/O (errSpecial): an O_PATH open, with the same resolve
// flags, and a statx of that fd. A regular file is then opened again by
// name and stat'ed: a file swapped in between (another inode) is closed
// unread (errChanged). What a rename in that window can make the second
// open reach is a FIFO (O_NONBLOCK: the open does not wait) or a device
// node (O_NOCTTY), which is closed without a read or write.
func (ld *loader) openBeneath(name string) (int, fileInfo, error) {
	if name == "" {
		name = "."
	}
	how := ld.how(unix.O_PATH)
	pfd, err := ld.fs.openat2(ld.root, name, &how)
	if err != nil {
		return -1, fileInfo{}, err
	}
	fi, err := ld.fstat(pfd)
	switch {
	case err != nil:
	case fi.isDir():
		return pfd, fi, nil
	case !fi.isReg():
		err = errSpecial
	}
	if err != nil {
		ld.fs.close(pfd)
		return -1, fileInfo{}, err
	}
	how = ld.how(unix.O_RDONLY)
	fd, err := ld.fs.openat2(ld.root, name, &how)
	ld.fs.close(pfd)
	if err != nil {
		return -1, fileInfo{}, err
	}
	got, err := ld.fstat(fd)
	if err == nil && (got.ino != fi.ino || got.dev != fi.dev || !got.isReg()) {
		err = errChanged
	}
	if err != nil {
		ld.fs.close(fd)
		return -1, fileInfo{}, err
	}
	return fd, got, nil
}

// openDir opens for reading the directory open as pfd (O_PATH): "."
// beneath it is that very directory, whatever was renamed since.
func (ld *loader) openDir(pfd int) (int, error) {
	how := ld.how(unix.O_RDONLY | unix.O_DIRECTORY)
	return ld.fs.openat2(pfd, ".", &how)
}

func (ld *loader) fstat(fd int) (fileInfo, error) {
	var st unix.Statx_t
	if err := ld.fs.statx(fd, "", unix.AT_EMPTY_PATH, &st); err != nil {
		return fileInfo{}, err
	}
	return statxInfo(&st), nil
}

// statBeneath re-stats name to see whether a cached entry is still
// current: a stat by path, as nginx's open_file_cache_valid check; it
// opens nothing, and what it finds is compared with what the open found.
func (ld *loader) statBeneath(name string) (fileInfo, error) {
	if name == "" {
		name = "."
	}
	var st unix.Statx_t
	if err := ld.fs.statx(ld.root, name, 0, &st); err != nil {
		return fileInfo{}, err
	}
	return statxInfo(&st), nil
}

// readBody reads f's body, size bytes from the start of fd, into memory.
// A body larger than copyBodyMax is sent from that memory by reference
// (Conn.segs), and a completion-based backend hands its address to the
// kernel, which reads it after the call returns: so it is mapped outside
// the Go heap (an anonymous mmap, unmapped when f's last reference goes),
// which the DESIGN rule on kernel-read memory asks. A smaller body is
// always copied into out with its header, and stays on the heap, where it
// does not round up to a page.
func (ld *loader) readBody(f *File, fd int, size int64) error {
	var buf []byte
	if size > copyBodyMax {
		b, err := ld.fs.mmap(int(size))
		if err != nil {
			return err
		}
		buf = b
	} else {
		buf = make([]byte, size)
	}
	for off := 0; off < len(buf); {
		n, err := ld.fs.pread(fd, buf[off:], int64(off))
		if err == nil && n == 0 {
			err = errShrank
		}
		if err != nil {
			if size > copyBodyMax {
				ld.fs.munmap(buf)
			}
			return err
		}
		off += n
	}
	f.body, f.mapped = buf, size > copyBodyMax
	return nil
}

// openStatus maps an open error to the status nginx would give.
func openStatus(err error) int {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENAMETOOLONG):
		return 404
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		// EXDEV: the path or a symlink in it leads outside the root.
		return 403
	case errors.Is(err, errSpecial):
		return 403 // FIFOs, devices and sockets are never served
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM),
		errors.Is(err, unix.EAGAIN), errors.Is(err, errChanged):
		return 503
	case errors.Is(err, unix.ECANCELED):
		// The loop whose ring made the call is closing (io_uring's
		// FileCalls): nobody is waiting for the answer any more.
		return 503
	case errors.Is(err, unix.ENOTCONN), errors.Is(err, unix.ETIMEDOUT), errors.Is(err, unix.EINTR):
		// A network or FUSE file system that is gone (its daemon died
		// or its connection was aborted: ENOTCONN), a soft NFS mount's
		// timeout, or a wait a signal cut short that a FileCalls did
		// not retry: the file may be there again later, as with
		// --fs-timeout.
		return 503
	}
	return 500
}

// logged tells whether a load that failed with err, answered status, goes
// to the error log (errlog.go): every 500, and a 503 that the file system
// or the process's limits caused, not a timeout, a file replaced or a call
// cancelled as its loop closed.
func logged(err error, status int) bool {
	return status == 500 || status == 503 && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, errChanged) && !errors.Is(err, unix.ECANCELED)
}

// dirNames lists the directory open as fd, without "." and "..": at
// most max names, and more reports that there were others.
func (ld *loader) dirNames(fd, max int) (names []string, more bool, err error) {
	buf := make([]byte, 8<<10)
	for {
		n, err := ld.fs.getdents(fd, buf)
		switch {
		case err != nil:
			return nil, false, err
		case n <= 0:
			return names, false, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		if len(names) > max {
			return names[:max], true, nil
		}
	}
}

// lstatAt stats name in the directory open as dirfd; a symlink is not
// followed.
func (ld *loader) lstatAt(dirfd int, name string) (fileInfo, error) {
	var st unix.Statx_t
	if err := ld.fs.statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, &st); err != nil {
		return fileInfo{}, err
	}
	return statxInfo(&st), nil
}
