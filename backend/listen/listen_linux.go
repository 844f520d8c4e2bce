// Package listen opens the listening sockets that the backends share: one
// per address per loop (a few with Options.DeferAccept: PendingPerLoop),
// all bound with SO_REUSEPORT so that the kernel spreads new connections
// over the loops without any lock in user space.
package listen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

// Backlog is the accept queue length asked for: the most listen(2)
// takes, so that the kernel's cap, net.core.somaxconn, is the backlog
// (raising it makes the queues longer, and PerAddress's listeners fewer).
const Backlog = 65535

// Options are how the listeners are made.
type Options struct {
	// Takeover shares the port of a running server (see Open).
	Takeover bool
	// DeferAccept sets TCP_DEFER_ACCEPT (the server's default;
	// --no-defer-accept clears it): accept4 returns a connection only once
	// its first bytes have arrived, so the loop reads the request at once
	// instead of waiting a round for EPOLLIN, and a Connection: close
	// request is served without the connection ever joining the epoll set.
	// With wrk -c50 Connection: close on one epoll loop it saves a good
	// part of the server's CPU per request
	// (results/2026-12-01_defer-accept). Each loop then gets several
	// listeners per address (PendingPerLoop says why).
	DeferAccept bool
	// OneEach: one listener per loop and address even with DeferAccept.
	// The blocking backend takes one connection at a time, so more
	// listeners hold nothing for it and would cost it a ppoll per accept.
	OneEach bool
}

// Open binds o.PerAddress() listening sockets per address for each of
// loops loops. An address with port 0 gets an ephemeral port on the first
// socket and the same port on the others. On error every socket opened so
// far is closed.
//
// SO_REUSEPORT would let Open bind next to any server of the same user
// that already listens on the port, and the kernel would then split new
// connections between the two. So unless o.Takeover is set, Open first
// binds each address once without SO_REUSEPORT, which fails with
// EADDRINUSE when any socket has the port, and refuses. Takeover (the
// server's --takeover) skips that probe to share the port on purpose: the
// new listeners join the running server's SO_REUSEPORT group (the kernel
// allows it to a process of the same effective user only).
func Open(addrs []string, loops int, o Options) (*core.Listeners, error) {
	ls := &core.Listeners{FDs: make([][]int, loops), Deferred: o.DeferAccept}
	bound := make([]netip.AddrPort, len(addrs))
	for i, a := range addrs {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			Close(ls)
			return nil, fmt.Errorf("listen address %q: %v (use host:port, e.g. 0.0.0.0:8080 or [::]:8080)", a, err)
		}
		bound[i] = ap
	}
	for _, ap := range bound {
		if o.Takeover {
			break
		}
		if err := probe(ap); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", ap, explain(err))
		}
	}
	per := o.PerAddress()
	for loop := range loops {
		for i := range bound {
			for range per {
				fd, ap, err := listenOne(bound[i], o.DeferAccept)
				if err != nil {
					Close(ls)
					return nil, fmt.Errorf("listen on %s: %w", bound[i], explain(err))
				}
				bound[i] = ap
				ls.FDs[loop] = append(ls.FDs[loop], fd)
			}
		}
	}
	for _, ap := range bound {
		ls.Addrs = append(ls.Addrs, net.TCPAddrFromAddrPort(ap))
	}
	return ls, nil
}

// PendingPerLoop is how many connections each loop can hold whose
// handshake is done and whose first bytes have not come, with
// Options.DeferAccept. Such a connection waits in its listener's SYN queue,
// which holds the backlog (net.core.somaxconn, 4096 by default); beyond
// it the kernel answers with SYN cookies, and a cookie's MSS is at most
// 1448 (the largest in its table, less the timestamps). wrk -c10000 opens
// every connection before it writes to any: with one listener about half
// of them got that MSS, and the server sent several times nginx's
// segments per GiB (results/2026-12-01_defer-accept). So a
// loop gets as many listeners per address as it takes to hold
// PendingPerLoop; they are in the same SO_REUSEPORT group, the kernel
// spreads the handshakes over them, and the loop accepts from all.
const PendingPerLoop = 16384

// PerAddress is how many listeners each loop gets per address.
func (o Options) PerAddress() int {
	if o.DeferAccept && !o.OneEach {
		return deferredSockets(somaxconn())
	}
	return 1
}

// maxDeferredSockets bounds the listeners per loop and address.
const maxDeferredSockets = 8

// deferredSockets is how many listeners per loop and address hold
// PendingPerLoop waiting connections, the backlog being min(Backlog,
// somaxconn).
func deferredSockets(somaxconn int) int {
	backlog := max(min(Backlog, somaxconn), 1)
	return min((PendingPerLoop+backlog-1)/backlog, maxDeferredSockets)
}

// somaxconn reads net.core.somaxconn, or assumes 4096 (the kernel's
// default since 5.4) when it cannot.
func somaxconn() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		return 4096
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 4096
	}
	return n
}

// Close closes every socket in ls.
func Close(ls *core.Listeners) {
	for _, fds := range ls.FDs {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

func explain(err error) error {
	switch {
	case errors.Is(err, unix.EADDRINUSE):
		return fmt.Errorf("%w (another process has this port: stop it, choose another --port, or to replace a running twinloop without downtime start with --takeover)", err)
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w (ports below 1024 need root or CAP_NET_BIND_SERVICE: choose --port 1024 or above)", err)
	case errors.Is(err, unix.EADDRNOTAVAIL), errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("%w (this machine has no such address: check --listen)", err)
	}
	return err
}

// probe binds ap once without SO_REUSEPORT, and closes the socket: the
// bind fails with EADDRINUSE when another socket, SO_REUSEPORT or not,
// has the port. Port 0 is always free.
func probe(ap netip.AddrPort) error {
	if ap.Port() == 0 {
		return nil
	}
	fd, err := socketFor(ap, false)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

func listenOne(ap netip.AddrPort, deferAccept bool) (int, netip.AddrPort, error) {
	fd, err := socketFor(ap, true)
	if err != nil {
		return -1, ap, err
	}
	fail := func(call string, err error) (int, netip.AddrPort, error) {
		unix.Close(fd)
		return -1, ap, os.NewSyscallError(call, err)
	}
	// Accepted sockets inherit TCP_NODELAY from the listener, which saves a
	// setsockopt per connection. A response is one write (or a header with
	// MSG_MORE then sendfile), so Nagle has nothing to merge.
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fail("setsockopt TCP_NODELAY", err)
	}
	if deferAccept {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 1); err != nil {
			return fail("setsockopt TCP_DEFER_ACCEPT", err)
		}
	}
	if err := unix.Listen(fd, Backlog); err != nil {
		return fail("listen", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	return fd, netip.AddrPortFrom(ap.Addr(), uint16(portOf(got))), nil
}

// socketFor makes a non-blocking TCP socket for ap and binds it, with SO_REUSEADDR,
// and SO_REUSEPORT when reusePort is set.
func socketFor(ap netip.AddrPort, reusePort bool) (int, error) {
	family := unix.AF_INET
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	fail := func(call string, err error) (int, error) {
		unix.Close(fd)
		return -1, os.NewSyscallError(call, err)
	}
	// SO_REUSEADDR lets a restarted server bind while connections of the
	// last one are in TIME_WAIT; it never allows binding over a listener.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt SO_REUSEADDR", err)
	}
	if reusePort {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("setsockopt SO_REUSEPORT", err)
		}
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET6 {
		// [::] serves IPv6 only; IPv4 gets its own socket, as nginx does
		// with ipv6only=on.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return fail("setsockopt IPV6_V6ONLY", err)
		}
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().Unmap().As4()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	return fd, nil
}

func portOf(sa unix.Sockaddr) int {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port
	case *unix.SockaddrInet6:
		return a.Port
	}
	return 0
}

// AddrPort converts an accepted peer's sockaddr.
func AddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// NoIPv6 reports whether err says the machine has no IPv6 to listen on.
func NoIPv6(err error) bool {
	return errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL)
}

// migrateReqPath is the sysctl that makes the kernel move the connections
// queued on a closing SO_REUSEPORT listener to another listener of its
// group, instead of resetting them (Linux 5.14).
const migrateReqPath = "/proc/sys/net/ipv4/tcp_migrate_req"

// MigrateReqOff returns, when net.ipv4.tcp_migrate_req is not 1 (or
// cannot be read: a kernel before 5.14), one line for the operator that
// says what it costs and what to set; "" when it is on.
func MigrateReqOff() string {
	b, err := os.ReadFile(migrateReqPath)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot read %s (%v; Linux 5.14 or later has it): when the old server stops, connections still queued on its listeners are reset", migrateReqPath, errors.Unwrap(err))
	case strings.TrimSpace(string(b)) != "1":
		return "net.ipv4.tcp_migrate_req is 0: when a server sharing a port with --takeover stops, connections still queued on its listeners are reset instead of moved to the other server (set it: sysctl -w net.ipv4.tcp_migrate_req=1, and in /etc/sysctl.d/ to keep it)"
	}
	return ""
}
