package httpdelivery

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrTargetRefused is wrapped by the error of a delivery whose target address
// the SSRF guard refuses. Such a result is Permanent.
var ErrTargetRefused = errors.New("httpdelivery: target address refused by the SSRF guard")

// DefaultDenyCIDRs returns the prefixes refused unless AllowCIDRs holds a
// more specific (or equal) prefix. They are addresses no tenant webhook should ever reach from
// a scheduler host: link-local ranges, where cloud metadata services answer
// with instance credentials, and the metadata addresses that live elsewhere.
// Loopback and private ranges are not here: self-hosted consumers usually sit
// on them. Deny them with Config.DenyCIDRs for a multi-tenant deployment.
//
// It is a function, not a variable, so that no caller can change the guard of
// every Deliverer in the process.
func DefaultDenyCIDRs() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local; AWS/GCP/Azure/OCI metadata at 169.254.169.254, ECS at 169.254.170.2
		netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
		netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS instance metadata over IPv6
		netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
		netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud (classic) metadata
		netip.MustParsePrefix("0.0.0.0/8"),          // "this host": Linux dials the local host, slipping past a denied 127.0.0.0/8
		netip.MustParsePrefix("::/128"),             // unspecified: same as 0.0.0.0
		netip.MustParsePrefix("224.0.0.0/4"),        // multicast
		netip.MustParsePrefix("ff00::/8"),           // IPv6 multicast
		netip.MustParsePrefix("255.255.255.255/32"), // broadcast
	}
}

// guard decides which resolved addresses may be dialled. The most specific
// matching prefix wins (as in a routing table), so AllowCIDRs can open a hole
// in a denied range (allow 127.0.0.1/32 inside a denied 127.0.0.0/8) and
// DenyCIDRs can close one inside an allowed range. On equal prefixes deny
// wins. Addresses no prefix matches are allowed.
type guard struct {
	rules []rule
}

type rule struct {
	prefix netip.Prefix
	allow  bool
}

func newGuard(allow, deny []netip.Prefix) *guard {
	g := &guard{}
	for _, p := range DefaultDenyCIDRs() {
		g.rules = append(g.rules, rule{prefix: p})
	}
	for _, p := range deny {
		g.rules = append(g.rules, rule{prefix: p.Masked()})
	}
	for _, p := range allow {
		g.rules = append(g.rules, rule{prefix: p.Masked(), allow: true})
	}
	return g
}

// allowed reports whether addr may be dialled. IPv4-mapped IPv6 addresses
// (::ffff:169.254.169.254) are judged as the IPv4 address they reach.
func (g *guard) allowed(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	best, allow := -1, true
	for _, r := range g.rules {
		if !r.prefix.Contains(addr) {
			continue
		}
		bits := r.prefix.Bits()
		if bits > best || (bits == best && !r.allow) {
			best, allow = bits, r.allow
		}
	}
	return allow
}

// control is the net.Dialer Control hook. It runs after name resolution and
// before connect(2), on the exact address about to be dialled, so a name
// that resolves to a refused address (DNS rebinding included) is refused no
// matter what it resolved to when the URL was checked.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse dial address %q", ErrTargetRefused, address)
	}
	if !g.allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrTargetRefused, ap.Addr())
	}
	return nil
}
