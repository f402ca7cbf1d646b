package handler

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/internal/netguard"
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
	// ring holds the schedules in turn; a schedule whose events all went
	// leaves a nil until the ring is compacted (a tenant of many one-offs
	// would otherwise move its whole ring for every event).
	ring  []*schedQueue
	live  int // non-nil entries of ring
	next  int
	hosts map[string]int // waiting events by host
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

// hostKey names the consumer of e, the unit of per-host concurrency: the
// URL's host (port included) of an http target, the queue of an sqs
// target (every queue of a region shares the endpoint's host).
func hostKey(e *model.Event) string {
	raw := e.Target.URL
	if e.Target.Type == model.TargetSQS {
		return string(model.TargetSQS) + " " + e.Target.QueueURL
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
	// Events of one schedule mostly share their target: parse it once.
	hosts := make([]string, len(items))
	var lastType model.TargetType
	var lastURL, lastHost string
	for i, it := range items {
		tg := it.Event.Target
		if i == 0 || tg.Type != lastType || tg.URL+tg.QueueURL != lastURL {
			lastType, lastURL, lastHost = tg.Type, tg.URL+tg.QueueURL, hostKey(it.Event)
		}
		hosts[i] = lastHost
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, it := range items {
		t := q.tenants[it.Event.TenantID]
		if t == nil {
			t = &tenantQueue{id: it.Event.TenantID, scheds: map[string]*schedQueue{}, hosts: map[string]int{}}
			q.tenants[t.id] = t
			q.active = append(q.active, t)
		}
		s := t.scheds[it.Event.ScheduleID]
		if s == nil {
			s = &schedQueue{id: it.Event.ScheduleID}
			t.scheds[s.id] = s
			t.ring = append(t.ring, s)
			t.live++
		}
		s.items = append(s.items, queued{it: it, host: hosts[i]})
		t.hosts[hosts[i]]++
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
		if t.live == 0 {
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
// whose head event's host has a free slot, and goes on with the following
// schedules in turn while their head events go to the same host: a
// tenant's one-offs due together go many to a delivery, and to an
// http_batch host they share requests instead of one request (or more) per
// schedule. A busy host is looked up once a call; with every host of the
// tenant busy it returns at once.
func (t *tenantQueue) take(limit int, free func(host string) int) ([]throttle.Item, string) {
	if len(t.hosts) <= 8 {
		// Every host of the tenant's events busy: nothing to look for.
		busy := true
		for h := range t.hosts {
			if free(h) > 0 {
				busy = false
				break
			}
		}
		if busy {
			return nil, ""
		}
	}
	var full []string // hosts found busy in this call
	for range len(t.ring) {
		if t.next >= len(t.ring) {
			t.next = 0
		}
		s := t.ring[t.next]
		if s == nil {
			t.next++
			continue
		}
		host := s.items[s.head].host
		if slices.Contains(full, host) {
			t.next++
			continue
		}
		n := min(limit, free(host))
		if n <= 0 {
			full = append(full, host)
			t.next++
			continue
		}
		// The next schedules in turn with events to the same host share
		// the delivery (a tenant's one-offs go many to a dispatch).
		out := t.takeFrom(s, host, n, nil)
		for range len(t.ring) {
			if len(out) == n || t.live == 0 {
				break
			}
			if t.next >= len(t.ring) {
				t.next = 0
			}
			s := t.ring[t.next]
			if s == nil {
				t.next++
				continue
			}
			if s.items[s.head].host != host {
				break
			}
			out = t.takeFrom(s, host, n, out)
		}
		t.compact()
		return out, host
	}
	return nil, ""
}

func (t *tenantQueue) takeFrom(s *schedQueue, host string, n int, out []throttle.Item) []throttle.Item {
	from := len(out)
	for len(out) < n && s.head < len(s.items) && s.items[s.head].host == host {
		out = append(out, s.items[s.head].it)
		s.items[s.head] = queued{}
		s.head++
	}
	if c := t.hosts[host] - (len(out) - from); c > 0 {
		t.hosts[host] = c
	} else {
		delete(t.hosts, host)
	}
	if s.head == len(s.items) {
		delete(t.scheds, s.id)
		t.ring[t.next] = nil
		t.live--
	} else if s.head > len(s.items)/2 && s.head > 64 {
		n := copy(s.items, s.items[s.head:])
		clear(s.items[n:])
		s.items, s.head = s.items[:n], 0
	}
	t.next++
	return out
}

// compact drops the ring's nil entries once they are most of it, keeping
// the order and the turn.
func (t *tenantQueue) compact() {
	dead := len(t.ring) - t.live
	if dead < 64 || 2*dead < len(t.ring) {
		return
	}
	next, kept := 0, t.ring[:0]
	for i, s := range t.ring {
		if s == nil {
			continue
		}
		if i < t.next {
			next++
		}
		kept = append(kept, s)
	}
	clear(t.ring[len(kept):])
	t.ring, t.next = kept, next
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
			if s == nil {
				return true
			}
			if s.head < len(s.items) {
				return false
			}
			delete(t.scheds, s.id)
			return true
		})
		t.live = len(t.ring)
		clear(t.hosts)
		for _, s := range t.ring {
			for _, e := range s.items[s.head:] {
				t.hosts[e.host]++
			}
		}
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
			if s != nil {
				f(s.items[s.head].it.Event)
			}
		}
	}
}

func max1(v int) int { return max(v, 1) }
func max0(v int) int { return max(v, 0) }

// tenantCache caches what delivery needs of a tenant: its weight and its
// target rule. A weight lookup never waits for the store: an unknown or
// stale tenant gets its last known weight (or the default) and is read
// again in the background. A rule lookup reads a missing or stale tenant at
// once (its events must not go unchecked) and falls back on the last known
// rule when the store fails.
type tenantCache struct {
	src   Tenants
	def   int
	ttl   time.Duration
	now   func() time.Time
	spawn func(func(context.Context)) // runs a background read
	mu    sync.Mutex
	m     map[string]*tenantEntry
}

type tenantEntry struct {
	w       int
	rule    *netguard.TargetRule
	version int64
	at      time.Time // of the last read; zero: never read
	loading bool
}

// entry returns tenant's entry, making it; under c.mu.
func (c *tenantCache) entry(tenant string, now time.Time) *tenantEntry {
	e := c.m[tenant]
	if e == nil {
		if len(c.m) >= 4096 {
			for id, old := range c.m {
				if !old.loading && now.Sub(old.at) > c.ttl {
					delete(c.m, id)
				}
			}
		}
		e = &tenantEntry{w: c.def}
		c.m[tenant] = e
	}
	return e
}

func (c *tenantCache) weight(tenant string) int {
	if c.src == nil {
		return c.def
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(tenant, now)
	if e.loading || (!e.at.IsZero() && now.Sub(e.at) <= c.ttl) {
		return e.w
	}
	e.loading = true
	c.spawn(func(ctx context.Context) {
		_ = c.load(ctx, tenant)
		c.mu.Lock()
		e.loading = false
		c.mu.Unlock()
	})
	return e.w
}

// rule returns tenant's target rule (nil: every target allowed).
func (c *tenantCache) rule(ctx context.Context, tenant string) (*netguard.TargetRule, error) {
	if c.src == nil {
		return nil, nil
	}
	now := c.now()
	c.mu.Lock()
	e := c.entry(tenant, now)
	fresh, known, rule := !e.at.IsZero() && now.Sub(e.at) <= c.ttl, !e.at.IsZero(), e.rule
	c.mu.Unlock()
	if fresh {
		return rule, nil
	}
	err := c.load(ctx, tenant)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		return c.entry(tenant, now).rule, nil
	case known:
		return rule, nil
	}
	return nil, fmt.Errorf("reading tenant %s for its delivery targets: %w", tenant, err)
}

// load reads tenant and records its weight and rule. A tenant that does
// not exist has the default weight and no rule; a rule that does not parse
// allows nothing.
func (c *tenantCache) load(ctx context.Context, tenant string) error {
	t, err := c.src.TenantGet(ctx, tenant)
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return err
	}
	w, version := c.def, int64(0)
	var rule *netguard.TargetRule
	if t != nil {
		version = t.Version
		if t.Weight > 0 {
			w = t.Weight
		}
		if tt := t.Targets; tt != nil {
			if rule, err = netguard.NewTargetRule(tt.Hosts, tt.CIDRs, tt.QueueURLPrefixes); err != nil {
				rule, _ = netguard.NewTargetRule(nil, nil, nil)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(tenant, c.now())
	if e.at.IsZero() || e.version != version || (e.rule == nil) != (rule == nil) {
		// Unchanged tenants keep their rule: the HTTP deliverer keeps a
		// connection pool per rule.
		e.rule = rule
	}
	e.w, e.version, e.at = w, version, c.now()
	return nil
}
