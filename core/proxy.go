package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
)

// The PROXY protocol (HAProxy's proxy-protocol.txt, versions 1 and 2): a
// balancer that relays a TCP connection writes, before anything of the
// client's, one header saying whom the connection is from. With
// Config.ProxyProtocol every connection starts in stateProxy, and its
// first bytes go to ParseProxy instead of ParseRequest; once the header is
// whole, the address it carries becomes Conn.Remote and what follows it
// is parsed as requests. A connection from outside Config.ProxyFrom, or
// whose header is malformed, truncated or late, is closed before it is
// served (Stats.Proxy counts why): serving it would log, and pass to CGI,
// an address nobody vouched for.
//
// Like ParseRequest, ParseProxy keeps no state between calls: the Conn
// calls it again from the start of its buffer as bytes arrive, and a
// prefix that can never become a header is refused at once.

// ProxyHeader is what a PROXY header says.
type ProxyHeader struct {
	// Local: keep the connection's own addresses. A v2 LOCAL command (the
	// balancer's own health check), v1's UNKNOWN, v2's UNSPEC family and
	// a client on a UNIX socket carry no client address to use.
	Local bool
	Src   netip.AddrPort // the client, unless Local
	Dst   netip.AddrPort // the address the client connected to, unless Local
}

// The errors ParseProxy returns besides ErrNeedMore, shared so that a
// refusal allocates nothing. Every one closes the connection.
var (
	errProxySignature = errors.New("proxy: no PROXY protocol signature")
	errProxyV1        = errors.New("proxy: malformed v1 header")
	errProxyV1Long    = errors.New("proxy: v1 header longer than 107 bytes")
	errProxyV2        = errors.New("proxy: malformed v2 header")
	errProxyV2Long    = errors.New("proxy: v2 header longer than proxyV2Max")
	errProxyV2Family  = errors.New("proxy: v2 address family not a stream one")
)

const (
	proxyV1Prefix = "PROXY "
	// proxyV1Max is the longest v1 line, CRLF included (spec 2.1).
	proxyV1Max = 107
	// proxyV2Sig starts every v2 header (spec 2.2); then one byte of
	// version and command, one of family and protocol, two of length.
	proxyV2Sig = "\r\n\r\n\x00\r\nQUIT\n"
	// proxyV2Max is the longest v2 header taken, TLVs included: HAProxy
	// itself refuses one longer than its buffer (bufsize, 16 KiB by
	// default), and it bounds what a connection buffers before it is
	// served.
	proxyV2Max = 16 << 10
)

// ParseProxy parses a PROXY header, v1 or v2, at the start of b. It
// returns n, the header's length, and what it says; ErrNeedMore when b is
// a valid but incomplete prefix of one; another error as soon as the
// bytes so far cannot start a header.
func ParseProxy(b []byte) (n int, h ProxyHeader, err error) {
	if len(b) == 0 {
		return 0, h, ErrNeedMore
	}
	if b[0] == proxyV2Sig[0] {
		return parseProxyV2(b)
	}
	return parseProxyV1(b)
}

// parseProxyV1 parses "PROXY TCP4 SRC DST SPORT DPORT\r\n" (or TCP6, or
// UNKNOWN and anything up to the CRLF), fields one space apart.
func parseProxyV1(b []byte) (n int, h ProxyHeader, err error) {
	if !bytes.HasPrefix(b, []byte(proxyV1Prefix)[:min(len(b), len(proxyV1Prefix))]) {
		return 0, h, errProxySignature
	}
	line := b[:min(len(b), proxyV1Max)]
	end := bytes.IndexByte(line, '\n')
	if end < 0 {
		if bytes.IndexByte(line, '\r') >= 0 && line[len(line)-1] != '\r' {
			return 0, h, errProxyV1 // a CR not followed by LF
		}
		if len(line) == proxyV1Max {
			return 0, h, errProxyV1Long
		}
		return 0, h, ErrNeedMore
	}
	if end == 0 || line[end-1] != '\r' || bytes.IndexByte(line[:end-1], '\r') >= 0 {
		return 0, h, errProxyV1
	}
	n = end + 1
	rest := line[len(proxyV1Prefix) : end-1]
	proto, rest, _ := bytes.Cut(rest, []byte(" "))
	var want4 bool
	switch string(proto) {
	case "UNKNOWN":
		// The sender could not tell; the receiver ignores the rest of
		// the line and keeps the connection's own addresses.
		return n, ProxyHeader{Local: true}, nil
	case "TCP4":
		want4 = true
	case "TCP6":
	default:
		return 0, h, errProxyV1
	}
	var f [4][]byte
	for i := range f {
		var ok bool
		f[i], rest, ok = bytes.Cut(rest, []byte(" "))
		if ok != (i < len(f)-1) {
			return 0, h, errProxyV1 // too few fields, or too many
		}
	}
	src, ok1 := proxyV1Addr(f[0], want4)
	dst, ok2 := proxyV1Addr(f[1], want4)
	sport, ok3 := proxyV1Port(f[2])
	dport, ok4 := proxyV1Port(f[3])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, h, errProxyV1
	}
	return n, ProxyHeader{Src: netip.AddrPortFrom(src, sport), Dst: netip.AddrPortFrom(dst, dport)}, nil
}

// proxyV1Addr parses a v1 address: dotted IPv4 for TCP4, IPv6 without a
// zone for TCP6.
func proxyV1Addr(b []byte, want4 bool) (netip.Addr, bool) {
	if len(b) == 0 || len(b) > len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255") {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(string(b))
	if err != nil || a.Zone() != "" || a.Is4() != want4 {
		return netip.Addr{}, false
	}
	return a, true
}

// proxyV1Port parses a decimal port, 0 to 65535.
func proxyV1Port(b []byte) (uint16, bool) {
	v, ok := parseDigits(b)
	return uint16(v), ok && v <= 0xffff
}

// parseProxyV2 parses the binary header: the signature, version 2 and a
// command (LOCAL or PROXY), the family, the length of what follows, the
// addresses, then TLVs, which are skipped.
func parseProxyV2(b []byte) (n int, h ProxyHeader, err error) {
	if !bytes.HasPrefix(b, []byte(proxyV2Sig)[:min(len(b), len(proxyV2Sig))]) {
		return 0, h, errProxySignature
	}
	if len(b) > 12 && b[12] != 0x20 && b[12] != 0x21 {
		return 0, h, errProxyV2 // version 2; command LOCAL (0) or PROXY (1)
	}
	if len(b) < 16 {
		return 0, h, ErrNeedMore
	}
	n = 16 + int(binary.BigEndian.Uint16(b[14:16]))
	if n > proxyV2Max {
		return 0, h, errProxyV2Long
	}
	if len(b) < n {
		return 0, h, ErrNeedMore
	}
	if b[12] == 0x20 {
		// LOCAL: the balancer speaks for itself (a health check); the
		// family and what follows are ignored.
		return n, ProxyHeader{Local: true}, nil
	}
	a := b[16:n]
	switch b[13] {
	case 0x11: // TCP over IPv4
		if len(a) < 12 {
			return 0, h, errProxyV2
		}
		h.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[0:4])), binary.BigEndian.Uint16(a[8:10]))
		h.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[10:12]))
	case 0x21: // TCP over IPv6
		if len(a) < 36 {
			return 0, h, errProxyV2
		}
		h.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[0:16])), binary.BigEndian.Uint16(a[32:34]))
		h.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[16:32])), binary.BigEndian.Uint16(a[34:36]))
	case 0x00, 0x31:
		// UNSPEC, or a client on a UNIX socket: no address to use; the
		// spec lets the receiver keep the connection's own.
		h.Local = true
	default:
		return 0, h, errProxyV2Family // UDP, or a family with no meaning
	}
	return n, h, nil
}

// ProxyResult is what became of a connection's PROXY header (Stats.Proxy).
type ProxyResult uint8

const (
	ProxyTaken     ProxyResult = iota // whole and well-formed: the connection is served
	ProxyUntrusted                    // the peer is outside Config.ProxyFrom: closed at accept
	ProxyMalformed                    // not a header, or a broken one: closed
	ProxyTruncated                    // the peer closed before the header was whole
	ProxyTimeout                      // not whole within Config.HeaderTimeout: closed
	NumProxyResults
)

var proxyResultNames = [NumProxyResults]string{
	ProxyTaken: "taken", ProxyUntrusted: "untrusted", ProxyMalformed: "malformed",
	ProxyTruncated: "truncated", ProxyTimeout: "timeout",
}

func (r ProxyResult) String() string { return proxyResultNames[r] }

// proxyTrusted reports whether peer may send a PROXY header.
func (s *Server) proxyTrusted(peer netip.AddrPort) bool {
	a := peer.Addr().Unmap()
	for _, p := range s.Config.ProxyFrom {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// startProxy puts a new connection where it waits for its PROXY header,
// or closes it at once when its peer may not send one.
func (c *Conn) startProxy() {
	c.state = stateProxy // its initial state, as reading is without the header
	if !c.l.srv.proxyTrusted(c.Remote) {
		c.proxyRefuse(ProxyUntrusted)
	}
}

// proxyRefuse closes the connection unserved, counting why: without a
// header it can trust, it has no address to serve it under.
func (c *Conn) proxyRefuse(r ProxyResult) {
	c.l.Stats.Proxy[r]++
	c.in = c.in[:0]
	c.to(stateClosing)
	c.endWith(endAbort)
}

// feedProxy is Feed in stateProxy: p is more of the header, and maybe the
// first requests after it, in the same segment.
func (c *Conn) feedProxy(p []byte) {
	buf, fromIn := p, len(c.in) > 0
	if fromIn {
		c.in = append(c.in, p...)
		buf = c.in
	}
	n, h, err := ParseProxy(buf)
	switch {
	case err == ErrNeedMore:
		if !fromIn {
			c.in = append(c.in, p...)
		}
		return
	case err != nil:
		c.proxyRefuse(ProxyMalformed)
		return
	}
	c.l.Stats.Proxy[ProxyTaken]++
	if !h.Local {
		c.Remote = h.Src
	}
	c.to(stateReading)
	rest := buf[n:]
	if !fromIn {
		if len(rest) > 0 {
			c.parse(rest, false)
		}
		return
	}
	c.in = c.in[:copy(c.in, rest)]
	if len(c.in) > 0 {
		c.headStart = c.l.now
		c.parse(c.in, true)
	}
}

// proxyEOF is EOF in stateProxy: the peer closed before its header was
// whole. One that sent nothing at all (a balancer's TCP check) is a
// close like any other, not counted.
func (c *Conn) proxyEOF() {
	if len(c.in) > 0 {
		c.l.Stats.Proxy[ProxyTruncated]++
		c.in = c.in[:0]
	}
	c.to(stateClosing)
}
