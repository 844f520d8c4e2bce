package epoll

import (
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
)

// corkSends is sends for the --epoll-cork ablation: a header whose body
// follows goes out under TCP_CORK, set before it and cleared by the
// response's last send, instead of with MSG_MORE (results/STUDY.md,
// "TCP_CORK against MSG_MORE").
type corkSends struct{ sys loops.Sys }

func (s corkSends) bytes(cn *conn, p []byte, more bool) (int, unix.Errno) {
	s.cork(cn, more)
	n, errno := s.sys.Write(cn.fd, p)
	s.uncorkAfter(cn, !more)
	return n, errno
}

func (s corkSends) vec(cn *conn, iov []unix.Iovec, more bool) (int, unix.Errno) {
	s.cork(cn, more)
	n, errno := s.sys.Writev(cn.fd, iov, false) // the cork holds the bytes, not MSG_MORE
	s.uncorkAfter(cn, !more)
	return n, errno
}

func (s corkSends) bodySent(cn *conn, last bool) { s.uncorkAfter(cn, last) }

// cork sets TCP_CORK when more of the response follows and the cork is
// not set yet.
func (s corkSends) cork(cn *conn, more bool) {
	if more && !cn.corked {
		s.sys.Cork(cn.fd, true)
		cn.corked = true
	}
}

// uncorkAfter clears TCP_CORK once the response's last byte is sent
// (done): the kernel then sends what it held back.
func (s corkSends) uncorkAfter(cn *conn, done bool) {
	if done && cn.corked {
		s.sys.Cork(cn.fd, false)
		cn.corked = false
	}
}
