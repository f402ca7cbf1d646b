package netguard

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	private  = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fc00::/7"),
	}
)

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		name, host string
		want       string // "" : not an address literal
	}{
		{"DottedQuad", "127.0.0.1", "127.0.0.1"},
		{"TwoParts", "127.1", "127.0.0.1"},
		{"TwoPartsLast24Bits", "10.65536", "10.1.0.0"},
		{"ThreeParts", "192.168.257", "192.168.1.1"},
		{"ThreePartsLast16Bits", "10.0.65535", "10.0.255.255"},
		{"Decimal32Bits", "2130706433", "127.0.0.1"},
		{"DecimalMetadata", "2852039166", "169.254.169.254"},
		{"Hex32Bits", "0x7f000001", "127.0.0.1"},
		{"HexUpperPrefix", "0X7F000001", "127.0.0.1"},
		{"HexParts", "0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
		{"OctalFirstPart", "0177.0.0.1", "127.0.0.1"},
		{"OctalLeadingZeros", "000177.0.0.01", "127.0.0.1"},
		{"OctalWhole", "017700000001", "127.0.0.1"},
		{"MixedBases", "0x7f.0.1", "127.0.0.1"},
		{"Zero", "0", "0.0.0.0"},
		{"ZeroQuad", "0.0.0.0", "0.0.0.0"},
		{"Max", "4294967295", "255.255.255.255"},
		{"TrailingDot", "127.0.0.1.", "127.0.0.1"},
		{"IPv6Loopback", "::1", "::1"},
		{"IPv6Mapped", "::ffff:127.0.0.1", "::ffff:127.0.0.1"},
		{"IPv6MappedHex", "::ffff:7f00:1", "::ffff:127.0.0.1"},
		{"IPv6Zone", "fe80::1%eth0", "fe80::1%eth0"},
		{"IPv6Unspecified", "::", "::"},

		{"Name", "example.com", ""},
		{"Localhost", "localhost", ""},
		{"NumericLabelsThenName", "127.0.0.1.example.com", ""},
		{"Empty", "", ""},
		{"OnlyDot", ".", ""},
		{"TwoTrailingDots", "127.0.0.1..", ""},
		{"LeadingDot", ".127.0.0.1", ""},
		{"EmptyPart", "127..1", ""},
		{"FiveParts", "1.2.3.4.5", ""},
		{"PartOver255", "256.0.0.1", ""},
		{"FirstPartOver255TwoParts", "256.1", ""},
		{"LastOf2Over24Bits", "1.16777216", ""},
		{"LastOf3Over16Bits", "1.1.65536", ""},
		{"Over32Bits", "4294967296", ""},
		{"HexOver32Bits", "0x100000000", ""},
		{"HexNoDigits", "0x", ""},
		{"HexBadDigit", "0x7g", ""},
		{"OctalBadDigit", "08", ""},
		{"OctalBadDigit9", "0179.0.0.1", ""},
		{"DoublePrefix", "00x7f", ""},
		{"Sign", "+127.0.0.1", ""},
		{"Minus", "-1", ""},
		{"Space", "127.0.0.1 ", ""},
		{"Underscore", "127_0.0.1", ""},
		{"BinaryPrefix", "0b1", ""},
		{"GoOctalPrefix", "0o177.0.0.1", ""},
		{"IPv6Garbage", "::g", ""},
		{"IPv6MappedShorthand", "::ffff:127.1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseHost(tc.host)
			if tc.want == "" {
				if ok {
					t.Fatalf("ParseHost(%q) = %s, want no address", tc.host, got)
				}
				return
			}
			if want := netip.MustParseAddr(tc.want); !ok || got != want {
				t.Fatalf("ParseHost(%q) = %s, %v; want %s", tc.host, got, ok, want)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name        string
		allow, deny []netip.Prefix
		addr        string
		want        bool
	}{
		{"PublicAllowed", nil, nil, "93.184.216.34", true},
		{"LoopbackAllowed", nil, nil, "127.0.0.1", true},
		{"PrivateAllowed", nil, nil, "10.1.2.3", true},
		{"PrivateIPv6Allowed", nil, nil, "fd12::1", true},
		{"Private172Allowed", nil, nil, "172.16.5.5", true},
		{"Private192Allowed", nil, nil, "192.168.1.1", true},
		{"MetadataRefused", nil, nil, "169.254.169.254", false},
		{"MappedMetadataRefused", nil, nil, "::ffff:169.254.169.254", false},
		{"AWSIPv6MetadataRefused", nil, nil, "fd00:ec2::254", false},
		{"AlibabaMetadataRefused", nil, nil, "100.100.100.200", false},
		{"CGNATNeighbourAllowed", nil, nil, "100.100.100.201", true},
		{"LinkLocalV6Refused", nil, nil, "fe80::1", false},
		{"LinkLocalV6WithZoneRefused", nil, nil, "fe80::1%eth0", false},
		{"ThisHostRefused", nil, nil, "0.0.0.0", false},
		{"UnspecifiedV6Refused", nil, nil, "::", false},
		{"DenyPrivate", nil, []netip.Prefix{p("10.0.0.0/8")}, "10.1.2.3", false},
		{"AllowMoreSpecificWins", []netip.Prefix{p("10.1.0.0/16")}, []netip.Prefix{p("10.0.0.0/8")}, "10.1.2.3", true},
		{"DenyMoreSpecificWins", []netip.Prefix{p("10.0.0.0/8")}, []netip.Prefix{p("10.1.0.0/16")}, "10.1.2.3", false},
		{"DenyWinsTie", []netip.Prefix{p("10.0.0.0/8")}, []netip.Prefix{p("10.0.0.0/8")}, "10.1.2.3", false},
		{"AllowCanReopenDefault", []netip.Prefix{p("169.254.10.0/24")}, nil, "169.254.10.1", true},
		{"UnmaskedPrefixNormalised", nil, []netip.Prefix{p("10.9.9.9/8")}, "10.1.2.3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(tc.allow, tc.deny).Allowed(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Fatalf("Allowed(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

// TestCheckHost runs every literal form of a refused address through the
// default guard and through guards that deny loopback and private ranges
// (a multi-tenant deployment) or open a hole in them (tests, development).
func TestCheckHost(t *testing.T) {
	defaults := New(nil, nil)
	strict := New(nil, append(append([]netip.Prefix{}, loopback...), private...))
	hole := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, loopback)
	for _, tc := range []struct {
		name    string
		g       *Guard
		host    string
		refused bool
		is      string // in the error: the address the host denotes
	}{
		{"MetadataRefused", defaults, "169.254.169.254", true, ""},
		{"MetadataDecimalRefused", defaults, "2852039166", true, "169.254.169.254"},
		{"MetadataHexRefused", defaults, "0xa9fea9fe", true, "169.254.169.254"},
		{"MetadataTwoPartsRefused", defaults, "169.16689662", true, "169.254.169.254"},
		{"MetadataMappedRefused", defaults, "::ffff:169.254.169.254", true, "169.254.169.254"},
		{"ECSRefused", defaults, "169.254.170.2", true, ""},
		{"AWSIPv6MetadataRefused", defaults, "fd00:ec2::254", true, ""},
		{"ThisHostRefused", defaults, "0.0.0.0", true, ""},
		{"ThisHostShortRefused", defaults, "0", true, "0.0.0.0"},
		{"UnspecifiedV6Refused", defaults, "::", true, ""},
		{"LinkLocalV6ZoneRefused", defaults, "fe80::1%eth0", true, "fe80::1"},
		{"BroadcastRefused", defaults, "255.255.255.255", true, ""},

		{"LoopbackAllowedByDefault", defaults, "127.0.0.1", false, ""},
		{"LoopbackShortAllowedByDefault", defaults, "127.1", false, ""},
		{"PrivateAllowedByDefault", defaults, "10.0.0.1", false, ""},
		{"PublicAllowed", defaults, "93.184.216.34", false, ""},
		{"NameAllowed", defaults, "metadata.google.internal", false, ""},

		{"LoopbackRefusedWhenDenied", strict, "127.0.0.1", true, ""},
		{"LoopbackShortRefused", strict, "127.1", true, "127.0.0.1"},
		{"LoopbackDecimalRefused", strict, "2130706433", true, "127.0.0.1"},
		{"LoopbackHexRefused", strict, "0x7f000001", true, "127.0.0.1"},
		{"LoopbackOctalRefused", strict, "0177.0.0.1", true, "127.0.0.1"},
		{"LoopbackTrailingDotRefused", strict, "127.0.0.1.", true, "127.0.0.1"},
		{"LoopbackV6Refused", strict, "::1", true, ""},
		{"LoopbackMappedRefused", strict, "::ffff:127.0.0.1", true, "127.0.0.1"},
		{"PrivateRefusedWhenDenied", strict, "10.0.0.1", true, ""},
		{"PrivateShortRefused", strict, "10.1", true, "10.0.0.1"},
		{"Private192OctalRefused", strict, "0300.0250.1.1", true, "192.168.1.1"},
		{"PrivateV6Refused", strict, "fd12::1", true, ""},
		{"PublicAllowedWhenStrict", strict, "93.184.216.34", false, ""},
		{"PublicDecimalAllowedWhenStrict", strict, "1572395042", false, ""},
		{"NameAllowedWhenStrict", strict, "localhost", false, ""},

		{"HoleAllowed", hole, "127.0.0.1", false, ""},
		{"HoleShortAllowed", hole, "127.1", false, ""},
		{"BesideHoleRefused", hole, "127.0.0.2", true, ""},
		{"BesideHoleShortRefused", hole, "127.2", true, "127.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.CheckHost(tc.host)
			if !tc.refused {
				if err != nil {
					t.Fatalf("CheckHost(%q) = %v, want nil", tc.host, err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("CheckHost(%q) = %v, want ErrRefused", tc.host, err)
			}
			if !strings.Contains(err.Error(), tc.host) || !strings.Contains(err.Error(), tc.is) {
				t.Fatalf("CheckHost(%q) = %q, want it to name the host and %q", tc.host, err, tc.is)
			}
		})
	}
}

// part is one inet_aton part as the C library's strtoul(3) with base 0
// reads it, once inet_aton has checked that it starts with a digit.
var part = regexp.MustCompile(`^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$`)

// referenceIPv4 is a second, independent reading of inet_aton(3): the
// parts split, checked against the grammar, valued by strconv and packed
// with arithmetic instead of shifts.
func referenceIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if !part.MatchString(p) {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, 0, 64)
		if err != nil || v > 0xffffffff {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	room := uint64(1)
	for range 5 - len(parts) {
		room *= 256
	}
	total := uint64(0)
	for i, v := range vals {
		if i < len(vals)-1 {
			if v > 255 {
				return netip.Addr{}, false
			}
			total = total*256 + v
			continue
		}
		if v >= room {
			return netip.Addr{}, false
		}
		total = total*room + v
	}
	return netip.AddrFrom4([4]byte{byte(total / (1 << 24)), byte(total / (1 << 16) % 256), byte(total / 256 % 256), byte(total % 256)}), true
}

// FuzzParseHost checks ParseHost against the reference reading of IPv4
// literals and against netip for IPv6 and for canonical dotted quads, and
// that what it reads is what its printed form reads back as.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "::1", "::ffff:127.0.0.1",
		"fe80::1%eth0", "169.254.169.254", "0", "0x", "08", "1.2.3.4.5", "4294967296", "127.0.0.1.",
		"example.com", "0xa9.0xfe.43518", "00000000000000000000001", "1..1", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		got, ok := ParseHost(host)
		if strings.Contains(host, ":") {
			want, err := netip.ParseAddr(host)
			if ok != (err == nil) || got != want {
				t.Fatalf("ParseHost(%q) = %s, %v; netip reads %s, %v", host, got, ok, want, err)
			}
			return
		}
		want, wantOK := referenceIPv4(strings.TrimSuffix(host, "."))
		if ok != wantOK || got != want {
			t.Fatalf("ParseHost(%q) = %s, %v; the reference reads %s, %v", host, got, ok, want, wantOK)
		}
		if a, err := netip.ParseAddr(host); err == nil && (!ok || got != a) {
			t.Fatalf("ParseHost(%q) = %s, %v; netip reads %s", host, got, ok, a)
		}
		if ok {
			if back, ok := ParseHost(got.String()); !ok || back != got {
				t.Fatalf("ParseHost(%q) = %s, which reads back as %s, %v", host, got, back, ok)
			}
		}
	})
}
