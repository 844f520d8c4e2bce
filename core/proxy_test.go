package core

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// proxyV2 builds a v2 header: command (0 LOCAL, 1 PROXY), family byte,
// and the address block with any TLVs.
func proxyV2(cmd, fam byte, addrs []byte) []byte {
	b := append([]byte(proxyV2Sig), 0x20|cmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(addrs)))
	return append(b, addrs...)
}

// proxyV2TCP4 is a v2 PROXY header from src to dst over TCP and IPv4.
func proxyV2TCP4(src, dst netip.AddrPort) []byte {
	a := append(src.Addr().AsSlice(), dst.Addr().AsSlice()...)
	a = binary.BigEndian.AppendUint16(a, src.Port())
	a = binary.BigEndian.AppendUint16(a, dst.Port())
	return proxyV2(1, 0x11, a)
}

var (
	client4 = netip.MustParseAddrPort("203.0.113.7:51000")
	front4  = netip.MustParseAddrPort("198.51.100.1:443")
	client6 = netip.MustParseAddrPort("[2001:db8::7]:51000")
	front6  = netip.MustParseAddrPort("[2001:db8::1]:443")
)

var proxyCases = []struct {
	name string
	in   string
	n    int // the header's length; 0 with err
	h    ProxyHeader
	err  error
}{
	{name: "v1 tcp4", in: "PROXY TCP4 203.0.113.7 198.51.100.1 51000 443\r\nGET", n: 47, h: ProxyHeader{Src: client4, Dst: front4}},
	{name: "v1 tcp6", in: "PROXY TCP6 2001:db8::7 2001:db8::1 51000 443\r\n", n: 46, h: ProxyHeader{Src: client6, Dst: front6}},
	{name: "v1 unknown", in: "PROXY UNKNOWN\r\n", n: 15, h: ProxyHeader{Local: true}},
	{name: "v1 unknown with addresses", in: "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n", n: 59, h: ProxyHeader{Local: true}},
	{name: "v1 port 0 and 65535", in: "PROXY TCP4 1.2.3.4 5.6.7.8 0 65535\r\n", n: 36,
		h: ProxyHeader{Src: netip.MustParseAddrPort("1.2.3.4:0"), Dst: netip.MustParseAddrPort("5.6.7.8:65535")}},
	{name: "v1 incomplete", in: "PROXY TCP4 203.0.113.7 198.51", err: ErrNeedMore},
	{name: "v1 incomplete at CR", in: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r", err: ErrNeedMore},
	{name: "empty", in: "", err: ErrNeedMore},
	{name: "a request, no header", in: "GET / HTTP/1.1\r\n", err: errProxySignature},
	{name: "v1 lower case", in: "proxy TCP4", err: errProxySignature},
	{name: "v1 no space", in: "PROXYTCP4", err: errProxySignature},
	{name: "v1 tcp4 with v6", in: "PROXY TCP4 2001:db8::7 2001:db8::1 1 2\r\n", err: errProxyV1},
	{name: "v1 tcp6 with v4", in: "PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", err: errProxyV1},
	{name: "v1 zone", in: "PROXY TCP6 fe80::1%eth0 fe80::2 1 2\r\n", err: errProxyV1},
	{name: "v1 port too big", in: "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", err: errProxyV1},
	{name: "v1 port sign", in: "PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n", err: errProxyV1},
	{name: "v1 two spaces", in: "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", err: errProxyV1},
	{name: "v1 too few fields", in: "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", err: errProxyV1},
	{name: "v1 too many fields", in: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", err: errProxyV1},
	{name: "v1 trailing space", in: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", err: errProxyV1},
	{name: "v1 bare LF", in: "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", err: errProxyV1},
	{name: "v1 bare CR", in: "PROXY TCP4 1.2.3.4\r5.6.7.8", err: errProxyV1},
	{name: "v1 leading zero in address", in: "PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", err: errProxyV1},
	{name: "v1 udp", in: "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", err: errProxyV1},
	{name: "v1 no CRLF in 107 bytes", in: "PROXY UNKNOWN " + strings.Repeat("x", 100), err: errProxyV1Long},
	{name: "v1 106 bytes, no CRLF yet", in: "PROXY UNKNOWN " + strings.Repeat("x", 92), err: ErrNeedMore},
	{name: "v1 107 bytes", in: "PROXY UNKNOWN " + strings.Repeat("x", 91) + "\r\n", n: 107, h: ProxyHeader{Local: true}},

	{name: "v2 tcp4", in: string(proxyV2TCP4(client4, front4)) + "GET", n: 28, h: ProxyHeader{Src: client4, Dst: front4}},
	{name: "v2 tcp6", in: string(proxyV2(1, 0x21, append(append(append(client6.Addr().AsSlice(), front6.Addr().AsSlice()...), 0xc7, 0x38), 0x01, 0xbb))), n: 52,
		h: ProxyHeader{Src: client6, Dst: front6}},
	{name: "v2 tcp4 with TLVs", in: string(proxyV2(1, 0x11, append(proxyV2TCP4(client4, front4)[16:], 0x04, 0, 3, 'a', 'b', 'c'))), n: 34,
		h: ProxyHeader{Src: client4, Dst: front4}},
	{name: "v2 local", in: string(proxyV2(0, 0x00, nil)), n: 16, h: ProxyHeader{Local: true}},
	{name: "v2 local with addresses", in: string(proxyV2(0, 0x11, proxyV2TCP4(client4, front4)[16:])), n: 28, h: ProxyHeader{Local: true}},
	{name: "v2 unspec", in: string(proxyV2(1, 0x00, nil)), n: 16, h: ProxyHeader{Local: true}},
	{name: "v2 unix stream", in: string(proxyV2(1, 0x31, make([]byte, 216))), n: 232, h: ProxyHeader{Local: true}},
	{name: "v2 udp4", in: string(proxyV2(1, 0x12, make([]byte, 12))), err: errProxyV2Family},
	{name: "v2 tcp4 short", in: string(proxyV2(1, 0x11, make([]byte, 11))), err: errProxyV2},
	{name: "v2 tcp6 short", in: string(proxyV2(1, 0x21, make([]byte, 12))), err: errProxyV2},
	{name: "v2 version 1", in: proxyV2Sig + "\x11\x11\x00\x0c", err: errProxyV2},
	{name: "v2 command 2", in: proxyV2Sig + "\x22", err: errProxyV2},
	{name: "v2 too long", in: proxyV2Sig + "\x21\x11\x40\x00", err: errProxyV2Long},
	{name: "v2 incomplete signature", in: proxyV2Sig[:5], err: ErrNeedMore},
	{name: "v2 bad signature", in: "\r\n\r\nX", err: errProxySignature},
	{name: "v2 incomplete addresses", in: string(proxyV2TCP4(client4, front4)[:20]), err: ErrNeedMore},
}

func TestParseProxy(t *testing.T) {
	for _, tc := range proxyCases {
		t.Run(tc.name, func(t *testing.T) {
			n, h, err := ParseProxy([]byte(tc.in))
			require.Equal(t, tc.err, err)
			assert.Equal(t, tc.n, n)
			if err == nil {
				assert.Equal(t, tc.h, h)
			}
		})
	}
}

// TestParseProxyPrefixes: every proper prefix of a header needs more, and
// a refusal is made at the first byte that shows it, whatever follows.
func TestParseProxyPrefixes(t *testing.T) {
	for _, tc := range proxyCases {
		in := []byte(tc.in)
		whole, _, err := ParseProxy(in)
		if err == nil {
			for i := range whole {
				_, _, perr := ParseProxy(in[:i])
				require.Equal(t, ErrNeedMore, perr, "%s: prefix of %d bytes", tc.name, i)
			}
		}
		if err != nil && err != ErrNeedMore {
			_, _, xerr := ParseProxy(append(in[:len(in):len(in)], "\r\n\r\n"...))
			require.Equal(t, err, xerr, "%s: refused, then accepted with more bytes", tc.name)
		}
	}
}

// FuzzParseProxy: whatever the bytes, the answer for b is the answer for
// its first n bytes and any bytes after them; every prefix of a header is
// a need for more; a refusal stays one as bytes are added; and it never
// panics. make fuzz runs it; its seeds run with the tests.
func FuzzParseProxy(f *testing.F) {
	for _, tc := range proxyCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		n, h, err := ParseProxy(in)
		switch {
		case err == nil:
			require.Positive(t, n)
			require.LessOrEqual(t, n, len(in))
			require.True(t, h.Local || h.Src.IsValid() && h.Dst.IsValid(), "%+v", h)
			n2, h2, err2 := ParseProxy(in[:n])
			require.NoError(t, err2)
			require.Equal(t, n, n2)
			require.Equal(t, h, h2)
			for _, i := range []int{0, n / 2, n - 1} {
				_, _, perr := ParseProxy(in[:i])
				require.Equal(t, ErrNeedMore, perr, "prefix of %d of %d bytes", i, n)
			}
		case err == ErrNeedMore:
			require.Zero(t, n)
			require.Less(t, len(in), proxyV2Max)
		default:
			require.Zero(t, n)
			_, _, xerr := ParseProxy(append(in[:len(in):len(in)], 'x'))
			require.Equal(t, err, xerr, "refused, then accepted with one byte more")
		}
	})
}

// proxyLoop is a test loop expecting PROXY headers, with an access log
// (whose lines the tests read in the loop's buffer, Loop.logBuf).
func proxyLoop(t *testing.T, cfg Config) *Loop {
	t.Helper()
	cfg.ProxyProtocol, cfg.AccessLog = true, io.Discard
	l, _ := newTestLoop(t, cfg)
	return l
}

var balancer = netip.MustParseAddrPort("127.0.0.1:40000")

func TestConnProxy(t *testing.T) {
	const get = "GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"
	for _, tc := range []struct {
		name   string
		peer   netip.AddrPort
		feeds  []string // what arrives, in as many reads
		remote netip.AddrPort
		status string // the response's status line; "" none: closed unserved
		result ProxyResult
	}{
		{name: "v1, request in the same read", peer: balancer, feeds: []string{"PROXY TCP4 203.0.113.7 198.51.100.1 51000 443\r\n" + get},
			remote: client4, status: "HTTP/1.1 200 OK", result: ProxyTaken},
		{name: "v2, then the request", peer: balancer, feeds: []string{string(proxyV2TCP4(client4, front4)), get},
			remote: client4, status: "HTTP/1.1 200 OK", result: ProxyTaken},
		{name: "v2 local keeps the peer", peer: balancer, feeds: []string{string(proxyV2(0, 0, nil)) + get},
			remote: balancer, status: "HTTP/1.1 200 OK", result: ProxyTaken},
		{name: "header split, request whole after it", peer: balancer,
			feeds:  []string{"PROXY TCP6 2001:db8::7 ", "2001:db8::1 51000 443\r", "\n" + get[:10], get[10:]},
			remote: client6, status: "HTTP/1.1 200 OK", result: ProxyTaken},
		{name: "v4-mapped peer is loopback", peer: netip.MustParseAddrPort("[::ffff:127.0.0.1]:40000"), feeds: []string{string(proxyV2TCP4(client4, front4)) + get},
			remote: client4, status: "HTTP/1.1 200 OK", result: ProxyTaken},
		{name: "untrusted peer", peer: netip.MustParseAddrPort("192.0.2.9:40000"), feeds: []string{string(proxyV2TCP4(client4, front4)) + get},
			result: ProxyUntrusted},
		{name: "no header", peer: balancer, feeds: []string{get}, result: ProxyMalformed},
		{name: "malformed after a good start", peer: balancer, feeds: []string{"PROXY TCP4 1.2.3.4", " 5.6.7.8 1 99999\r\n" + get}, result: ProxyMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := proxyLoop(t, Config{})
			c := l.NewConn(tc.peer)
			for _, p := range tc.feeds {
				if c.state == stateClosing {
					break
				}
				c.Feed([]byte(p))
			}
			mem, _ := drain(c)
			assert.Equal(t, uint64(1), l.Stats.Proxy[tc.result], "%v", l.Stats.Proxy)
			if tc.status == "" {
				assert.Empty(t, mem)
				assert.Equal(t, ActClose, c.Next(), "closed at once, unserved, no linger")
				return
			}
			assert.True(t, bytes.HasPrefix(mem, []byte(tc.status+"\r\n")), string(mem))
			assert.Equal(t, tc.remote, c.Remote)
			assert.Equal(t, ActRead, c.Next(), "kept alive")
			assert.True(t, strings.HasPrefix(string(l.logBuf), tc.remote.Addr().String()+" - - ["), string(l.logBuf))
		})
	}
}

// TestConnProxyByteByByte: the header and the request after it, a byte
// per read, are served as if they had come whole.
func TestConnProxyByteByByte(t *testing.T) {
	for _, hdr := range [][]byte{[]byte("PROXY TCP4 203.0.113.7 198.51.100.1 51000 443\r\n"), proxyV2TCP4(client4, front4)} {
		l := proxyLoop(t, Config{})
		c := l.NewConn(balancer)
		in := append(hdr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"...)
		for i := range in {
			require.Equal(t, ActRead, c.Next(), "after %d bytes", i)
			c.Feed(in[i : i+1])
		}
		mem, _ := drain(c)
		assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 200 OK\r\n")), string(mem))
		assert.Equal(t, client4, c.Remote)
		assert.Equal(t, uint64(1), l.Stats.Proxy[ProxyTaken])
	}
}

func TestConnProxyTimeoutAndEOF(t *testing.T) {
	l := proxyLoop(t, Config{HeaderTimeout: 10 * time.Second})
	start := time.Now()
	l.Tick(start)
	partial := l.NewConn(balancer)
	partial.Feed([]byte("PROXY TCP4 "))
	silent := l.NewConn(balancer)
	l.Tick(start.Add(5 * time.Second))
	assert.Equal(t, ActNone, partial.CheckTimeout())
	assert.Equal(t, ActNone, silent.CheckTimeout())
	l.Tick(start.Add(11 * time.Second))
	assert.Equal(t, ActClose, partial.CheckTimeout(), "not whole within the header timeout")
	assert.Equal(t, ActClose, silent.CheckTimeout())
	assert.Equal(t, uint64(2), l.Stats.Proxy[ProxyTimeout])

	cut := l.NewConn(balancer)
	cut.Feed(proxyV2TCP4(client4, front4)[:20])
	cut.EOF()
	assert.Equal(t, ActClose, cut.Next())
	check := l.NewConn(balancer)
	check.EOF() // a TCP check: connect, close
	assert.Equal(t, ActClose, check.Next())
	assert.Equal(t, uint64(1), l.Stats.Proxy[ProxyTruncated], "only the one that sent part of a header")
	assert.Contains(t, l.Stats.String(), "proxy_truncated=1 proxy_timeout=2")
}

// TestConnProxyOffCostsNothing: without ProxyProtocol, a PROXY header is
// an ordinary bad request, and the hit path allocates nothing.
func TestConnProxyOff(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(balancer)
	require.Equal(t, stateReading, c.state)
	c.Feed([]byte("PROXY TCP4 203.0.113.7 198.51.100.1 51000 443\r\n"))
	mem, _ := drain(c)
	assert.True(t, bytes.HasPrefix(mem, []byte("HTTP/1.1 400 ")), string(mem))
	assert.Equal(t, [NumProxyResults]uint64{}, l.Stats.Proxy)
}
