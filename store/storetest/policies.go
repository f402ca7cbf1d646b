package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var policyTests = []namedTest{
	{"LimitsAndHold", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "lh1", 20)
		p.Limits = []model.LimitRule{
			{When: model.LimitWhen{Days: []string{"mon", "fri"}, From: "09:00", To: "17:00", Timezone: "Europe/Paris"}, MaxInFlight: 5, RatePerSecond: 2.5},
			{When: model.LimitWhen{CalendarID: "cal_1"}, MaxInFlight: 0},
		}
		createPolicy(t, d, p)
		got, err := d.PolicyGetByID(ctx, "lh1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, fmt.Sprint(got.Limits), fmt.Sprint(p.Limits), "Limits")
		if got.Hold != nil {
			t.Fatalf("Hold = %+v before any", got.Hold)
		}
		h := &model.PolicyHold{Until: base.Add(time.Hour), MaxInFlight: 0, SetAt: base, By: "sck_ab"}
		requireNoError(t, d.PolicySetHold(ctx, "A", "lh1", h), "PolicySetHold")
		got, err = d.PolicyGet(ctx, "A", "lh1")
		requireNoError(t, err, "PolicyGet")
		if got.Hold == nil || !got.Hold.Until.Equal(h.Until) || !got.Hold.SetAt.Equal(base) || got.Hold.MaxInFlight != 0 || got.Hold.By != "sck_ab" {
			t.Fatalf("Hold = %+v, want %+v", got.Hold, h)
		}
		requireEqual(t, got.Version, int64(1), "Version after PolicySetHold")
		requireIs(t, d.PolicySetHold(ctx, "B", "lh1", h), model.ErrNotFound, "PolicySetHold of another tenant")
		requireIs(t, d.PolicySetHold(ctx, "A", "nope", h), model.ErrNotFound, "PolicySetHold unknown")
		// An update replaces the limits and keeps the hold.
		upd := *got
		upd.Limits = upd.Limits[:1]
		requireNoError(t, d.PolicyUpdate(ctx, &upd, 1), "PolicyUpdate")
		got, err = d.PolicyGetByID(ctx, "lh1")
		requireNoError(t, err, "PolicyGetByID after update")
		requireEqual(t, len(got.Limits), 1, "Limits after update")
		if got.Hold == nil {
			t.Fatal("the update dropped the hold")
		}
		requireNoError(t, d.PolicySetHold(ctx, "A", "lh1", nil), "PolicySetHold nil")
		got, err = d.PolicyGetByID(ctx, "lh1")
		requireNoError(t, err, "PolicyGetByID after clearing")
		if got.Hold != nil {
			t.Fatalf("Hold = %+v after clearing", got.Hold)
		}
		// A consumer key keeps its policy.
		requireNoError(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "ck1", TenantID: "A", Hash: "hck1", Prefix: "sck_", PolicyID: "lh1", CreatedAt: base}), "APIKeyCreate")
		k, err := d.APIKeyGetByHash(ctx, "hck1")
		requireNoError(t, err, "APIKeyGetByHash")
		requireEqual(t, k.PolicyID, "lh1", "consumer key's PolicyID")
	}},
	{"HoldTime", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "h1", 10))
		requireNoError(t, d.PolicySetHoldTime(ctx, "h1", 1500*time.Millisecond), "PolicySetHoldTime")
		got, err := d.PolicyGet(ctx, "A", "h1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.HoldTime, 1500*time.Millisecond, "HoldTime")
		requireEqual(t, got.Version, int64(1), "Version after PolicySetHoldTime")
		upd := *got
		upd.Name, upd.HoldTime = "renamed", 0
		requireNoError(t, d.PolicyUpdate(ctx, &upd, 1), "PolicyUpdate")
		got, err = d.PolicyGetByID(ctx, "h1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.HoldTime, 1500*time.Millisecond, "HoldTime kept by an update")
		requireIs(t, d.PolicySetHoldTime(ctx, "nope", time.Second), model.ErrNotFound, "PolicySetHoldTime unknown")
	}},
	{"AdaptiveLimit", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "ad1", 50)
		p.Adaptive = &model.AdaptiveLimit{Min: 5, Max: 50}
		createPolicy(t, d, p)
		got, err := d.PolicyGetByID(ctx, "ad1")
		requireNoError(t, err, "PolicyGetByID")
		if got.Adaptive == nil || *got.Adaptive != (model.AdaptiveLimit{Min: 5, Max: 50}) {
			t.Fatalf("Adaptive = %+v, want {5 50}", got.Adaptive)
		}
		requireEqual(t, got.EffectiveLimit, 0, "EffectiveLimit before the owner set one")

		at := base.Add(time.Minute)
		requireNoError(t, d.PolicySetLimit(ctx, "ad1", 35, "overloaded", at), "PolicySetLimit")
		got, err = d.PolicyGet(ctx, "A", "ad1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.EffectiveLimit, 35, "EffectiveLimit")
		requireEqual(t, got.LimitReason, "overloaded", "LimitReason")
		requireEqual(t, got.LimitChangedAt.Equal(at), true, "LimitChangedAt")
		requireEqual(t, got.Version, int64(1), "Version after PolicySetLimit")
		requireIs(t, d.PolicySetLimit(ctx, "nope", 1, "start", at), model.ErrNotFound, "PolicySetLimit unknown")

		// The store enforces the ceiling, not the effective limit.
		n, err := d.PolicyAcquireTokens(ctx, "ad1", 50)
		requireNoError(t, err, "PolicyAcquireTokens")
		requireEqual(t, n, 50, "tokens acquired under the ceiling")

		// An update removes adaptive and its state.
		upd := *got
		upd.Adaptive, upd.EffectiveLimit, upd.LimitReason, upd.LimitChangedAt = nil, 0, "", time.Time{}
		requireNoError(t, d.PolicyUpdate(ctx, &upd, 1), "PolicyUpdate")
		got, err = d.PolicyGetByID(ctx, "ad1")
		requireNoError(t, err, "PolicyGetByID after update")
		if got.Adaptive != nil || got.EffectiveLimit != 0 || got.LimitReason != "" || !got.LimitChangedAt.IsZero() {
			t.Fatalf("after removing adaptive: %+v", got)
		}
		requireEqual(t, got.InUse, 50, "InUse kept by the update")

		// A policy without adaptive reads back without it.
		createPolicy(t, d, newPolicy("A", "fixed", 3))
		got, err = d.PolicyGetByID(ctx, "fixed")
		requireNoError(t, err, "PolicyGetByID fixed")
		if got.Adaptive != nil || got.EffectiveLimit != 0 {
			t.Fatalf("a fixed policy reads back adaptive: %+v", got)
		}
	}},
	{"CreateGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "p1", 5)
		p.AutoRelease = true
		createPolicy(t, d, p)

		got, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.Name, p.Name, "Name")
		requireEqual(t, got.MaxInFlight, 5, "MaxInFlight")
		requireEqual(t, got.TokenTimeout, time.Minute, "TokenTimeout")
		requireEqual(t, got.AutoRelease, true, "AutoRelease")
		requireEqual(t, got.InUse, 0, "InUse")
		requireEqual(t, got.Version, int64(1), "Version")

		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.TenantID, "A", "PolicyGetByID TenantID")

		_, err = d.PolicyGet(ctx, "B", "p1")
		requireIs(t, err, model.ErrNotFound, "PolicyGet of another tenant")
		_, err = d.PolicyGetByID(ctx, "nope")
		requireIs(t, err, model.ErrNotFound, "PolicyGetByID unknown")

		requireIs(t, d.PolicyCreate(ctx, newPolicy("B", "p1", 1)), model.ErrConflict, "same id")
		sameName := newPolicy("A", "p2", 1)
		sameName.Name = p.Name
		requireIs(t, d.PolicyCreate(ctx, sameName), model.ErrConflict, "same (tenant, name)")
		_, err = d.PolicyGetByID(ctx, "p2")
		requireIs(t, err, model.ErrNotFound, "rejected policy must not be stored")

		otherTenant := newPolicy("B", "p3", 1)
		otherTenant.Name = p.Name
		createPolicy(t, d, otherTenant)
	}},
	{"ConcurrencyKey", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "p1", 2)
		p.ConcurrencyKey, p.MaxInFlightTotal = "/customerId", 3
		createPolicy(t, d, p)
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.ConcurrencyKey, "/customerId", "ConcurrencyKey")
		requireEqual(t, got.MaxInFlightTotal, 3, "MaxInFlightTotal")

		// InUse is the total across key values: bounded by MaxInFlightTotal,
		// not by the per-key MaxInFlight.
		n, err := d.PolicyAcquireTokens(ctx, "p1", 10)
		requireNoError(t, err, "PolicyAcquireTokens")
		requireEqual(t, n, 3, "acquired under MaxInFlightTotal")
		n, err = d.PolicyAcquireTokens(ctx, "p1", 1)
		requireNoError(t, err, "PolicyAcquireTokens at the total")
		requireEqual(t, n, 0, "acquired past MaxInFlightTotal")

		// Without a total, InUse is not bounded by MaxInFlight.
		upd := *got
		upd.MaxInFlightTotal = 0
		upd.Version = got.Version + 1
		requireNoError(t, d.PolicyUpdate(ctx, &upd, got.Version), "PolicyUpdate dropping the total")
		n, err = d.PolicyAcquireTokens(ctx, "p1", 5)
		requireNoError(t, err, "PolicyAcquireTokens without a total")
		requireEqual(t, n, 5, "acquired without a total")

		// Dropping the key brings back the per-policy bound.
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 8, "InUse")
		plain := *got
		plain.ConcurrencyKey = ""
		plain.Version = got.Version + 1
		requireNoError(t, d.PolicyUpdate(ctx, &plain, got.Version), "PolicyUpdate dropping the key")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.ConcurrencyKey, "", "ConcurrencyKey after update")
		n, err = d.PolicyAcquireTokens(ctx, "p1", 1)
		requireNoError(t, err, "PolicyAcquireTokens unkeyed")
		requireEqual(t, n, 0, "acquired past MaxInFlight")
	}},
	{"Labels", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "p1", 2)
		p.Labels = map[string]string{"team": "billing", "app.example.com/tier": "", "a.b": "c.d"}
		createPolicy(t, d, p)
		got, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, fmt.Sprint(got.Labels), fmt.Sprint(p.Labels), "Labels")

		// An update replaces the labels whole; none left reads as none.
		for _, labels := range []map[string]string{{"team": "ops"}, nil} {
			upd := *got
			upd.Labels = labels
			upd.Version = got.Version + 1
			requireNoError(t, d.PolicyUpdate(ctx, &upd, got.Version), "PolicyUpdate")
			got, err = d.PolicyGet(ctx, "A", "p1")
			requireNoError(t, err, "PolicyGet")
			requireEqual(t, fmt.Sprint(got.Labels), fmt.Sprint(labels), "Labels after update")
			requireEqual(t, len(got.Labels), len(labels), "Labels count after update")
		}
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, p := range []*model.Policy{newPolicy("A", "p3", 1), newPolicy("A", "p1", 1), newPolicy("B", "p2", 1)} {
			createPolicy(t, d, p)
		}
		got, err := d.PolicyList(ctx, "A")
		requireNoError(t, err, "PolicyList A")
		requireIDs(t, policyIDs(got), []string{"p1", "p3"}, "PolicyList A")
		got, err = d.PolicyList(ctx, "B")
		requireNoError(t, err, "PolicyList B")
		requireIDs(t, policyIDs(got), []string{"p2"}, "PolicyList B")
		got, err = d.PolicyListAll(ctx)
		requireNoError(t, err, "PolicyListAll")
		requireSameIDs(t, policyIDs(got), []string{"p1", "p2", "p3"}, "PolicyListAll")
	}},
	{"Update", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		n, err := d.PolicyAcquireTokens(ctx, "p1", 2)
		requireNoError(t, err, "PolicyAcquireTokens")
		requireEqual(t, n, 2, "acquired")
		cur, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")

		upd := newPolicy("A", "p1", 10)
		upd.Name = "renamed"
		upd.TokenTimeout = 2 * time.Minute
		upd.AutoRelease = true
		upd.Version = cur.Version + 1
		upd.UpdatedAt = at(time.Minute)
		requireNoError(t, d.PolicyUpdate(ctx, upd, cur.Version), "PolicyUpdate")

		got, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.Name, "renamed", "Name")
		requireEqual(t, got.MaxInFlight, 10, "MaxInFlight")
		requireEqual(t, got.TokenTimeout, 2*time.Minute, "TokenTimeout")
		requireEqual(t, got.AutoRelease, true, "AutoRelease")
		requireEqual(t, got.InUse, 2, "InUse kept")
		requireEqual(t, got.Version, cur.Version+1, "Version")

		stale := newPolicy("A", "p1", 1)
		stale.Version = cur.Version + 1
		requireIs(t, d.PolicyUpdate(ctx, stale, cur.Version), model.ErrConflict, "PolicyUpdate with a stale version")
		other := newPolicy("B", "p1", 1)
		other.Version = got.Version + 1
		requireIs(t, d.PolicyUpdate(ctx, other, got.Version), model.ErrNotFound, "PolicyUpdate by another tenant")
		missing := newPolicy("A", "nope", 1)
		requireIs(t, d.PolicyUpdate(ctx, missing, 1), model.ErrNotFound, "PolicyUpdate unknown")

		got, err = d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.MaxInFlight, 10, "MaxInFlight after rejected updates")
	}},
	{"Rate", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		p := newPolicy("A", "p1", 5)
		p.RatePerSecond, p.Burst = 2.5, 4
		createPolicy(t, d, p)
		createPolicy(t, d, newPolicy("A", "p2", 5))

		got, err := d.PolicyGet(ctx, "A", "p1")
		requireNoError(t, err, "PolicyGet")
		requireEqual(t, got.RatePerSecond, 2.5, "RatePerSecond")
		requireEqual(t, got.Burst, 4, "Burst")
		got, err = d.PolicyGet(ctx, "A", "p2")
		requireNoError(t, err, "PolicyGet without a rate")
		requireEqual(t, got.RatePerSecond, 0.0, "RatePerSecond of a policy without a rate")
		requireEqual(t, got.Burst, 0, "Burst of a policy without a rate")

		all, err := d.PolicyListAll(ctx)
		requireNoError(t, err, "PolicyListAll")
		for _, q := range all {
			if q.ID == "p1" && (q.RatePerSecond != 2.5 || q.Burst != 4) {
				t.Fatalf("PolicyListAll: rate %v burst %d, want 2.5 and 4", q.RatePerSecond, q.Burst)
			}
		}

		// A token taken meanwhile must not hide the rate change.
		_, err = d.PolicyAcquireTokens(ctx, "p1", 1)
		requireNoError(t, err, "PolicyAcquireTokens")
		upd := *p
		upd.RatePerSecond, upd.Burst = 0.125, 0
		upd.Version = 2
		requireNoError(t, d.PolicyUpdate(ctx, &upd, 1), "PolicyUpdate of the rate")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.RatePerSecond, 0.125, "RatePerSecond after update")
		requireEqual(t, got.Burst, 0, "Burst after update")
		requireEqual(t, got.InUse, 1, "InUse kept")

		upd.RatePerSecond = 0
		upd.Version = 3
		requireNoError(t, d.PolicyUpdate(ctx, &upd, 2), "PolicyUpdate removing the rate")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.RatePerSecond, 0.0, "RatePerSecond after removal")
	}},
	{"Delete", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		requireIs(t, d.PolicyDelete(ctx, "B", "p1"), model.ErrNotFound, "PolicyDelete by another tenant")
		_, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "policy survives another tenant's delete")
		requireNoError(t, d.PolicyDelete(ctx, "A", "p1"), "PolicyDelete")
		_, err = d.PolicyGetByID(ctx, "p1")
		requireIs(t, err, model.ErrNotFound, "PolicyGetByID after delete")
		requireIs(t, d.PolicyDelete(ctx, "A", "p1"), model.ErrNotFound, "PolicyDelete twice")
		// The name is free again.
		createPolicy(t, d, newPolicy("A", "p1", 5))
	}},
	{"AcquireRelease", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		for _, step := range []struct {
			want, got int
		}{{3, 3}, {3, 2}, {1, 0}} {
			n, err := d.PolicyAcquireTokens(ctx, "p1", step.want)
			requireNoError(t, err, "PolicyAcquireTokens")
			requireEqual(t, n, step.got, fmt.Sprintf("PolicyAcquireTokens(%d)", step.want))
		}
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 5, "InUse at the limit")

		requireNoError(t, d.PolicyReleaseTokens(ctx, "p1", 2, 1), "PolicyReleaseTokens")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 3, "InUse after release")
		requireEqual(t, got.TimedOut, int64(1), "TimedOut")

		requireNoError(t, d.PolicyReleaseTokens(ctx, "p1", 10, 2), "PolicyReleaseTokens too many")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 0, "InUse never below zero")
		requireEqual(t, got.TimedOut, int64(3), "TimedOut accumulates")

		_, err = d.PolicyAcquireTokens(ctx, "nope", 1)
		requireIs(t, err, model.ErrNotFound, "PolicyAcquireTokens unknown")
		requireIs(t, d.PolicyReleaseTokens(ctx, "nope", 1, 0), model.ErrNotFound, "PolicyReleaseTokens unknown")
	}},
	{"AcquireConcurrentAllAtOnce", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		const maxInFlight, goroutines = 5, 50
		createPolicy(t, d, newPolicy("A", "p1", maxInFlight))

		var granted atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				<-start
				n, err := d.PolicyAcquireTokens(ctx, "p1", 1)
				if err != nil {
					t.Errorf("acquirer %d: %v", g, err)
					return
				}
				granted.Add(int64(n))
			})
		}
		close(start)
		wg.Wait()
		requireEqual(t, granted.Load(), int64(maxInFlight), "tokens granted when all try at once")
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, maxInFlight, "InUse")
	}},
	{"AcquireConcurrentNeverExceeds", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		const maxInFlight, goroutines, attempts = 5, 50, 10
		createPolicy(t, d, newPolicy("A", "p1", maxInFlight))

		// held counts tokens granted and not yet handed back. It is decreased
		// before the release call, so it never overstates what the store
		// holds, and must therefore never exceed maxInFlight. Each goroutine
		// keeps its token across its next acquire attempt so that the bucket
		// is often full while others are trying.
		var held, peak, total atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				<-start
				holding := 0
				release := func() bool {
					held.Add(-1)
					holding--
					if err := d.PolicyReleaseTokens(ctx, "p1", 1, 0); err != nil {
						t.Errorf("releaser %d: %v", g, err)
						return false
					}
					return true
				}
				for range attempts {
					n, err := d.PolicyAcquireTokens(ctx, "p1", 1)
					if err != nil {
						t.Errorf("acquirer %d: %v", g, err)
						return
					}
					if n > 0 {
						total.Add(int64(n))
						holding += n
						h := held.Add(int64(n))
						for {
							p := peak.Load()
							if h <= p || peak.CompareAndSwap(p, h) {
								break
							}
						}
						if h > maxInFlight {
							t.Errorf("%d tokens held at once, max %d", h, maxInFlight)
						}
					}
					// Give back the older token (or the only one after a
					// failed attempt).
					if holding > 1 || (n == 0 && holding > 0) {
						if !release() {
							return
						}
					}
				}
				for holding > 0 {
					if !release() {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if total.Load() < maxInFlight {
			t.Fatalf("only %d tokens granted over %d attempts", total.Load(), goroutines*attempts)
		}
		t.Logf("granted %d tokens, peak %d held", total.Load(), peak.Load())
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 0, "InUse after every token was released")
	}},
	{"SetInUse", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		createPolicy(t, d, newPolicy("A", "p1", 5))
		cur, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")

		requireNoError(t, d.PolicySetInUse(ctx, "p1", cur.Version, 0, 4), "PolicySetInUse")
		got, err := d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 4, "InUse")
		requireEqual(t, got.MaxInFlight, 5, "MaxInFlight kept")

		requireIs(t, d.PolicySetInUse(ctx, "p1", got.Version+1, 4, 0), model.ErrConflict, "PolicySetInUse with a wrong version")
		// A token taken since the count: InUse is not what the caller saw.
		n, err := d.PolicyAcquireTokens(ctx, "p1", 1)
		requireNoError(t, err, "PolicyAcquireTokens")
		requireEqual(t, n, 1, "tokens taken")
		requireIs(t, d.PolicySetInUse(ctx, "p1", got.Version, 4, 2), model.ErrConflict, "PolicySetInUse after InUse moved")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 5, "InUse after PolicySetInUse lost to a token taken")
		requireNoError(t, d.PolicyReleaseTokens(ctx, "p1", 1, 0), "PolicyReleaseTokens")

		upd := newPolicy("A", "p1", 6)
		upd.Version = got.Version + 1
		requireNoError(t, d.PolicyUpdate(ctx, upd, got.Version), "PolicyUpdate")
		requireIs(t, d.PolicySetInUse(ctx, "p1", got.Version, 4, 0), model.ErrConflict, "PolicySetInUse after the policy changed")
		got, err = d.PolicyGetByID(ctx, "p1")
		requireNoError(t, err, "PolicyGetByID")
		requireEqual(t, got.InUse, 4, "InUse after rejected PolicySetInUse")

		err = d.PolicySetInUse(ctx, "nope", 1, 0, 0)
		if !errors.Is(err, model.ErrNotFound) && !errors.Is(err, model.ErrConflict) {
			t.Fatalf("PolicySetInUse unknown: got %v, want ErrNotFound or ErrConflict", err)
		}
	}},
}
