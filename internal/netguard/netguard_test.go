package netguard

import (
	"errors"
	"net/netip"
	"regexp"
	"slices"
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
		{"NAT64OfLoopbackRefused", nil, nil, "64:ff9b::7f00:1", false},
		{"NAT64OfMetadataRefused", nil, nil, "64:ff9b::a9fe:a9fe", false},
		{"NAT64OfPublicAllowed", nil, nil, "64:ff9b::5db8:d822", true},
		{"NAT64OfDeniedPublicRefused", nil, []netip.Prefix{p("93.184.0.0/16")}, "64:ff9b::5db8:d822", false},
		{"NAT64PrefixDenied", nil, []netip.Prefix{p("64:ff9b::/96")}, "64:ff9b::5db8:d822", false},
		{"NAT64OfHoleStillRefused", []netip.Prefix{p("127.0.0.1/32")}, nil, "64:ff9b::7f00:1", false},
		{"LocalNAT64Of10Refused", nil, nil, "64:ff9b:1::a00:1", false},
		{"LocalNAT64Slash48OfLoopbackRefused", nil, nil, "64:ff9b:1:7f00:1::", false},
		{"LocalNAT64AllowedByOperator", []netip.Prefix{p("64:ff9b:1::/96")}, nil, "64:ff9b:1::5db8:d822", true},
		{"SixToFourOfPrivateRefused", nil, nil, "2002:c0a8:101::1", false},
		{"SixToFourOfPublicAllowed", nil, nil, "2002:5db8:d822::1", true},
		{"TeredoServerLoopbackRefused", nil, nil, "2001:0:7f00:1:0:0:a247:2bdd", false},
		{"TeredoClientLoopbackRefused", nil, nil, "2001:0:5db8:d822::80ff:fffe", false},
		{"TeredoPublicAllowed", nil, nil, "2001:0:5db8:d822::a247:2bdd", true},
		{"IPv4CompatibleLoopbackRefused", nil, nil, "::7f00:1", false},
		{"IPv4CompatibleMetadataRefused", nil, nil, "::169.254.169.254", false},
		{"IPv4TranslatedLoopbackRefused", nil, nil, "::ffff:0:7f00:1", false},
		{"IPv6LoopbackNotIPv4Compatible", nil, nil, "::1", true},
		{"DocumentationV6Allowed", nil, nil, "2001:db8::1", true},
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
		{"NAT64LoopbackRefused", defaults, "64:ff9b::7f00:1", true, "127.0.0.1"},
		{"NAT64DottedMetadataRefused", defaults, "64:ff9b::169.254.169.254", true, "169.254.169.254"},
		{"LocalNAT64Refused", defaults, "64:ff9b:1::a00:1", true, ""},
		{"LocalNAT64PublicRefused", defaults, "64:ff9b:1::5db8:d822", true, ""},
		{"SixToFourPrivateRefused", defaults, "2002:c0a8:101::1", true, "192.168.1.1"},
		{"TeredoLoopbackRefused", defaults, "2001:0:7f00:1::", true, "127.0.0.1"},
		{"IPv4CompatibleRefused", defaults, "::127.0.0.1", true, "127.0.0.1"},
		{"IPv4TranslatedRefused", defaults, "::ffff:0:a9fe:a9fe", true, "169.254.169.254"},
		{"NAT64PublicAllowed", defaults, "64:ff9b::5db8:d822", false, ""},
		{"NAT64LoopbackRefusedBesideHole", hole, "64:ff9b::7f00:1", true, "127.0.0.1"},

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

func TestEmbeddedIPv4(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want []string
	}{
		{"64:ff9b::7f00:1", []string{"127.0.0.1"}},
		{"64:ff9b::a9fe:a9fe%eth0", []string{"169.254.169.254"}},
		{"64:ff9b:1::a00:1", nil}, // refused by DefaultDeny instead
		{"2002:c0a8:101::1", []string{"192.168.1.1"}},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", []string{"65.54.227.120", "192.0.2.45"}}, // RFC 4380's example
		{"::7f00:1", []string{"127.0.0.1"}},
		{"::ffff:0:7f00:1", []string{"127.0.0.1"}},
		{"::1", nil},
		{"::", nil},
		{"::ffff:127.0.0.1", nil},
		{"127.0.0.1", nil},
		{"2001:db8::1", nil},
		{"fe80::1", nil},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			var got []string
			for _, a := range EmbeddedIPv4(netip.MustParseAddr(tc.addr)) {
				got = append(got, a.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("EmbeddedIPv4(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

// FuzzTransitionForms builds the IPv6 transition forms of arbitrary IPv4
// addresses and checks that each is allowed only where the IPv4 address
// itself is allowed and is not special-purpose, under the defaults and
// under a deployment that allows loopback and private ranges explicitly.
func FuzzTransitionForms(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "169.254.169.254", "10.0.0.1", "93.184.216.34", "0.0.0.0", "255.255.255.255", "100.64.0.1"} {
		a := netip.MustParseAddr(s).As4()
		f.Add(a[0], a[1], a[2], a[3], uint8(0))
	}
	guards := []*Guard{New(nil, nil), New(append(append([]netip.Prefix{}, loopback...), private...), nil)}
	f.Fuzz(func(t *testing.T, a, b, c, d, form uint8) {
		v4 := netip.AddrFrom4([4]byte{a, b, c, d})
		var v6 [16]byte
		switch form % 4 {
		case 0: // NAT64
			copy(v6[:], []byte{0, 0x64, 0xff, 0x9b})
			copy(v6[12:], []byte{a, b, c, d})
		case 1: // 6to4
			copy(v6[:], []byte{0x20, 0x02, a, b, c, d})
			v6[15] = 1
		case 2: // Teredo with a public server, the client inverted
			copy(v6[:], []byte{0x20, 0x01, 0, 0, 93, 184, 216, 34})
			copy(v6[12:], []byte{^a, ^b, ^c, ^d})
		case 3: // IPv4-translated
			v6 = [16]byte{8: 0xff, 9: 0xff, 12: a, 13: b, 14: c, 15: d}
		}
		addr := netip.AddrFrom16(v6)
		if !slices.Contains(EmbeddedIPv4(addr), v4) {
			t.Fatalf("EmbeddedIPv4(%s) = %v, want it to hold %s", addr, EmbeddedIPv4(addr), v4)
		}
		for i, g := range guards {
			if g.Allowed(addr) && (isSpecialIPv4(v4) || !g.Allowed(v4)) {
				t.Fatalf("guard %d allows %s, which carries %s", i, addr, v4)
			}
			if err := g.CheckHost(addr.String()); (err == nil) != g.Allowed(addr) {
				t.Fatalf("guard %d: CheckHost(%s) = %v, Allowed %v", i, addr, err, g.Allowed(addr))
			}
		}
	})
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
