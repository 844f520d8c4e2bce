// Package fusetest mounts a loopback FUSE file system that a test can
// pause, to put a server's document root on a file system that hangs the
// way a dead NFS or sshfs mount does.
//
// Mount serves a directory at a new mount point from goroutines of the
// test's own process. Pause makes every request the FUSE daemon receives
// wait (LOOKUP, GETATTR, OPEN, READ, FLUSH, RELEASE, READDIR, STATX, ...),
// so the system call that sent it sleeps in the kernel as it would against
// a stopped daemon; Resume lets them all through, and Waiting tells how
// many are held, so a test can wait until one is known to be stuck. What
// the kernel answers from its own caches (dentries and attributes until
// their timeouts, see CacheFor; pages already read) never reaches the
// daemon and so is not held.
//
// A held request parks only the goroutine that serves it: the daemon
// starts another reader of /dev/fuse whenever its last one takes a
// request, so later requests are still received (and held), and the
// caller's thread sleeps in a system call, which the Go runtime works
// around as it does any blocking system call.
//
// The mount is removed when the test ends, paused or not, even when the
// test fails. It needs /dev/fuse and the right to mount (root, or a
// fusermount binary); without them, Mount skips the test and says why.
package fusetest
