package backend_test

// The PROXY protocol (--proxy-protocol) on every backend, over real
// sockets: the header's address reaches the access log and CGI, and a
// connection whose header cannot be trusted is closed unserved.

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// requireLogged waits for the access log (written once a second) to have
// a line for path from addr.
func requireLogged(t *testing.T, log *servertest.Buffer, addr, path string) {
	t.Helper()
	want := addr + ` - - [`
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.HasPrefix(line, want) && strings.Contains(line, `"GET `+path+` HTTP/1.1"`) {
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "no log line for %s from %s in:\n%s", path, addr, log)
}

// requireProxyCount waits for the published Stats.Proxy[r] to be n.
func requireProxyCount(t *testing.T, srv *servertest.Server, r core.ProxyResult, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return srv.Core.Stats().Proxy[r] == n }, 5*time.Second, 20*time.Millisecond,
		"proxy %v: %v", r, srv.Core.Stats().Proxy)
}

var (
	proxyClient4 = netip.MustParseAddrPort("203.0.113.7:51000")
	proxyFront4  = netip.MustParseAddrPort("198.51.100.1:443")
	proxyClient6 = netip.MustParseAddrPort("[2001:db8::7]:51001")
	proxyFront6  = netip.MustParseAddrPort("[2001:db8::1]:443")
)

func TestProxyProtocol(t *testing.T) {
	log := &servertest.Buffer{}
	eachBackend(t, core.Config{ProxyProtocol: true, AccessLog: log}, func(t *testing.T, s *site, srv *servertest.Server) {
		var logged [][2]string // address and path, checked once the log is written
		for i, tc := range []struct {
			name   string
			header []byte
			addr   string // in the log
		}{
			{name: "v1 tcp4", header: servertest.ProxyV1(proxyClient4, proxyFront4), addr: "203.0.113.7"},
			{name: "v1 tcp6", header: servertest.ProxyV1(proxyClient6, proxyFront6), addr: "2001:db8::7"},
			{name: "v2 tcp4", header: servertest.ProxyV2(proxyClient4, proxyFront4), addr: "203.0.113.7"},
			{name: "v2 tcp6", header: servertest.ProxyV2(proxyClient6, proxyFront6), addr: "2001:db8::7"},
			{name: "v2 local", header: servertest.ProxyV2Local(), addr: "127.0.0.1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := servertest.Dial(t, srv.Addr)
				// The header and the first request in one segment; a
				// second request on the same connection.
				first := fmt.Sprintf("/index.html?%s-%d-first", srv.Addr, i)
				_, err := c.Write(append(tc.header, "GET "+first+" HTTP/1.1\r\nHost: t\r\n\r\n"...))
				require.NoError(t, err)
				resp, body := c.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
				assert.Equal(t, s.index, body)
				second := fmt.Sprintf("/style.css?%s-%d-second", srv.Addr, i)
				resp, _ = c.Get(second)
				assert.Equal(t, 200, resp.StatusCode)
				logged = append(logged, [2]string{tc.addr, first}, [2]string{tc.addr, second})
			})
		}
		t.Run("byte by byte", func(t *testing.T) {
			c := servertest.Dial(t, srv.Addr)
			path := fmt.Sprintf("/index.html?%s-bytes", srv.Addr)
			in := append(servertest.ProxyV2(proxyClient4, proxyFront4), "GET "+path+" HTTP/1.1\r\nHost: t\r\n\r\n"...)
			for i := range in {
				_, err := c.Write(in[i : i+1])
				require.NoError(t, err)
				time.Sleep(time.Millisecond)
			}
			resp, body := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode)
			assert.Equal(t, s.index, body)
			logged = append(logged, [2]string{"203.0.113.7", path})
		})
		for _, l := range logged {
			requireLogged(t, log, l[0], l[1])
		}
		requireProxyCount(t, srv, core.ProxyTaken, 6)
	})
}

// TestProxyProtocolRefused: a peer outside --proxy-from, a malformed
// header, no header at all, one cut short: each connection is closed
// without an answer, and counted.
func TestProxyProtocolRefused(t *testing.T) {
	get := "GET / HTTP/1.1\r\nHost: t\r\n\r\n"
	t.Run("untrusted", func(t *testing.T) {
		cfg := core.Config{ProxyProtocol: true, ProxyFrom: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
		eachBackend(t, cfg, func(t *testing.T, s *site, srv *servertest.Server) {
			c := servertest.Dial(t, srv.Addr)
			c.Write(append(servertest.ProxyV2(proxyClient4, proxyFront4), get...))
			assert.True(t, c.Closed(), "closed without an answer")
			// servertest.Start's dial to see the server accept was one.
			requireProxyCount(t, srv, core.ProxyUntrusted, 2)
			assert.Zero(t, srv.Core.Stats().Requests)
		})
	})
	eachBackendTimed(t, core.Config{ProxyProtocol: true, HeaderTimeout: time.Second}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, in := range []string{
			"PROXY TCP4 203.0.113.7 198.51.100.1 51000 99999\r\n" + get,
			"PROXY TCP4 203.0.113.7 198.51.100.1 51000 443\n" + get,
			string(servertest.ProxyV2(proxyClient4, proxyFront4)[:13]) + "\x31" + get,
			get,
		} {
			c := servertest.Dial(t, srv.Addr)
			c.Write([]byte(in))
			assert.True(t, c.Closed(), "%q: closed without an answer", in)
		}
		requireProxyCount(t, srv, core.ProxyMalformed, 4)

		cut := servertest.Dial(t, srv.Addr)
		cut.Write(servertest.ProxyV2(proxyClient4, proxyFront4)[:20])
		cut.Conn.(*net.TCPConn).CloseWrite()
		assert.True(t, cut.Closed())
		requireProxyCount(t, srv, core.ProxyTruncated, 1)

		slow := servertest.Dial(t, srv.Addr)
		slow.Write([]byte("PROXY TCP4 "))
		slow.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := slow.R.ReadByte()
		assert.Error(t, err, "closed at the header timeout")
		requireProxyCount(t, srv, core.ProxyTimeout, 1)
		assert.Zero(t, srv.Core.Stats().Requests)
	})
}

// TestProxyProtocolCGI: a script sees the client's address and port from
// the header in REMOTE_ADDR and REMOTE_PORT.
func TestProxyProtocolCGI(t *testing.T) {
	dir := servertest.Scripts(t, map[string]string{
		"addr": textHead + "printf '%s %s' \"$REMOTE_ADDR\" \"$REMOTE_PORT\"\n",
	})
	eachBackend(t, core.Config{ProxyProtocol: true, CGIDir: dir}, func(t *testing.T, s *site, srv *servertest.Server) {
		for _, tc := range []struct {
			header []byte
			want   string
		}{
			{header: servertest.ProxyV2(proxyClient4, proxyFront4), want: "203.0.113.7 51000"},
			{header: servertest.ProxyV1(proxyClient6, proxyFront6), want: "2001:db8::7 51001"},
		} {
			c := servertest.Dial(t, srv.Addr)
			c.Write(append(tc.header, "GET /cgi-bin/addr HTTP/1.1\r\nHost: t\r\n\r\n"...))
			resp, body := c.ReadResponse("GET")
			require.Equal(t, 200, resp.StatusCode, string(body))
			assert.Equal(t, tc.want, string(body))
		}
	})
}
