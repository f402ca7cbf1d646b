package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// brakeCall sends a JSON request with key to the master at base and
// returns the status and decoded body.
func brakeCall(t *testing.T, base, method, path, key string, body any) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&buf).Encode(body)
	}
	req, err := http.NewRequest(method, base+path, &buf)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// storeTokens releases and extends through the store (the master's
// release endpoint is not used here).
type storeTokens struct{ st throttle.ReleaseStore }

func (s storeTokens) Release(ctx context.Context, e *model.Event, now time.Time) (bool, error) {
	return throttle.Release(ctx, s.st, e, now)
}

func (s storeTokens) Extend(ctx context.Context, e *model.Event, until, now time.Time) error {
	return throttle.Extend(ctx, s.st, e, until, now)
}

// A consumer in an incident stops its inflow with a consumer key until a
// given instant; the events wait, and at that instant (fake clock) the
// hold ends by itself and they are delivered to the real consumer.
func TestConsumerHoldEndsByItself(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC))
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: 3, AutoRelease: true, TokenTimeout: time.Minute})
	const tenantKey = "sk_brake-test-tenant-key"
	if err := st.APIKeyCreate(ctx, &model.APIKey{ID: "key_1", TenantID: "t1", Hash: model.HashAPIKey(tenantKey), Prefix: "sk_bra", CreatedAt: clock.Now()}); err != nil {
		t.Fatal(err)
	}
	m, err := master.New(master.Config{Partitions: 4}, master.Deps{Store: st, Tokens: storeTokens{st}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(m.Handler())
	t.Cleanup(api.Close)

	code, key := brakeCall(t, api.URL, http.MethodPost, "/v1/policies/pol/consumer-keys", tenantKey, nil)
	if code != http.StatusCreated {
		t.Fatalf("consumer key: %d %v", code, key)
	}
	ck := key["key"].(string)
	until := clock.Now().Add(10 * time.Minute)
	code, status := brakeCall(t, api.URL, http.MethodPost, "/v1/policies/pol/hold", ck, map[string]any{"until": until, "maxInFlight": 0})
	if code != http.StatusOK || status["limitSource"] != "hold" {
		t.Fatalf("hold: %d %v", code, status)
	}

	var delivered atomic.Int64
	srv := consumer(t, func(delivery.Message, http.ResponseWriter, *http.Request) { delivered.Add(1) })
	evs := makeEvents(5, evOpts{schedule: "s1", policy: "pol", url: srv.URL, launch: clock.Now()})
	insert(t, st, evs)
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}},
		func(_ *throttle.Config, d *throttle.Deps) { d.Caps = calendar.PolicyCaps{Calendars: st} })
	thr := throttleOf(h)
	waitFor(t, 10*time.Second, "the owner applying the hold", func() bool {
		lim, src, ok := thr.Effective("pol")
		return ok && lim == 0 && src == model.LimitSourceHold
	})
	waitFor(t, 10*time.Second, "the events waiting", func() bool {
		_, s := brakeCall(t, api.URL, http.MethodGet, "/v1/policies/pol/status", ck, nil)
		return s["waiting"] == float64(5)
	})
	clock.Advance(10*time.Minute - time.Second)
	if n := delivered.Load(); n != 0 {
		t.Fatalf("%d events delivered during the hold", n)
	}
	if p, _ := st.PolicyGetByID(ctx, "pol"); p.InUse != 0 {
		t.Fatalf("%d tokens out during the hold", p.InUse)
	}
	clock.Advance(time.Second) // the hold's until
	waitFor(t, 10*time.Second, "all delivered after the hold", func() bool { return delivered.Load() == 5 })
	if lim, src, _ := thr.Effective("pol"); lim != 3 || src != model.LimitSourcePolicy {
		t.Fatalf("Effective after the hold = %d %q", lim, src)
	}
	// The consumer key reaches nothing else.
	if code, _ := brakeCall(t, api.URL, http.MethodGet, "/v1/policies", ck, nil); code != http.StatusForbidden {
		t.Fatalf("list policies with a consumer key: %d", code)
	}
}

// A maintenance window from 02:30 to 05:00 Paris time on the day the clocks
// go forward (02:30 does not occur: it starts at the transition, 01:00 UTC,
// and ends at 03:00 UTC): events due in it wait, and go to the real
// consumer when it ends (fake clock).
func TestTimeOfDayLimitOnTheDSTDay(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)) // 03:30 CEST
	all := []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
	createPolicy(t, st, &model.Policy{ID: "pol", MaxInFlight: 5, AutoRelease: true, TokenTimeout: time.Minute,
		Limits: []model.LimitRule{{When: model.LimitWhen{Days: all, From: "02:30", To: "05:00", Timezone: "Europe/Paris"}, MaxInFlight: 0}}})
	var delivered atomic.Int64
	srv := consumer(t, func(delivery.Message, http.ResponseWriter, *http.Request) { delivered.Add(1) })
	insert(t, st, makeEvents(4, evOpts{schedule: "s1", policy: "pol", url: srv.URL, launch: clock.Now()}))
	h := startHandler(t, handler.Config{}, handler.Deps{Store: st, Shards: allShards(1), Clock: clock,
		Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, 5*time.Second)}},
		func(_ *throttle.Config, d *throttle.Deps) { d.Caps = calendar.PolicyCaps{Calendars: st} })
	thr := throttleOf(h)
	waitFor(t, 10*time.Second, "the owner applying the window", func() bool {
		lim, src, ok := thr.Effective("pol")
		return ok && lim == 0 && src == "limits[0]"
	})
	clock.Advance(90*time.Minute - time.Second) // 04:59:59 CEST
	if n := delivered.Load(); n != 0 {
		t.Fatalf("%d events delivered in the window", n)
	}
	clock.Advance(time.Second)
	waitFor(t, 10*time.Second, "all delivered at 05:00 CEST", func() bool { return delivered.Load() == 4 })
	if lim, src, _ := thr.Effective("pol"); lim != 5 || src != model.LimitSourcePolicy {
		t.Fatalf("Effective after the window = %d %q", lim, src)
	}
}
