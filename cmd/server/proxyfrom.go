package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// parseProxyFrom reads each --proxy-from as a CIDR or a single address,
// as nginx's set_real_ip_from takes them. An IPv4-mapped IPv6 network is
// taken as the IPv4 one it maps: the core compares peers unmapped.
func parseProxyFrom(args []string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, a := range args {
		a = strings.TrimSpace(a)
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, aerr := netip.ParseAddr(a)
			if aerr != nil || addr.Zone() != "" {
				return nil, fmt.Errorf("--proxy-from %q: give a network (10.0.0.0/8, fd00::/8) or an address (10.0.0.5)", a)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}
