package httpdelivery

import (
	"net/http"
	"net/netip"
	"testing"
	"time"
)

func TestGuardAllowed(t *testing.T) {
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
		{"DenyPrivate", nil, []netip.Prefix{p("10.0.0.0/8")}, "10.1.2.3", false},
		{"AllowMoreSpecificWins", []netip.Prefix{p("10.1.0.0/16")}, []netip.Prefix{p("10.0.0.0/8")}, "10.1.2.3", true},
		{"DenyMoreSpecificWins", []netip.Prefix{p("10.0.0.0/8")}, []netip.Prefix{p("10.1.0.0/16")}, "10.1.2.3", false},
		{"DenyWinsTie", []netip.Prefix{p("10.0.0.0/8")}, []netip.Prefix{p("10.0.0.0/8")}, "10.1.2.3", false},
		{"AllowCanReopenDefault", []netip.Prefix{p("169.254.10.0/24")}, nil, "169.254.10.1", true},
		{"UnmaskedPrefixNormalised", nil, []netip.Prefix{p("10.9.9.9/8")}, "10.1.2.3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(tc.allow, tc.deny)
			if got := g.allowed(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Fatalf("allowed(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"Seconds", "120", 2 * time.Minute, true},
		{"Zero", "0", 0, true},
		{"Padded", " 5 ", 5 * time.Second, true},
		{"Negative", "-1", 0, false},
		{"Huge", "99999999999999999", time.Duration(1<<63-1) / time.Second * time.Second, true},
		{"HTTPDate", now.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"PastDate", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Empty", "", 0, false},
		{"Garbage", "soon", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tc.value, now)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
