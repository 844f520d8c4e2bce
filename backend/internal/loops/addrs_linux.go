package loops

import (
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
)

// Addrs are the two ends of accepted socket fd (getpeername, getsockname)
// for Conn.Remote and Conn.Local, or zero values when srv does not want
// them (core.Server.WantsAddrs: only the access log and CGI do).
func Addrs(srv *core.Server, fd int) (remote, local netip.AddrPort) {
	if !srv.WantsAddrs() {
		return remote, local
	}
	if sa, err := unix.Getpeername(fd); err == nil {
		remote = listen.AddrPort(sa)
	}
	if sa, err := unix.Getsockname(fd); err == nil {
		local = listen.AddrPort(sa)
	}
	return remote, local
}
