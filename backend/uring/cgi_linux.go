package uring

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// A CGI script's output is read with IORING_OP_READ, one read at a time
// per connection, into a buffer of the loop's own (core/cgi.go says what
// a backend does with a script's pipe):
//
//	watch: Interest.Pipe changed → adopt it; PipeRead → queue a read
//	CQE res > 0  → Conn.FeedPipe(buf[:res])
//	CQE res <= 0 → Conn.PipeEOF(), which closes the pipe and may start the
//	               next pipelined script (maybe on the same fd number)
//
// The pipe is non-blocking (core makes it so for epoll). io_uring reads a
// pollable file by polling it when it is empty, O_NONBLOCK or not: on
// Linux 6.18 such a read waits rather than completing with -EAGAIN
// (TestPipeReadWaits). Should a kernel answer -EAGAIN all the same, the
// pipe is made blocking (the contract allows it) and read again, once;
// making every pipe blocking up front would cost an fcntl per script
// for nothing here.
//
// The loop never closes a pipe: closing a connection cancels its read in
// flight, and the slot is freed (core.Loop.FreeConn, which closes the
// pipe) only after the read's CQE.

// stdoutBufSize is one pipe read: a pipe's default capacity, as epoll's
// read buffer.
const stdoutBufSize = 64 << 10

// watchStdout queues a read of the Conn's pipe, which watch asks for
// while in.PipeRead and no read is in flight (watch's part for CGI). It
// reports false when it ended the script's answer: no memory for the
// read (502).
func (l *loop) watchStdout(cn *conn, in core.Interest) bool {
	// A pipe that changed was closed by PipeEOF (or never read): no read
	// of it is in flight. Its pages are not counted here: the scripts'
	// share of the pipe budget was set aside for as many as --cgi-max lets
	// run (splice_budget_linux.go).
	i, buf, err := l.stdoutBufs.get(l.sys)
	if err != nil {
		l.stdoutEnded(cn)
		return false
	}
	e := l.sqe()
	e.PrepareRead(in.Pipe, addrOf(buf), uint32(len(buf)), 0) // io_uring_prep_read(3)
	l.queue(e, opStdoutRead, cn)
	cn.armd |= armStdout
	cn.stdoutBuf = i
	return true
}

// onStdoutRead handles a pipe read's CQE; drive follows it.
func (l *loop) onStdoutRead(cn *conn, res int32, _ uint32) {
	buf := l.stdoutBufs.buf(cn.stdoutBuf)
	cn.armd &^= armStdout
	switch {
	case cn.life >= lifeClosing:
		// Cancelled, or done before the cancel: nobody wants the bytes.
	case res > 0:
		cn.c.FeedPipe(buf[:res]) // FeedPipe copies what it keeps
	case res == -int32(unix.EINTR):
	case res == -int32(unix.EAGAIN):
		// Not on Linux 6.18 (see above); a blocking read waits.
		if err := l.sys.SetBlocking(cn.c.Interest().Pipe); err != nil {
			l.stdoutEnded(cn)
		}
	default: // end of file, or an error
		l.stdoutEnded(cn)
	}
	l.stdoutBufs.put(cn.stdoutBuf)
	cn.stdoutBuf = -1
}

// stdoutEnded ends the script's answer; PipeEOF closes the pipe.
func (l *loop) stdoutEnded(cn *conn) {
	cn.c.PipeEOF()
}

// stdoutBufs are the buffers pipe reads go into: mmap'd (the kernel writes
// into one after the SQE is submitted, until its CQE), stdoutBufSize bytes
// each, made on demand and kept for reuse. One is in use per read in
// flight, so at most one per connection that runs a script.
type stdoutBufs struct {
	mem  [][]byte
	free []int32
}

func (p *stdoutBufs) get(sys loops.Sys) (int32, []byte, error) {
	if n := len(p.free); n > 0 {
		i := p.free[n-1]
		p.free = p.free[:n-1]
		return i, p.mem[i], nil
	}
	b, err := sys.Mmap(stdoutBufSize)
	if err != nil {
		return -1, nil, os.NewSyscallError("mmap", err)
	}
	p.mem = append(p.mem, b)
	return int32(len(p.mem) - 1), b, nil
}

func (p *stdoutBufs) buf(i int32) []byte { return p.mem[i] }
func (p *stdoutBufs) put(i int32)        { p.free = append(p.free, i) }

// close unmaps the buffers; no read may be in flight.
func (p *stdoutBufs) close(sys loops.Sys) {
	for _, b := range p.mem {
		sys.Munmap(b)
	}
	p.mem, p.free = nil, nil
}
