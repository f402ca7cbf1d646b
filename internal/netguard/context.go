package netguard

import "context"

type ruleKey struct{}

type tenantRule struct {
	tenant string
	rule   *TargetRule
}

// WithTargetRule returns ctx carrying tenant's target rule: the deliverers
// check every target of a call with that context against it (the HTTP
// deliverer after name resolution, at dial). A nil rule allows everything.
func WithTargetRule(ctx context.Context, tenant string, r *TargetRule) context.Context {
	return context.WithValue(ctx, ruleKey{}, tenantRule{tenant: tenant, rule: r})
}

// TargetRuleFrom returns the tenant and rule WithTargetRule put into ctx;
// rule is nil when there is none.
func TargetRuleFrom(ctx context.Context) (tenant string, rule *TargetRule) {
	tr, _ := ctx.Value(ruleKey{}).(tenantRule)
	return tr.tenant, tr.rule
}

// NameAllowed reports whether the host name (not an address literal) of an
// http target matches one of the rule's host patterns, which allows it
// whatever it resolves to. When it does not, only AllowsDial on each
// resolved address can allow it.
func (r *TargetRule) NameAllowed(host string) bool {
	if r == nil {
		return true
	}
	if _, literal := ParseHost(host); literal {
		return false
	}
	return r.matchHost(host)
}
