package servertest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// ProxyV1 is the PROXY protocol v1 line a balancer sends for a client at
// src that connected to dst (HAProxy's send-proxy).
func ProxyV1(src, dst netip.AddrPort) []byte {
	fam := "TCP4"
	if src.Addr().Is6() {
		fam = "TCP6"
	}
	return fmt.Appendf(nil, "PROXY %s %s %s %d %d\r\n", fam, src.Addr(), dst.Addr(), src.Port(), dst.Port())
}

// ProxyV2 is the PROXY protocol v2 header of a PROXY command from src to
// dst over TCP (HAProxy's send-proxy-v2); both of one family.
func ProxyV2(src, dst netip.AddrPort) []byte {
	fam := byte(0x11) // TCP over IPv4
	if src.Addr().Is6() {
		fam = 0x21 // TCP over IPv6
	}
	a := append(src.Addr().AsSlice(), dst.Addr().AsSlice()...)
	a = binary.BigEndian.AppendUint16(a, src.Port())
	a = binary.BigEndian.AppendUint16(a, dst.Port())
	return proxyV2(0x21, fam, a)
}

// ProxyV2Local is the v2 header of a LOCAL command: the balancer speaks
// for itself (its health checks), and the connection keeps its address.
func ProxyV2Local() []byte { return proxyV2(0x20, 0, nil) }

func proxyV2(verCmd, fam byte, rest []byte) []byte {
	b := append([]byte("\r\n\r\n\x00\r\nQUIT\n"), verCmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(len(rest)))
	return append(b, rest...)
}
