package httpdelivery

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/netguard"
)

// ErrTargetRefused is wrapped by the error of a delivery whose target address
// the SSRF guard refuses. Such a result is Permanent.
var ErrTargetRefused = fmt.Errorf("httpdelivery: %w", delivery.ErrTargetRefused)

// DefaultDenyCIDRs returns the prefixes refused unless AllowCIDRs holds a
// more specific (or equal) prefix: link-local ranges, where cloud metadata
// services answer with instance credentials, the metadata addresses that
// live elsewhere, "this host", multicast and broadcast (netguard.DefaultDeny).
// Loopback and private ranges are not here: self-hosted consumers usually sit
// on them. Deny them with Config.DenyCIDRs for a multi-tenant deployment.
func DefaultDenyCIDRs() []netip.Prefix { return netguard.DefaultDeny() }

// guard checks each resolved address against the rule of netguard.Guard.
type guard struct {
	g *netguard.Guard
}

func newGuard(allow, deny []netip.Prefix) *guard {
	return &guard{g: netguard.New(allow, deny)}
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
	if !g.g.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrTargetRefused, ap.Addr())
	}
	return nil
}

// dialHostKey holds, in a dial's context, the host name of the URL being
// delivered, which a tenant's rule judges with the dialled address.
type dialHostKey struct{}

// controlContext is control plus the tenant's target rule the delivery's
// context carries (netguard.WithTargetRule), judged on the resolved address.
func (g *guard) controlContext(ctx context.Context, network, address string, c syscall.RawConn) error {
	if err := g.control(network, address, c); err != nil {
		return err
	}
	// Only a tenant's own pool dials with a host (Deliverer.ruled); a
	// shared connection serves every tenant whose rule allows the name.
	host, ok := ctx.Value(dialHostKey{}).(string)
	_, rule := netguard.TargetRuleFrom(ctx)
	if !ok || rule == nil {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !rule.AllowsDial(host, ap.Addr()) {
		return fmt.Errorf("%w: %s is %w", ErrTargetRefused, address, netguard.ErrNotAllowed)
	}
	return nil
}
