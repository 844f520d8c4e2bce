package core

// Interest is what a connection waits for: the events its backend watches
// once Next has nothing more to do now (Backend contract). Next is the
// action, Interest the wait; both change only in calls into the Conn, so a
// backend asks again after each one and brings its registrations in line
// (epoll: epoll_ctl; io_uring: arm or cancel a recv and a pipe read) in
// one function, instead of tracking the Conn's state itself.
//
// Read holds unless the peer sent EOF or InBufMax bytes wait unparsed; a
// connection that is to close reads on regardless (Feed drops the bytes),
// so that no input is left unread when its socket closes. The rest, by
// state (Conn.state):
//
//	reading    nothing more
//	body       Write while a 100 Continue, or an answer given before the
//	           body, is queued; Pipe and PipeRead when the body is a
//	           script's stdin
//	running    Pipe; PipeRead while less than OutBufMax is unsent; Write
//	           while any is; Reset after EOF
//	file       Write while answers queued before the waiting request are
//	           unsent; Read even with a close asked (a script's body may
//	           follow), up to InBufMax
//	writing    Write; Pipe, unread, when a script's deadline cut its answer
//	lingering  Read even after EOF, which Next turns into ActClose
//	closing    nothing more; Pipe, unread, until FreeConn closes it
//	proxy      nothing more
type Interest struct {
	Read  bool // bytes from the socket are wanted (Feed, EOF)
	Write bool // Out has bytes to send now: Next says ActWrite
	// Pipe is the read end of a script's stdout, non-blocking
	// and close-on-exec, or -1. The backend never closes it; after
	// PipeEOF, a Pipe is a new pipe, maybe with the same fd number.
	Pipe     int
	PipeRead bool // the script's output is wanted now (FeedPipe, PipeEOF)
	// Reset: the peer sent EOF while a script answers. The backend
	// watches the socket for a reset (POLLERR), which says the peer is
	// gone rather than half-closed, and then closes the connection, which
	// kills the script (Conn.cgiPeerEOF). epoll always reports EPOLLERR;
	// io_uring arms a poll for it.
	Reset bool
}

// Interest says what the backend watches for this connection now (see
// Interest). It is WantRead, Next() == ActWrite, Pipe and WantPipe in one.
func (c *Conn) Interest() Interest {
	in := Interest{Read: c.WantRead(), Write: c.Next() == ActWrite, Pipe: -1}
	if c.cgi != nil {
		in.Pipe, in.PipeRead = c.cgi.pipe, c.WantPipe()
		in.Reset = c.eof && c.cgi.job != nil
	}
	return in
}
