package blocking

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// A file on a mount that is not local (core.File.Local: FUSE, NFS) may
// hang, and a sendfile of a page it lacks would hold the one thread, and
// the connection's header already out, until the file system answered:
// past the write timeout, which would blame a client that was reading. So
// its body is read a part at a time by a helper goroutine into a buffer,
// while the thread waits for the helper as a wait for the file system
// (core.Conn.BodyWait), looking at the clock once a tick: the core closes
// the connection at --fs-timeout, as on the event loops. The helper reads
// from a duplicate of the file's descriptor, which it closes itself, so
// that one left reading on a hung mount never reads a descriptor the
// cache has closed and reused.

// partMax is the most of such a file read at once, as epoll's chunks.
const partMax = 256 << 10

// part is the body part a helper read: data[at:] is the file from off+at.
// Only the connection being served has one (one connection at a time).
type part struct {
	file *core.File // compared only; the Conn holds the reference
	off  int64
	at   int
	data []byte
}

// writePart sends the next bytes of o's body from a file that is not
// local, reading the part they are in first. It reports false when the
// connection is to be closed.
func (l *loop) writePart(fd int, c *core.Conn, o core.Out) bool {
	p := &l.part
	if p.file != o.File || p.off+int64(p.at) != o.Off || p.at == len(p.data) {
		if !l.readPart(c, o) {
			return false
		}
	}
	n, err := l.sys.WriteBlocking(fd, p.data[p.at:])
	l.tick()
	switch {
	case err == unix.EAGAIN && n <= 0:
		return l.waited(c)
	case err == unix.EINTR && n <= 0:
		return true
	case err != 0 && n <= 0:
		return false
	}
	p.at += n
	c.Sent(int64(n))
	return true
}

// readPart has a helper read the part of o's body from o.Off into l.part,
// and waits for it within the connection's timeouts (waited). It reports
// false when the connection is to be closed: the file system did not
// answer within --fs-timeout, or the file shrank.
func (l *loop) readPart(c *core.Conn, o core.Out) bool {
	dup, err := l.sys.Fcntl(o.File.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false
	}
	buf := make([]byte, min(o.N, partMax)) // the helper's until it is done
	done := make(chan int, 1)
	off := o.Off
	go func() {
		n := loops.ReadFull(dup, buf, off)
		unix.Close(dup) // uncounted: a helper's; a FUSE or NFS close may wait too (FLUSH), here, not on the thread
		done <- n
	}()
	l.part = part{}
	c.BodyWait()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case n := <-done:
			c.Waited()
			if n == 0 {
				return false // the promised length cannot be sent: only closing tells the client
			}
			l.part = part{file: o.File, off: off, data: buf[:n]}
			return true
		case <-t.C:
			l.tick()
			if !l.waited(c) {
				return false // the helper reads on, into its own buffer
			}
		}
	}
}
