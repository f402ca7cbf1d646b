// Package netguard is the SSRF rule of HTTP targets: which addresses an
// event may be sent to. The master applies it to address literals in a
// target URL when a schedule is saved; the HTTP deliverer applies it to every
// resolved address before it dials. Both build their Guard from the same
// allow and deny lists, so a target refused at delivery is refused on save.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrRefused is wrapped by the errors of CheckHost.
var ErrRefused = errors.New("refused address")

// DefaultDeny returns the prefixes refused unless an allow list holds a more
// specific (or equal) prefix. They are addresses no tenant webhook should
// ever reach from a scheduler host: link-local ranges, where cloud metadata
// services answer with instance credentials, and the metadata addresses that
// live elsewhere. Loopback and private ranges are not here: self-hosted
// consumers usually sit on them. A multi-tenant deployment denies them.
//
// It is a function, not a variable, so that no caller can change the rule of
// every Guard in the process.
func DefaultDeny() []netip.Prefix {
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
		// Local-use NAT64 (RFC 8215): where the IPv4 address it carries sits
		// depends on the operator's prefix length, so it cannot be judged;
		// a deployment behind such a translator allows it.
		netip.MustParsePrefix("64:ff9b:1::/48"),
	}
}

// Guard decides which addresses may be dialled. The most specific matching
// prefix wins (as in a routing table), so the allow list can open a hole in
// a denied range (allow 127.0.0.1/32 inside a denied 127.0.0.0/8) and the
// deny list can close one inside an allowed range. On equal prefixes deny
// wins. Addresses no prefix matches are allowed. A Guard is immutable and
// safe for concurrent use.
type Guard struct {
	rules []rule
}

type rule struct {
	prefix netip.Prefix
	allow  bool
}

// New returns the Guard of DefaultDeny plus deny, with allow on top.
// Prefixes are masked (10.9.9.9/8 is 10.0.0.0/8); the caller validates them.
func New(allow, deny []netip.Prefix) *Guard {
	g := &Guard{}
	for _, p := range DefaultDeny() {
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

// Allowed reports whether addr may be dialled. IPv4-mapped IPv6 addresses
// (::ffff:169.254.169.254) are judged as the IPv4 address they reach. An
// IPv6 address of a transition mechanism that embeds an IPv4 address
// (NAT64, 6to4, Teredo, IPv4-compatible, IPv4-translated; see
// EmbeddedIPv4; the local-use NAT64 prefix is in DefaultDeny) is allowed only if it is itself allowed, each address it
// embeds is allowed too, and none of those is a special-purpose IPv4
// address (loopback, private, link-local and the others of
// specialIPv4): a translator or relay would reach such an address from
// its own network, which no allow list here describes.
func (g *Guard) Allowed(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	if !g.allowed(addr) {
		return false
	}
	for _, v4 := range EmbeddedIPv4(addr) {
		if isSpecialIPv4(v4) || !g.allowed(v4) {
			return false
		}
	}
	return true
}

func (g *Guard) allowed(addr netip.Addr) bool {
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

// Prefixes of the IPv6 transition mechanisms that carry an IPv4 address.
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052
	sixToFour      = netip.MustParsePrefix("2002::/16")       // RFC 3056: bits 16-47
	teredo         = netip.MustParsePrefix("2001::/32")       // RFC 4380: server in bits 32-63, client inverted in bits 96-127
	ipv4Compatible = netip.MustParsePrefix("::/96")           // RFC 4291, deprecated
	ipv4Translated = netip.MustParsePrefix("::ffff:0:0:0/96") // RFC 2765 (SIIT)
)

// EmbeddedIPv4 returns the IPv4 addresses an IPv6 address of a transition
// mechanism carries: the NAT64 well-known prefix 64:ff9b::/96, 6to4
// 2002::/16, Teredo 2001::/32 (server and client), IPv4-compatible
// ::/96 (but :: and ::1) and IPv4-translated ::ffff:0:0:0/96. IPv4-mapped
// addresses are not among them: Unmap gives their IPv4 address. None for
// any other address.
func EmbeddedIPv4(addr netip.Addr) []netip.Addr {
	addr = addr.WithZone("")
	if !addr.Is6() || addr.Is4In6() {
		return nil
	}
	b := addr.As16()
	v4 := func(p []byte) netip.Addr { return netip.AddrFrom4([4]byte(p)) }
	switch {
	case nat64WellKnown.Contains(addr), ipv4Translated.Contains(addr):
		return []netip.Addr{v4(b[12:16])}
	case sixToFour.Contains(addr):
		return []netip.Addr{v4(b[2:6])}
	case teredo.Contains(addr):
		return []netip.Addr{v4(b[4:8]), v4([]byte{^b[12], ^b[13], ^b[14], ^b[15]})}
	case ipv4Compatible.Contains(addr) && addr != netip.IPv6Unspecified() && addr != netip.IPv6Loopback():
		return []netip.Addr{v4(b[12:16])}
	}
	return nil
}

// specialIPv4 are the IPv4 special-purpose ranges (RFC 6890 and the IANA
// registry) that are not global: reached through a transition mechanism,
// each is an address of the translator's or relay's own network.
var specialIPv4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

func isSpecialIPv4(a netip.Addr) bool {
	for _, p := range specialIPv4 {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckHost refuses a URL host (as url.URL.Hostname returns it, without
// brackets) that is an address literal the Guard does not allow; the error
// wraps ErrRefused. Host names pass: only their resolved addresses can be
// judged, at dial time.
func (g *Guard) CheckHost(host string) error {
	addr, ok := ParseHost(host)
	if !ok || g.Allowed(addr) {
		return nil
	}
	a := addr.Unmap().WithZone("")
	if g.allowed(a) {
		for _, v4 := range EmbeddedIPv4(a) {
			if isSpecialIPv4(v4) || !g.allowed(v4) {
				return fmt.Errorf("host %s carries the IPv4 address %s, a %w", host, v4, ErrRefused)
			}
		}
	}
	if a.String() != host {
		return fmt.Errorf("host %s is %s, a %w", host, a, ErrRefused)
	}
	return fmt.Errorf("host %s is a %w", host, ErrRefused)
}

// ParseHost returns the address a URL host denotes when it is an address
// literal, read the way resolvers read it: IPv6 as netip does (a zone
// allowed) and IPv4 as inet_aton(3) does, which getaddrinfo(3) applies
// before any DNS lookup. So 127.1, 2130706433, 0x7f000001 and 0177.0.0.1
// are all 127.0.0.1, which netip.ParseAddr and net.ParseIP do not accept.
// One trailing dot is ignored, as browsers' URL parsers do. ok is false for
// a host name.
func ParseHost(host string) (addr netip.Addr, ok bool) {
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		return a, err == nil
	}
	return ParseIPv4(strings.TrimSuffix(host, "."))
}

// ParseIPv4 parses s as inet_aton(3) does: one to four parts separated by
// dots, each decimal, octal (leading 0) or hexadecimal (leading 0x or 0X);
// the last part fills all the bytes the earlier parts left (a.b is a and a
// 24-bit b). Nothing else is accepted: no signs, spaces, empty parts or
// values too large for their bytes.
func ParseIPv4(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for {
		if n == len(parts) {
			return netip.Addr{}, false
		}
		part, rest, more := strings.Cut(s, ".")
		v, ok := parseUint32(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if !more {
			break
		}
		s = rest
	}
	// Every part but the last is one byte; the last fills the rest.
	for _, v := range parts[:n-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	var v uint64
	for _, p := range parts[:n-1] {
		v = v<<8 | p
	}
	v = v<<(8*(5-n)) | last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseUint32 reads one inet_aton part: 0x or 0X and at least one hex
// digit, or 0 and octal digits, or decimal digits not starting with 0. Any
// number of leading zeros is accepted; the value must fit in 32 bits.
func parseUint32(s string) (uint64, bool) {
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) >= 1 && s[0] == '0':
		base = 8
	}
	if s == "" {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d, ok := digit(s[i])
		if !ok || d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func digit(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}
