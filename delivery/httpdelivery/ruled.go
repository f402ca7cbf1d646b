package httpdelivery

import (
	"net/http"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/netguard"
)

// ruledIdle is how long an unused tenant pool is kept.
const ruledIdle = 2 * time.Minute

// ruledPools holds one connection pool per tenant whose rule judges
// addresses, made on first use and dropped once unused for ruledIdle (or
// when the tenant's rule changes).
type ruledPools struct {
	base  *http.Client
	mu    sync.Mutex
	pools map[string]*ruledPool
	swept time.Time
}

type ruledPool struct {
	rule      *netguard.TargetRule
	client    *http.Client
	transport *http.Transport
	used      time.Time
}

func (p *ruledPools) init(base *http.Client) {
	p.base, p.pools = base, map[string]*ruledPool{}
}

// client returns tenant's client, dialling with the shared transport's
// settings and guard.
func (p *ruledPools) client(tenant string, rule *netguard.TargetRule, shared *http.Transport) *http.Client {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.swept) > ruledIdle {
		p.swept = now
		for t, old := range p.pools {
			if now.Sub(old.used) > ruledIdle {
				old.transport.CloseIdleConnections()
				delete(p.pools, t)
			}
		}
	}
	pool := p.pools[tenant]
	if pool == nil || pool.rule != rule {
		if pool != nil {
			pool.transport.CloseIdleConnections()
		}
		tr := shared.Clone()
		c := *p.base
		c.Transport = tr
		pool = &ruledPool{rule: rule, client: &c, transport: tr}
		p.pools[tenant] = pool
	}
	pool.used = now
	return pool.client
}

func (p *ruledPools) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pool := range p.pools {
		pool.transport.CloseIdleConnections()
	}
}
