package throttle_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// limitsHarness runs a throttle over one policy whose polls and
// reconciliations are hours apart: only the limit timer can wake the
// bucket at a boundary. Time is the bubble's (2000-01-01 00:00 UTC on).
type limitsHarness struct {
	st  *throttletest.MemStore
	thr *throttle.Throttle
	mu  sync.Mutex
	got []throttle.Item
	// limit and source are the last the metrics were told.
	limit  int
	source string
}

func (h *limitsHarness) TokenTimeouts(string, int) {}
func (h *limitsHarness) TokensInUse(string, int)   {}
func (h *limitsHarness) TokensWaiting(string, int) {}
func (h *limitsHarness) Dead(string, int)          {}
func (h *limitsHarness) Retried(string, int)       {}
func (h *limitsHarness) PolicyGone(string)         {}
func (h *limitsHarness) EffectiveLimit(_ string, n int) {
	h.mu.Lock()
	h.limit = n
	h.mu.Unlock()
}
func (h *limitsHarness) LimitSource(_, s string) {
	h.mu.Lock()
	h.source = s
	h.mu.Unlock()
}

// exported is the limit and source the metrics were last told.
func (h *limitsHarness) exported() (int, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limit, h.source
}

func newLimitsHarness(t *testing.T, p *model.Policy) *limitsHarness {
	t.Helper()
	h := &limitsHarness{st: throttletest.NewMemStore()}
	if err := h.st.PolicyCreate(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	thr, err := throttle.New(throttle.Config{PollInterval: 7 * time.Hour, ReconcileInterval: 8 * time.Hour},
		throttle.Deps{Store: h.st, Shards: oneShard{fence: 1}, Caps: calendar.PolicyCaps{}, Metrics: h})
	if err != nil {
		t.Fatal(err)
	}
	for s := range thr.Config().Shards {
		thr.MarkSettled(s, 1)
	}
	runThrottle(t, thr, func(items []throttle.Item) {
		h.mu.Lock()
		h.got = append(h.got, items...)
		h.mu.Unlock()
	})
	h.thr = thr
	return h
}

func (h *limitsHarness) dispatched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

// until sleeps (bubble time) up to at and lets everything settle.
func until(at time.Time) {
	time.Sleep(time.Until(at))
	synctest.Wait()
}

// A maintenance window at 01:00-02:00 Paris time (00:00-01:00 UTC in
// January) lets nothing out; at 02:00 Paris the next rule's 3 apply, at
// that instant and not at the next poll.
func TestLimitScheduleSwitchesAtItsBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		all := []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 10, TokenTimeout: 24 * time.Hour, Version: 1,
			Limits: []model.LimitRule{
				{When: model.LimitWhen{Days: all, From: "01:00", To: "02:00", Timezone: "Europe/Paris"}, MaxInFlight: 0},
				{When: model.LimitWhen{Days: all, From: "02:00", Timezone: "Europe/Paris"}, MaxInFlight: 3},
			}}
		h := newLimitsHarness(t, p)
		h.thr.Enqueue(scheduledEvents(t, h.st, "p", "s", 10, 1)...)
		until(start.Add(5 * time.Second))
		if n := h.dispatched(); n != 0 {
			t.Fatalf("%d events out in the maintenance window", n)
		}
		if lim, src, ok := h.thr.Effective("p"); !ok || lim != 0 || src != "limits[0]" {
			t.Fatalf("Effective = %d %q %v; want 0 limits[0]", lim, src, ok)
		}
		boundary := time.Date(2000, 1, 1, 1, 0, 0, 0, time.UTC) // 02:00 in Paris
		until(boundary.Add(-time.Millisecond))
		if n := h.dispatched(); n != 0 {
			t.Fatalf("%d events out just before the boundary", n)
		}
		until(boundary)
		if n := h.dispatched(); n != 3 {
			t.Fatalf("%d events out at the boundary; want 3 (limits[1])", n)
		}
		if lim, src, _ := h.thr.Effective("p"); lim != 3 || src != "limits[1]" {
			t.Fatalf("Effective = %d %q; want 3 limits[1]", lim, src)
		}
		if lim, src := h.exported(); lim != 3 || src != "limits[1]" {
			t.Fatalf("metrics say %d %q; want 3 limits[1]", lim, src)
		}
		// A release hands its token on: still 3 out.
		h.mu.Lock()
		id := h.got[0].Event.ID
		h.mu.Unlock()
		e, err := h.st.EventGetByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := h.thr.Release(context.Background(), e, time.Now()); !ok || err != nil {
			t.Fatalf("release = %v, %v", ok, err)
		}
		synctest.Wait()
		if n := h.dispatched(); n != 4 {
			t.Fatalf("%d dispatched after a release; want 4", n)
		}
		if got, _ := h.st.PolicyGetByID(context.Background(), "p"); got.InUse != 3 {
			t.Fatalf("InUse = %d; want 3", got.InUse)
		}
	})
}

// A hold of 1 until 00:10 lets one event out; at 00:10 it ends by itself
// and the policy's own 5 apply.
func TestHoldExpiresByItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		until10 := start.Add(10 * time.Minute)
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 5, TokenTimeout: 24 * time.Hour, Version: 1,
			Hold: &model.PolicyHold{Until: until10, MaxInFlight: 1, SetAt: start}}
		h := newLimitsHarness(t, p)
		h.thr.Enqueue(scheduledEvents(t, h.st, "p", "s", 10, 1)...)
		until(start.Add(5 * time.Second))
		if n := h.dispatched(); n != 1 {
			t.Fatalf("%d events out under a hold of 1", n)
		}
		if lim, src, _ := h.thr.Effective("p"); lim != 1 || src != model.LimitSourceHold {
			t.Fatalf("Effective = %d %q; want 1 hold", lim, src)
		}
		until(until10.Add(-time.Millisecond))
		if n := h.dispatched(); n != 1 {
			t.Fatalf("%d events out just before the hold ends", n)
		}
		until(until10)
		if n := h.dispatched(); n != 5 {
			t.Fatalf("%d events out when the hold ended; want 5", n)
		}
		if lim, src, _ := h.thr.Effective("p"); lim != 5 || src != model.LimitSourcePolicy {
			t.Fatalf("Effective = %d %q; want 5 policy", lim, src)
		}
		if lim, src := h.exported(); lim != 5 || src != model.LimitSourcePolicy {
			t.Fatalf("metrics say %d %q; want 5 policy", lim, src)
		}
	})
}

// A rule's rate lowers the policy's: 2 a second during business hours.
func TestLimitScheduleRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 100, AutoRelease: true, TokenTimeout: 24 * time.Hour, Version: 1,
			Limits: []model.LimitRule{{When: model.LimitWhen{Days: []string{"sat"}, Timezone: "UTC"}, MaxInFlight: 100, RatePerSecond: 2}}}
		h := newLimitsHarness(t, p)
		h.thr.Enqueue(scheduledEvents(t, h.st, "p", "s", 50, 1)...)
		until(start.Add(10*time.Second + time.Millisecond))
		// A burst of 2, then 2 a second for 10 s.
		if n := h.dispatched(); n < 20 || n > 23 {
			t.Fatalf("%d events out in 10 s at 2/s", n)
		}
	})
}

// On the day the clocks go forward in Paris (2000-03-26: 02:00 CET becomes
// 03:00 CEST at 01:00 UTC) a rule from 02:30 starts at the transition, the
// first instant whose local time is past 02:30, and one ending at 05:00
// ends at 03:00 UTC, not an hour later.
func TestLimitScheduleSwitchesOnTheDSTDay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
		p := &model.Policy{ID: "p", TenantID: "t1", Name: "p", MaxInFlight: 10, AutoRelease: true, TokenTimeout: time.Hour, Version: 1,
			Limits: []model.LimitRule{{When: model.LimitWhen{Days: all, From: "02:30", To: "05:00", Timezone: "Europe/Paris"}, MaxInFlight: 0}}}
		h := newLimitsHarness(t, p)
		h.thr.Enqueue(scheduledEvents(t, h.st, "p", "s", 1, 1)...)
		transition := time.Date(2000, 3, 26, 1, 0, 0, 0, time.UTC)
		until(transition.Add(-time.Millisecond))
		if lim, src, _ := h.thr.Effective("p"); lim != 10 || src != model.LimitSourcePolicy {
			t.Fatalf("01:59:59 CET: Effective = %d %q", lim, src)
		}
		until(transition)
		if lim, src, _ := h.thr.Effective("p"); lim != 0 || src != "limits[0]" {
			t.Fatalf("03:00 CEST: Effective = %d %q", lim, src)
		}
		before := h.dispatched()
		h.thr.Enqueue(scheduledEvents(t, h.st, "p", "late", 3, 1)...)
		end := time.Date(2000, 3, 26, 3, 0, 0, 0, time.UTC) // 05:00 CEST
		until(end.Add(-time.Millisecond))
		if n := h.dispatched(); n != before {
			t.Fatalf("%d events out in the window", n-before)
		}
		until(end)
		if n := h.dispatched(); n != before+3 {
			t.Fatalf("%d events out at 05:00 CEST; want 3", n-before)
		}
	})
}
