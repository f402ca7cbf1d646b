package netguard_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/schedulerd/schedulerd/internal/netguard"
)

func TestTargetRule(t *testing.T) {
	rule, err := netguard.NewTargetRule(
		[]string{"*.example.com", "Hooks.Partner.io."},
		[]string{"203.0.113.9/24", "2001:db8::/32"},
		[]string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"},
	)
	if err != nil {
		t.Fatal(err)
	}
	names, err := netguard.NewTargetRule([]string{"*.example.com"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("CheckHost", func(t *testing.T) {
		for _, tc := range []struct {
			rule *netguard.TargetRule
			host string
			ok   bool
		}{
			{names, "a.example.com", true},
			{names, "a.b.EXAMPLE.com.", true},
			{names, "example.com", false},
			{names, "badexample.com", false},
			{names, "example.com.evil.net", false},
			{names, "203.0.113.1", false},
			{rule, "hooks.partner.io", true},
			{rule, "203.0.113.250", true}, // 203.0.113.9/24 is masked
			{rule, "0xcb007101", true},    // 203.0.113.1 as inet_aton reads it
			{rule, "198.51.100.1", false},
			{rule, "2001:db8::1", true},
			{rule, "::ffff:203.0.113.1", true},
			{rule, "anything.net", true}, // a name: judged at dial time
			{nil, "anything.net", true},
		} {
			err := tc.rule.CheckHost(tc.host)
			if (err == nil) != tc.ok {
				t.Errorf("CheckHost(%q) = %v, want ok %v", tc.host, err, tc.ok)
			}
			if err != nil && !errors.Is(err, netguard.ErrNotAllowed) {
				t.Errorf("CheckHost(%q) = %v, does not wrap ErrNotAllowed", tc.host, err)
			}
		}
	})

	t.Run("AllowsDial", func(t *testing.T) {
		addr := netip.MustParseAddr
		for _, tc := range []struct {
			rule *netguard.TargetRule
			host string
			addr netip.Addr
			ok   bool
		}{
			{rule, "a.example.com", addr("10.0.0.1"), true}, // the name pattern allows it
			{rule, "anything.net", addr("203.0.113.7"), true},
			{rule, "anything.net", addr("10.0.0.1"), false},
			{rule, "anything.net", addr("::ffff:203.0.113.7"), true},
			{rule, "198.51.100.1", addr("198.51.100.1"), false},
			{names, "anything.net", addr("203.0.113.7"), false},
			{nil, "anything.net", addr("10.0.0.1"), true},
		} {
			if got := tc.rule.AllowsDial(tc.host, tc.addr); got != tc.ok {
				t.Errorf("AllowsDial(%q, %s) = %v, want %v", tc.host, tc.addr, got, tc.ok)
			}
		}
	})

	t.Run("CheckQueueURL", func(t *testing.T) {
		if err := rule.CheckQueueURL("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"); err != nil {
			t.Errorf("queue under the prefix: %v", err)
		}
		if err := rule.CheckQueueURL("https://sqs.eu-west-1.amazonaws.com/999999999999/jobs"); !errors.Is(err, netguard.ErrNotAllowed) {
			t.Errorf("queue outside the prefix: %v", err)
		}
		if err := names.CheckQueueURL("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"); err == nil {
			t.Error("a rule without prefixes allowed a queue")
		}
	})

	t.Run("NewRefusesBadEntries", func(t *testing.T) {
		for _, tc := range []struct {
			hosts, cidrs, queues []string
			want                 string
		}{
			{[]string{"ok.com", "a.*.com"}, nil, nil, "hosts[1]"},
			{[]string{"*."}, nil, nil, "hosts[0]"},
			{[]string{"host:80"}, nil, nil, "hosts[0]"},
			{nil, []string{"10.0.0.0/33"}, nil, "cidrs[0]"},
			{nil, []string{"10.0.0.1"}, nil, "cidrs[0]"},
			{nil, nil, []string{"sqs.example/"}, "queueUrlPrefixes[0]"},
		} {
			_, err := netguard.NewTargetRule(tc.hosts, tc.cidrs, tc.queues)
			if err == nil || err.Error()[:len(tc.want)] != tc.want {
				t.Errorf("NewTargetRule(%v, %v, %v) = %v, want an error starting %q", tc.hosts, tc.cidrs, tc.queues, err, tc.want)
			}
		}
	})
}
