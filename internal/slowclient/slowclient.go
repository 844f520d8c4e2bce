// Package slowclient dials the way a client that reads slowly, or not at
// all, does: with a small receive buffer, so that the server's sends stall
// early. The backend tests, scripts/soak and scripts/stall use it.
package slowclient

import (
	"net"
	"syscall"
	"time"
)

// RcvBuf is the receive buffer asked for (the kernel doubles it for its
// bookkeeping and rounds it up to its minimum).
const RcvBuf = 4096

// Dial connects to addr over TCP with an RcvBuf-byte receive buffer, set
// before the connect so that the window never grows past it.
func Dial(addr string) (net.Conn, error) { return DialRcvBuf(addr, RcvBuf) }

// DialRcvBuf is Dial with a receive buffer of rcvbuf bytes.
func DialRcvBuf(addr string, rcvbuf int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		}); err != nil {
			return err
		}
		return serr
	}}
	return d.Dial("tcp", addr)
}
