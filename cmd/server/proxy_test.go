package main

import (
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestProxyFlags: --proxy-protocol and --proxy-from reach the core's
// Config; the default trusts loopback, as core.DefaultConfig does; a
// --proxy-from replaces it; an address is a network of one.
func TestProxyFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		proto bool
		from  []netip.Prefix
	}{
		{args: nil},
		{args: []string{"--proxy-protocol"}, proto: true, from: core.DefaultConfig.ProxyFrom},
		{args: []string{"--proxy-protocol", "--proxy-from", "10.0.0.0/8", "--proxy-from", "192.0.2.7", "--proxy-from", "fd00::1:2/64", "--proxy-from", "::ffff:198.51.100.0/120"},
			proto: true, from: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
				netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("198.51.100.0/24")}},
	} {
		var o options
		_, err := flags.NewParser(&o, flags.None).ParseArgs(tc.args)
		require.NoError(t, err, tc.args)
		require.NoError(t, o.check(), tc.args)
		cfg := o.config(io.Discard)
		assert.Equal(t, tc.proto, cfg.ProxyProtocol, tc.args)
		assert.Equal(t, tc.from, cfg.ProxyFrom, tc.args)
	}
	var o options
	_, err := flags.NewParser(&o, flags.None).ParseArgs(nil)
	require.NoError(t, err)
	require.NoError(t, o.check())
	assert.Equal(t, core.DefaultConfig.ProxyFrom, o.proxyFrom, "--help's default is the core's")
	assert.Zero(t, o.DrainDelay, "no drain delay unless asked: today's behaviour")
}

// TestProxyProtocolBinary: the binary with --proxy-protocol and -v logs
// the address a PROXY v2 header carries, and closes a connection
// without one.
func TestProxyProtocolBinary(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
	addr := "127.0.0.1:" + freePort(t)
	_, stdout, _ := server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--proxy-protocol", "-v")
	servertest.WaitAccepting(t, addr)
	c := servertest.Dial(t, addr)
	hdr := servertest.ProxyV2(netip.MustParseAddrPort("203.0.113.9:4242"), netip.MustParseAddrPort("198.51.100.1:80"))
	c.Write(append(hdr, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n"...))
	resp, body := c.ReadResponse("GET")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "hello\n", string(body))
	require.Eventually(t, func() bool {
		return strings.Contains(stdout.String(), `203.0.113.9 - - [`) && strings.Contains(stdout.String(), `"GET /index.html HTTP/1.1" 200 6`)
	}, 5*time.Second, 20*time.Millisecond, stdout.String())
	bare := servertest.Dial(t, addr)
	bare.Write([]byte("GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n"))
	assert.True(t, bare.Closed(), "no header: closed unserved")
}
