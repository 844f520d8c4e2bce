package servertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Pooled is a keep-alive client as an HTTP client's connection pool
// keeps one (net/http's Transport, a balancer's pool): it reuses its
// connection until a response says Connection: close or the server
// closes it, and before reusing it looks whether the server closed it
// meanwhile (a FIN or RST waiting), and dials anew if so. A Pooled is
// used by one goroutine.
type Pooled struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
}

// NewPooled makes a Pooled client of the server at addr; it dials on its
// first Get.
func NewPooled(addr string) *Pooled { return &Pooled{addr: addr} }

// Outcome is what became of one request.
type Outcome struct {
	Status int
	Close  bool // the response said Connection: close
	Reused bool // sent on a connection that had answered before
	// Lost: the request was written, or its write failed, and no whole
	// response came back (EOF, RST, a timeout): what a client cannot
	// tell from a request the server acted on.
	Lost error
	// Refused: no connection could be made (the listeners are closed):
	// nothing was sent.
	Refused error
}

// Get sends GET target and reads the whole response.
func (p *Pooled) Get(target string) Outcome {
	if p.conn != nil && p.peerClosed() {
		p.Close()
	}
	reused := p.conn != nil
	if p.conn == nil {
		c, err := net.DialTimeout("tcp", p.addr, 2*time.Second)
		if err != nil {
			return Outcome{Refused: err}
		}
		p.conn, p.br = c, bufio.NewReader(c)
	}
	p.conn.SetDeadline(time.Now().Add(5 * time.Second))
	lost := func(err error) Outcome {
		p.Close()
		if reused {
			err = fmt.Errorf("on a reused connection: %w", err)
		} else {
			err = fmt.Errorf("on a new connection: %w", err)
		}
		return Outcome{Reused: reused, Lost: err}
	}
	if _, err := fmt.Fprintf(p.conn, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target); err != nil {
		return lost(fmt.Errorf("write: %w", err))
	}
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		return lost(fmt.Errorf("no response: %w", err))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return lost(fmt.Errorf("body cut short: %w", err))
	}
	o := Outcome{Status: resp.StatusCode, Close: resp.Close, Reused: reused}
	if resp.Close {
		p.Close()
	}
	return o
}

// WaitClosed waits, at most timeout, for the server to close the idle
// connection, and reports whether it did: EOF (or a RST) came, and no
// byte before it.
func (p *Pooled) WaitClosed(timeout time.Duration) bool {
	if p.conn == nil {
		return true
	}
	p.conn.SetReadDeadline(time.Now().Add(timeout))
	_, err := p.br.ReadByte()
	closed := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	if closed {
		p.Close()
	}
	return closed
}

// Close drops the connection, if any.
func (p *Pooled) Close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn, p.br = nil, nil
	}
}

// peerClosed looks, without waiting, whether the server closed the
// connection: a FIN (a read of 0) or an error waits in the socket. Bytes
// waiting (none are expected between responses) count as closed too: the
// connection cannot be reused.
func (p *Pooled) peerClosed() bool {
	if p.br.Buffered() > 0 {
		return true
	}
	rc, err := p.conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return true
	}
	var n int
	var perr error
	var b [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		n, _, perr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true
	}
	return perr != unix.EAGAIN || n > 0
}
