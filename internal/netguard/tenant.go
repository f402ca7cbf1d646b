package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrNotAllowed is wrapped by the errors of a TargetRule.
var ErrNotAllowed = errors.New("not among the tenant's allowed targets")

// TargetRule is one tenant's restriction of its delivery targets: http
// hosts by name pattern or address range, sqs queues by URL prefix. A nil
// *TargetRule allows every target. It is immutable and safe for concurrent
// use.
//
// A host name that matches no pattern is allowed on save when the rule has
// address ranges, because only its resolved addresses can be judged: the
// HTTP deliverer must then call AllowsDial for every address it would dial.
type TargetRule struct {
	hosts  []string // lower case; "*.example.com" matches subdomains only
	cidrs  []netip.Prefix
	queues []string
}

// NewTargetRule parses a tenant's lists. An error names the first bad entry
// by its list and index ("cidrs[2]").
func NewTargetRule(hosts, cidrs, queueURLPrefixes []string) (*TargetRule, error) {
	r := &TargetRule{}
	for i, h := range hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		name := strings.TrimPrefix(h, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") || strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
			return nil, fmt.Errorf("hosts[%d]: %q is not a host name or *.domain pattern", i, hosts[i])
		}
		r.hosts = append(r.hosts, h)
	}
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("cidrs[%d]: %q is not a CIDR such as 203.0.113.0/24", i, c)
		}
		r.cidrs = append(r.cidrs, p.Masked())
	}
	for i, q := range queueURLPrefixes {
		if !strings.HasPrefix(q, "https://") && !strings.HasPrefix(q, "http://") {
			return nil, fmt.Errorf("queueUrlPrefixes[%d]: %q is not an http(s) URL prefix", i, q)
		}
		r.queues = append(r.queues, q)
	}
	return r, nil
}

// CheckHost is the check on save of the host of an http target's URL (as
// url.URL.Hostname returns it): an address literal must be in one of the
// ranges; a name must match a pattern, unless the rule has ranges, in
// which case AllowsDial judges its addresses at delivery. The error wraps
// ErrNotAllowed.
func (r *TargetRule) CheckHost(host string) error {
	if r == nil {
		return nil
	}
	if addr, ok := ParseHost(host); ok {
		if r.inRanges(addr) {
			return nil
		}
		return fmt.Errorf("address %s is %w", host, ErrNotAllowed)
	}
	if r.matchHost(host) || len(r.cidrs) > 0 {
		return nil
	}
	return fmt.Errorf("host %s is %w", host, ErrNotAllowed)
}

// AllowsDial is the check at delivery, after name resolution: whether an
// event whose URL names host may be sent to addr.
func (r *TargetRule) AllowsDial(host string, addr netip.Addr) bool {
	if r == nil {
		return true
	}
	if _, literal := ParseHost(host); !literal && r.matchHost(host) {
		return true
	}
	return r.inRanges(addr)
}

// CheckQueueURL refuses an SQS queue URL that starts with none of the
// prefixes; the error wraps ErrNotAllowed.
func (r *TargetRule) CheckQueueURL(u string) error {
	if r == nil {
		return nil
	}
	for _, q := range r.queues {
		if strings.HasPrefix(u, q) {
			return nil
		}
	}
	return fmt.Errorf("queue URL is %w", ErrNotAllowed)
}

func (r *TargetRule) inRanges(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range r.cidrs {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// matchHost: "example.com" matches itself only; "*.example.com" matches
// "a.example.com" and "a.b.example.com" but not "example.com".
func (r *TargetRule) matchHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range r.hosts {
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if host == h {
			return true
		}
	}
	return false
}
