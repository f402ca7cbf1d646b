package handler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

func fairItems(tenant, schedule, url string, n int) []throttle.Item {
	out := make([]throttle.Item, n)
	for i := range out {
		out[i] = throttle.Item{Event: &model.Event{ID: fmt.Sprintf("%s.%s.%d", tenant, schedule, i), TenantID: tenant,
			ScheduleID: schedule, Target: model.Target{Type: model.TargetHTTP, URL: url}}}
	}
	return out
}

func unlimited(string) int { return 1 << 30 }

// Two backlogged tenants share the slots by weight; the heavy one's
// backlog, pushed first, does not go first.
func TestFairQueueWeightedShares(t *testing.T) {
	q := newFairQueue()
	q.push(fairItems("a", "s", "http://a.example", 10_000)...)
	q.push(fairItems("b", "s", "http://b.example", 10_000)...)
	weight := func(id string) int { return map[string]int{"a": 3, "b": 1}[id] }
	got := map[string]int{}
	for got["a"]+got["b"] < 4000 {
		batch, _ := q.take(10, weight, unlimited)
		if len(batch) == 0 {
			t.Fatal("nothing to take with both tenants backlogged")
		}
		for _, it := range batch {
			if it.Event.TenantID != batch[0].Event.TenantID {
				t.Fatalf("batch mixes tenants")
			}
			got[it.Event.TenantID]++
		}
	}
	ratio := float64(got["a"]) / float64(got["b"])
	if ratio < 2.8 || ratio > 3.2 {
		t.Errorf("a took %d and b %d (ratio %.2f), want weights 3:1", got["a"], got["b"], ratio)
	}
	if q.Len() != 20_000-got["a"]-got["b"] {
		t.Errorf("Len %d after taking %d of 20000", q.Len(), got["a"]+got["b"])
	}
}

// A tenant alone takes full batches; its empty queues are dropped.
func TestFairQueueAloneAndEmpty(t *testing.T) {
	q := newFairQueue()
	q.push(fairItems("a", "s", "http://a.example", 700)...)
	one := func(string) int { return 1 }
	if batch, _ := q.take(500, one, unlimited); len(batch) != 500 {
		t.Fatalf("alone: batch of %d, want 500", len(batch))
	}
	if batch, _ := q.take(500, one, unlimited); len(batch) != 200 {
		t.Fatalf("alone: batch of %d, want the 200 left", len(batch))
	}
	if len(q.tenants) != 0 || len(q.active) != 0 || q.Len() != 0 {
		t.Fatalf("empty queue keeps %d tenants, %d active, Len %d", len(q.tenants), len(q.active), q.Len())
	}
}

// Within a tenant the schedules take turns; a schedule whose host has no
// free slot is passed over, and a batch goes to one host.
func TestFairQueueSchedulesAndBusyHosts(t *testing.T) {
	q := newFairQueue()
	q.push(fairItems("a", "s1", "http://slow.example", 100)...)
	q.push(fairItems("a", "s2", "http://fast.example", 100)...)
	one := func(string) int { return 1 }
	b1, h1 := q.take(10, one, unlimited)
	b2, h2 := q.take(10, one, unlimited)
	if len(b1) != 10 || len(b2) != 10 || h1 == h2 {
		t.Fatalf("schedules did not alternate: %d to %q then %d to %q", len(b1), h1, len(b2), h2)
	}
	busy := func(h string) int {
		if h == hostKey(&model.Event{Target: model.Target{Type: model.TargetHTTP, URL: "http://slow.example"}}) {
			return 0
		}
		return 1 << 30
	}
	for range 5 {
		b, h := q.take(10, one, busy)
		if len(b) == 0 || b[0].Event.ScheduleID != "s2" {
			t.Fatalf("took %d events to %q with the slow host busy, want s2's", len(b), h)
		}
	}
	if b, _ := q.take(10, one, func(string) int { return 3 }); len(b) != 3 {
		t.Fatalf("batch of %d with 3 free slots", len(b))
	}
}

// filter drops events and the queues it empties.
func TestFairQueueFilter(t *testing.T) {
	q := newFairQueue()
	q.push(fairItems("a", "s", "http://a.example", 10)...)
	q.push(fairItems("b", "s", "http://b.example", 10)...)
	q.filter(func(it throttle.Item) bool { return it.Event.TenantID == "b" })
	if q.Len() != 10 || len(q.active) != 1 || q.tenants["a"] != nil {
		t.Fatalf("after filter: Len %d, %d active tenants", q.Len(), len(q.active))
	}
	if got := len(q.drain()); got != 10 {
		t.Fatalf("drain returned %d, want 10", got)
	}
}

// AIMD: congestion halves a host's limit once per delivery, success adds
// one per event back up to the cap, and a recovered idle host is
// forgotten.
func TestHostLimitsAIMD(t *testing.T) {
	l := newHostLimits(64, 500)
	const h = "http x:1"
	timeout := delivery.Result{Err: fmt.Errorf("post: %w", context.DeadlineExceeded)}
	for _, want := range []int{32, 16, 8, 4, 2, 1, 1} {
		l.acquire(h, 2)
		l.done(h, 2, []delivery.Result{timeout, timeout})
		if got := l.limit(h); got != want {
			t.Fatalf("limit %d after a timeout, want %d", got, want)
		}
	}
	if f := l.free(h); f != 1 {
		t.Fatalf("free %d at limit 1, want 1", f)
	}
	for _, r := range []delivery.Result{
		{Err: errors.New("status 503"), StatusCode: 503},
		{Err: fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})},
	} {
		before := l.limit(h)
		l.acquire(h, 1)
		l.done(h, 1, []delivery.Result{{}, {}, {}})
		if got := l.limit(h); got != before+3 {
			t.Fatalf("limit %d after 3 successes from %d", got, before)
		}
		l.acquire(h, 1)
		l.done(h, 1, []delivery.Result{r})
		if got := l.limit(h); got != (before+3)/2 {
			t.Fatalf("limit %d after %v at %d, want it halved", got, r.Err, before+3)
		}
		l.acquire(h, 1)
		l.done(h, 1, []delivery.Result{{}, {}, {}, {}, {}, {}})
		l.acquire(h, 1)
		l.done(h, 1, []delivery.Result{r})
	}
	// A 4xx or a permanent refusal says nothing of the host's load.
	l.acquire(h, 1)
	l.done(h, 1, []delivery.Result{{Err: errors.New("400"), StatusCode: 400}, {Err: errors.New("ssrf"), Permanent: true}})
	if got := l.limit(h); got != 4 {
		t.Fatalf("limit %d after a 400, want it unchanged at 4", got)
	}
	for l.limit(h) < 64 {
		l.acquire(h, 10)
		l.done(h, 10, make([]delivery.Result, 10))
	}
	if len(l.hosts) != 0 {
		t.Fatalf("a recovered idle host is still tracked")
	}
}

type tenantFunc func(id string) (*model.Tenant, error)

func (f tenantFunc) TenantGet(_ context.Context, id string) (*model.Tenant, error) { return f(id) }

// Weights are read through Deps.Tenants, cached for the TTL, and default
// when the tenant cannot be read; a weight lookup does not wait for the
// store.
func TestTenantCacheWeight(t *testing.T) {
	reads := 0
	src := tenantFunc(func(id string) (*model.Tenant, error) {
		reads++
		if id == "heavy" {
			return &model.Tenant{ID: id, Weight: 5}, nil
		}
		return nil, model.ErrNotFound
	})
	now := time.Unix(1000, 0)
	var pending []func(context.Context)
	c := &tenantCache{src: src, def: 2, ttl: time.Minute, now: func() time.Time { return now }, m: map[string]*tenantEntry{},
		spawn: func(f func(context.Context)) { pending = append(pending, f) }}
	run := func() {
		for _, f := range pending {
			f(context.Background())
		}
		pending = nil
	}
	if w := c.weight("heavy"); w != 2 {
		t.Fatalf("first lookup %d, want the default 2 while it loads", w)
	}
	c.weight("heavy")
	if len(pending) != 1 {
		t.Fatalf("%d loads started for one tenant, want 1", len(pending))
	}
	run()
	if w := c.weight("heavy"); w != 5 {
		t.Fatalf("weight %d after the load, want 5", w)
	}
	c.weight("missing")
	run()
	if w := c.weight("missing"); w != 2 {
		t.Fatalf("unknown tenant weight %d, want the default 2", w)
	}
	if reads != 2 || len(pending) != 0 {
		t.Fatalf("%d reads, %d pending within the TTL, want 2 and 0", reads, len(pending))
	}
	now = now.Add(2 * time.Minute)
	if w := c.weight("heavy"); w != 5 || len(pending) != 1 {
		t.Fatalf("stale lookup: weight %d with %d loads, want the last known 5 and a reload", w, len(pending))
	}
}

// A rule is read before the first delivery, kept while the tenant is
// unchanged, and the last known one serves when the store fails; a tenant
// never read fails closed.
func TestTenantCacheRule(t *testing.T) {
	var fail error
	version := int64(1)
	src := tenantFunc(func(id string) (*model.Tenant, error) {
		if fail != nil {
			return nil, fail
		}
		return &model.Tenant{ID: id, Version: version, Targets: &model.TenantTargets{CIDRs: []string{"10.0.0.0/8"}}}, nil
	})
	now := time.Unix(1000, 0)
	c := &tenantCache{src: src, def: 1, ttl: time.Minute, now: func() time.Time { return now }, m: map[string]*tenantEntry{},
		spawn: func(f func(context.Context)) { f(context.Background()) }}
	ctx := context.Background()
	r1, err := c.rule(ctx, "a")
	if err != nil || r1 == nil {
		t.Fatalf("rule %v, %v; want the tenant's", r1, err)
	}
	if r1.AllowsDial("x.example", netip.MustParseAddr("127.0.0.1")) || !r1.AllowsDial("x.example", netip.MustParseAddr("10.1.2.3")) {
		t.Fatalf("rule is not the tenant's 10.0.0.0/8")
	}
	now = now.Add(2 * time.Minute)
	if r2, _ := c.rule(ctx, "a"); r2 != r1 {
		t.Fatalf("unchanged tenant got a new rule")
	}
	now, version = now.Add(2*time.Minute), 2
	if r3, _ := c.rule(ctx, "a"); r3 == r1 {
		t.Fatalf("changed tenant kept its old rule")
	}
	now, fail = now.Add(2*time.Minute), errors.New("store down")
	if r4, err := c.rule(ctx, "a"); err != nil || r4 == nil {
		t.Fatalf("store down: %v, %v; want the last known rule", r4, err)
	}
	if _, err := c.rule(ctx, "b"); err == nil {
		t.Fatalf("store down, tenant never read: no error")
	}
}

// An http_batch host's slots are deliveries: one of any size up to the
// batch takes one, congestion halves them and a successful one gives one
// back; an http host to the same address still counts events.
func TestHostLimitsBatchHostCountsDeliveries(t *testing.T) {
	l := newHostLimits(4, 100)
	hb := hostKey(&model.Event{Target: model.Target{Type: model.TargetHTTPBatch, URL: "http://x.example:1/batch"}})
	hs := hostKey(&model.Event{Target: model.Target{Type: model.TargetHTTP, URL: "http://x.example:1/one"}})
	if hb == hs {
		t.Fatalf("http and http_batch share the host key %q", hb)
	}
	if f := l.free(hb); f != 400 {
		t.Fatalf("free %d for an idle batch host, want 4 deliveries of 100", f)
	}
	l.acquire(hb, 100)
	l.acquire(hb, 3)
	if f := l.free(hb); f != 200 {
		t.Fatalf("free %d with two deliveries out, want 200", f)
	}
	timeout := delivery.Result{Err: fmt.Errorf("post: %w", context.DeadlineExceeded)}
	l.done(hb, 3, []delivery.Result{timeout, timeout, timeout})
	if got, f := l.limit(hb), l.free(hb); got != 2 || f != 100 {
		t.Fatalf("after a timeout: limit %d, free %d; want 2 and 100", got, f)
	}
	ok := make([]delivery.Result, 100)
	l.done(hb, 100, ok)
	if got, f := l.limit(hb), l.free(hb); got != 3 || f != 300 {
		t.Fatalf("after a delivered batch: limit %d, free %d; want 3 and 300", got, f)
	}
	l.acquire(hs, 3)
	if f := l.free(hs); f != 1 {
		t.Fatalf("free %d for the http host with 3 events out, want 1", f)
	}
}

// A batch to an http_batch host goes on with the tenant's next schedules in
// turn while their heads go to the same host, up to the limit; it stops at
// a schedule whose head goes elsewhere (which keeps its turn), and a batch
// to an http host stays within one schedule.
func TestFairQueueBatchHostSpansSchedules(t *testing.T) {
	batchItems := func(schedule, url string, n int) []throttle.Item {
		its := fairItems("a", schedule, url, n)
		for _, it := range its {
			it.Event.Target.Type = model.TargetHTTPBatch
		}
		return its
	}
	one := func(string) int { return 1 }
	q := newFairQueue()
	q.push(batchItems("s1", "http://c.example/a", 3)...)
	q.push(batchItems("s2", "http://c.example/b", 4)...)
	q.push(fairItems("a", "s3", "http://c.example/a", 5)...)
	q.push(batchItems("s4", "http://c.example/a", 6)...)
	count := func(b []throttle.Item) map[string]int {
		m := map[string]int{}
		for _, it := range b {
			m[it.Event.ScheduleID]++
		}
		return m
	}
	b, h := q.take(100, one, unlimited)
	if got := count(b); len(b) != 7 || got["s1"] != 3 || got["s2"] != 4 || h != hostKey(b[0].Event) {
		t.Fatalf("first batch %v to %q, want s1's 3 and s2's 4 (s3's http head stops it)", got, h)
	}
	if b, _ := q.take(100, one, unlimited); len(b) != 5 || b[0].Event.ScheduleID != "s3" {
		t.Fatalf("second batch %v, want s3's 5 alone (http)", count(b))
	}
	q.push(batchItems("s5", "http://c.example/c", 10)...)
	if b, _ := q.take(8, one, unlimited); len(b) != 8 || count(b)["s4"] != 6 || count(b)["s5"] != 2 {
		t.Fatalf("third batch %v, want s4's 6 and s5's first 2 (limit 8)", count(b))
	}
	if b, _ := q.take(100, one, unlimited); len(b) != 8 || count(b)["s5"] != 8 || q.Len() != 0 {
		t.Fatalf("last batch %v with %d left, want s5's 8 and none", count(b), q.Len())
	}
}

// A tenant of many one-offs to one host gives them many to a take, in the
// order they came; a busy host is passed over for another host's event;
// the ring stays in order across the holes the finished schedules leave.
func TestFairQueueOneOffs(t *testing.T) {
	q := newFairQueue()
	const n = 1000
	for i := range n {
		q.push(fairItems("a", fmt.Sprintf("s%04d", i), "http://a.example", 1)...)
	}
	q.push(fairItems("a", "other", "http://b.example", 1)...)
	busyA := func(h string) int {
		if h == "http a.example" {
			return 0
		}
		return 1 << 30
	}
	batch, host := q.take(50, func(string) int { return 1 }, busyA)
	if len(batch) != 1 || batch[0].Event.ScheduleID != "other" || host != "http b.example" {
		t.Fatalf("with a.example busy took %d events to %s, want the one to b.example", len(batch), host)
	}
	if b, _ := q.take(50, func(string) int { return 1 }, busyA); len(b) != 0 {
		t.Fatalf("every host busy, took %d events", len(b))
	}
	next := 0
	for q.Len() > 0 {
		batch, host := q.take(7, func(string) int { return 1 }, unlimited)
		if len(batch) == 0 || host != "http a.example" {
			t.Fatalf("took %d events to %q with %d waiting", len(batch), host, q.Len())
		}
		if len(batch) != min(7, n-next) {
			t.Fatalf("took %d one-offs to one host, want %d in one take", len(batch), min(7, n-next))
		}
		for _, it := range batch {
			if want := fmt.Sprintf("s%04d", next); it.Event.ScheduleID != want {
				t.Fatalf("took %s, want %s: the ring lost its order", it.Event.ScheduleID, want)
			}
			next++
		}
	}
	if next != n || len(q.tenants) != 0 {
		t.Errorf("took %d of %d; %d tenant queues left", next, n, len(q.tenants))
	}
}
