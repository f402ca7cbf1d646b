package handler

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// fairQuantum is how many events a tenant of weight 1 may take per round
// of the deficit round robin while other tenants have due events.
const fairQuantum = 16

// fairQueue holds the due events on their way to delivery: one queue per
// tenant and, within it, one per schedule. take serves the tenants by
// deficit round robin weighted by their weight, and a tenant's schedules in
// turn, so that a tenant's backlog takes at most its share of the delivery
// slots while others have due events, and all of them when alone. It holds
// only events the handler already claimed; a tenant or schedule with
// nothing due has no queue.
type fairQueue struct {
	mu      sync.Mutex
	tenants map[string]*tenantQueue
	active  []*tenantQueue // tenants with events, in round-robin order
	next    int            // index in active of the tenant visited next
	n       int
}

type tenantQueue struct {
	id      string
	deficit int
	scheds  map[string]*schedQueue
	ring    []*schedQueue
	next    int
}

// schedQueue is one schedule's due events in launch order.
type schedQueue struct {
	id    string
	items []queued
	head  int
}

// queued is an item and the key of the host it goes to.
type queued struct {
	it   throttle.Item
	host string
}

func newFairQueue() *fairQueue {
	return &fairQueue{tenants: map[string]*tenantQueue{}}
}

// hostKey names the consumer host of e, the unit of per-host concurrency:
// the target type and the URL's host (port included).
func hostKey(e *model.Event) string {
	raw := e.Target.URL
	if e.Target.Type == model.TargetSQS {
		raw = e.Target.QueueURL
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return string(e.Target.Type) + " " + raw
	}
	return string(e.Target.Type) + " " + u.Host
}

// push appends items to their tenant's and schedule's queues.
func (q *fairQueue) push(items ...throttle.Item) {
	if len(items) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range items {
		t := q.tenants[it.Event.TenantID]
		if t == nil {
			t = &tenantQueue{id: it.Event.TenantID, scheds: map[string]*schedQueue{}}
			q.tenants[t.id] = t
			q.active = append(q.active, t)
		}
		s := t.scheds[it.Event.ScheduleID]
		if s == nil {
			s = &schedQueue{id: it.Event.ScheduleID}
			t.scheds[s.id] = s
			t.ring = append(t.ring, s)
		}
		s.items = append(s.items, queued{it: it, host: hostKey(it.Event)})
		q.n++
	}
}

// Len returns how many events wait.
func (q *fairQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// take returns up to max events, all to one host, from the next tenant in
// turn that has an event whose host has a free slot (free returns how many;
// it is called under q's lock). weight returns a tenant's weight (at least
// 1). Nothing when no waiting event can go now.
func (q *fairQueue) take(max int, weight func(tenant string) int, free func(host string) int) ([]throttle.Item, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if max <= 0 {
		return nil, ""
	}
	alone := len(q.active) == 1
	for range len(q.active) {
		if q.next >= len(q.active) {
			q.next = 0
		}
		t := q.active[q.next]
		if t.deficit <= 0 {
			t.deficit += max1(weight(t.id)) * fairQuantum
		}
		limit := max
		if !alone {
			// Others wait: no more than the tenant's remaining share.
			limit = min(limit, t.deficit)
		}
		out, host := t.take(limit, free)
		if len(out) == 0 {
			q.next++ // its hosts are busy: the deficit waits for its turn
			continue
		}
		q.n -= len(out)
		t.deficit = max0(t.deficit - len(out))
		if len(t.ring) == 0 {
			delete(q.tenants, t.id)
			q.active = slices.Delete(q.active, q.next, q.next+1)
		} else if t.deficit == 0 {
			q.next++
		}
		return out, host
	}
	return nil, ""
}

// take takes up to limit events to one host from the next schedule in turn
// whose head event's host has a free slot.
func (t *tenantQueue) take(limit int, free func(host string) int) ([]throttle.Item, string) {
	for range len(t.ring) {
		if t.next >= len(t.ring) {
			t.next = 0
		}
		s := t.ring[t.next]
		host := s.items[s.head].host
		n := min(limit, free(host))
		if n <= 0 {
			t.next++
			continue
		}
		var out []throttle.Item
		for len(out) < n && s.head < len(s.items) && s.items[s.head].host == host {
			out = append(out, s.items[s.head].it)
			s.items[s.head] = queued{}
			s.head++
		}
		if s.head == len(s.items) {
			delete(t.scheds, s.id)
			t.ring = slices.Delete(t.ring, t.next, t.next+1)
		} else {
			if s.head > len(s.items)/2 && s.head > 64 {
				s.items = slices.Clip(append(s.items[:0], s.items[s.head:]...))
				s.head = 0
			}
			t.next++
		}
		return out, host
	}
	return nil, ""
}

// filter keeps the events for which keep is true.
func (q *fairQueue) filter(keep func(throttle.Item) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, t := range q.tenants {
		for _, s := range t.scheds {
			kept := s.items[:0]
			for _, e := range s.items[s.head:] {
				if keep(e.it) {
					kept = append(kept, e)
				}
			}
			q.n -= len(s.items) - s.head - len(kept)
			clear(s.items[len(kept):])
			s.items, s.head = kept, 0
		}
	}
	q.prune()
}

// drain removes and returns every waiting event.
func (q *fairQueue) drain() []throttle.Item {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []throttle.Item
	for _, t := range q.tenants {
		for _, s := range t.scheds {
			for _, e := range s.items[s.head:] {
				out = append(out, e.it)
			}
		}
	}
	q.tenants, q.active, q.next, q.n = map[string]*tenantQueue{}, nil, 0, 0
	return out
}

// prune drops empty queues.
func (q *fairQueue) prune() {
	q.active = slices.DeleteFunc(q.active, func(t *tenantQueue) bool {
		t.ring = slices.DeleteFunc(t.ring, func(s *schedQueue) bool {
			if s.head < len(s.items) {
				return false
			}
			delete(t.scheds, s.id)
			return true
		})
		if len(t.ring) > 0 {
			return false
		}
		delete(q.tenants, t.id)
		return true
	})
}

// heads calls f with the first waiting event of every schedule queue: the
// oldest one of its schedule.
func (q *fairQueue) heads(f func(e *model.Event)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, t := range q.active {
		for _, s := range t.ring {
			f(s.items[s.head].it.Event)
		}
	}
}

func max1(v int) int { return max(v, 1) }
func max0(v int) int { return max(v, 0) }

// weightCache caches tenant weights: a lookup never waits for the store; an
// unknown or stale tenant gets its last known weight (or the default) and
// is read again in the background.
type weightCache struct {
	src   Tenants
	def   int
	ttl   time.Duration
	now   func() time.Time
	spawn func(func(context.Context)) // runs a refresh
	mu    sync.Mutex
	m     map[string]*weightEntry
}

type weightEntry struct {
	w       int
	at      time.Time
	loading bool
}

func (c *weightCache) get(tenant string) int {
	if c.src == nil {
		return c.def
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[tenant]
	if e == nil {
		if len(c.m) >= 4096 {
			for id, old := range c.m {
				if !old.loading && now.Sub(old.at) > c.ttl {
					delete(c.m, id)
				}
			}
		}
		e = &weightEntry{w: c.def}
		c.m[tenant] = e
	} else if e.loading || now.Sub(e.at) <= c.ttl {
		return e.w
	}
	e.loading = true
	c.spawn(func(ctx context.Context) { c.load(ctx, tenant) })
	return e.w
}

func (c *weightCache) load(ctx context.Context, tenant string) {
	w := c.def
	t, err := c.src.TenantGet(ctx, tenant)
	if err == nil && t != nil && t.Weight > 0 {
		w = t.Weight
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[tenant]; e != nil {
		e.loading = false
		e.at = c.now()
		if err == nil || e.w == 0 {
			e.w = w
		}
	}
}
