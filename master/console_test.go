package master_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

func TestListTenantsPages(t *testing.T) {
	h := newHarness(t)
	want := map[string]bool{}
	for _, n := range []string{"alpha", "beta", "gamma"} {
		id, _ := h.tenant(n)
		want[id] = true
	}

	r, err := h.admin.ListTenantsWithResponse(h.ctx, &client.ListTenantsParams{Limit: ptr(2)})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if len(r.JSON200.Items) != 2 || r.JSON200.NextCursor == nil {
		t.Fatalf("first page: %s", r.Body)
	}
	first := r.JSON200.Items
	r, err = h.admin.ListTenantsWithResponse(h.ctx, &client.ListTenantsParams{Limit: ptr(2), Cursor: r.JSON200.NextCursor})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if len(r.JSON200.Items) != 1 || r.JSON200.NextCursor != nil {
		t.Fatalf("last page: %s", r.Body)
	}
	all := append(first, r.JSON200.Items...)
	for i, tn := range all {
		if !want[tn.Id] {
			t.Fatalf("unexpected or repeated tenant %s in %v", tn.Id, all)
		}
		delete(want, tn.Id)
		if i > 0 && all[i-1].Id >= tn.Id {
			t.Fatalf("tenants not ordered by id: %s before %s", all[i-1].Id, tn.Id)
		}
		if tn.Name == "" || tn.Weight == 0 {
			t.Fatalf("tenant without its name or effective weight: %+v", tn)
		}
	}

	t.Run("BadCursor", func(t *testing.T) {
		r, err := h.admin.ListTenantsWithResponse(h.ctx, &client.ListTenantsParams{Cursor: ptr("nope")})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "cursor")
	})
	t.Run("TenantKeyIs403", func(t *testing.T) {
		_, c := h.tenant("delta")
		r, err := c.ListTenantsWithResponse(h.ctx, nil)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusForbidden, "")
	})
}

func TestRedriveEventsByFilter(t *testing.T) {
	h := newHarness(t)
	a, ca := h.tenant("a")
	b, _ := h.tenant("b")
	deadS1 := []*model.Event{h.insertEvent(a, "s1", "", model.EventDead), h.insertEvent(a, "s1", "", model.EventDead)}
	pendingS1 := h.insertEvent(a, "s1", "", model.EventPending)
	deadS2 := h.insertEvent(a, "s2", "", model.EventDead)
	otherTenant := h.insertEvent(b, "s1", "", model.EventDead)

	status := func(e *model.Event) model.EventStatus {
		t.Helper()
		got, err := h.st.EventGetByID(h.ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	redrive := func(body client.RedriveRequest) int {
		t.Helper()
		r, err := ca.RedriveEventsWithResponse(h.ctx, body)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.More != nil && *r.JSON200.More {
			t.Fatalf("more set for a few events: %s", r.Body)
		}
		return r.JSON200.Count
	}

	if n := redrive(client.RedriveRequest{ScheduleId: ptr("s1")}); n != 2 {
		t.Fatalf("redrove %d events of s1, want 2", n)
	}
	for _, e := range deadS1 {
		if st := status(e); st != model.EventPending {
			t.Fatalf("event of s1 is %s after the redrive, want pending", st)
		}
	}
	if status(pendingS1) != model.EventPending || status(deadS2) != model.EventDead || status(otherTenant) != model.EventDead {
		t.Fatalf("a redrive of s1 touched other events")
	}
	if n := redrive(client.RedriveRequest{ScheduleId: ptr("s1")}); n != 0 {
		t.Fatalf("second redrive of s1 redrove %d, want 0", n)
	}
	if n := redrive(client.RedriveRequest{FireId: ptr("s2.fire"), Status: ptr("dead")}); n != 1 {
		t.Fatalf("redrive by fire redrove %d, want 1", n)
	}
	if status(otherTenant) != model.EventDead {
		t.Fatal("another tenant's event was redriven")
	}

	t.Run("All", func(t *testing.T) {
		c := h.insertEvent(a, "s3", "", model.EventDead)
		if n := redrive(client.RedriveRequest{All: ptr(true)}); n != 1 {
			t.Fatalf("all redrove %d, want 1", n)
		}
		if status(c) != model.EventPending || status(otherTenant) != model.EventDead {
			t.Fatal("all: wrong events redriven")
		}
	})
	t.Run("LaunchRange", func(t *testing.T) {
		old := h.insertEvent(a, "s4", "", model.EventDead, func(e *model.Event) { e.LaunchAt = e.LaunchAt.Add(-2 * time.Hour) })
		recent := h.insertEvent(a, "s4", "", model.EventDead)
		if n := redrive(client.RedriveRequest{From: ptr(time.Now().Add(-time.Hour))}); n != 1 {
			t.Fatalf("from redrove %d, want 1", n)
		}
		if status(recent) != model.EventPending || status(old) != model.EventDead {
			t.Fatal("from: wrong events redriven")
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		keep := h.insertEvent(a, "s5", "", model.EventDead)
		for _, tc := range []struct {
			name  string
			body  client.RedriveRequest
			field string
		}{
			{"NoFilter", client.RedriveRequest{}, "all"},
			{"AllFalse", client.RedriveRequest{All: ptr(false)}, "all"},
			{"OtherStatus", client.RedriveRequest{ScheduleId: ptr("s5"), Status: ptr("released")}, "status"},
			{"ToBeforeFrom", client.RedriveRequest{From: ptr(time.Now()), To: ptr(time.Now().Add(-time.Minute))}, "to"},
		} {
			r, err := ca.RedriveEventsWithResponse(h.ctx, tc.body)
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
		}
		r, err := ca.RedriveEventsWithBodyWithResponse(h.ctx, "application/json", strings.NewReader(`{"scheduleId":"s5","what":1}`))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "what")
		if status(keep) != model.EventDead {
			t.Fatal("a rejected request redrove an event")
		}
	})
}

func TestCancelFire(t *testing.T) {
	h := newHarness(t)
	_, ca := h.tenant("a")
	_, cb := h.tenant("b")
	s := h.cronSchedule(ca, "nightly") // eventCount 3
	tr, err := ca.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
	mustStatus(t, err, tr.StatusCode(), tr.Body, http.StatusAccepted)
	fire := tr.JSON202
	// One event is being delivered: it must finish, not be cancelled.
	now := time.Now().UTC()
	res, err := h.st.EventTransition(h.ctx, []store.EventTransition{{
		ID: model.EventID(fire.Id, 0), From: model.EventPending, To: model.EventDelivering, At: now,
	}})
	if err != nil || res[0] != nil {
		t.Fatalf("setup transition: %v %v", err, res)
	}

	t.Run("OtherTenantIs404", func(t *testing.T) {
		r, err := cb.CancelFireWithResponse(h.ctx, fire.Id)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
	})

	r, err := ca.CancelFireWithResponse(h.ctx, fire.Id)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if got := r.JSON200.Counts; got.Cancelled != 2 || got.InFlight != 1 || got.Waiting != 0 {
		t.Fatalf("counts after cancel: %+v", got)
	}
	e, err := h.st.EventGetByID(h.ctx, model.EventID(fire.Id, 0))
	if err != nil || e.Status != model.EventDelivering {
		t.Fatalf("event in flight: %v %v", e, err)
	}
	r, err = ca.CancelFireWithResponse(h.ctx, fire.Id)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.Counts.Cancelled != 2 {
		t.Fatalf("second cancel changed the counts: %+v", r.JSON200.Counts)
	}
	r, err = ca.CancelFireWithResponse(h.ctx, "fi_unknown")
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
}

func TestSummary(t *testing.T) {
	h := newHarness(t)
	a, ca := h.tenant("a")
	b, cb := h.tenant("b")
	p := h.policy(ca, "narrow", 2)
	h.cronSchedule(ca, "one")
	paused := h.cronSchedule(ca, "two")
	pr, err := ca.PauseScheduleWithResponse(h.ctx, paused.Id, client.PauseRequest{})
	mustStatus(t, err, pr.StatusCode(), pr.Body, http.StatusOK)
	h.cronSchedule(cb, "other")

	// Ten released events delivered 1s..10s after their launch.
	launch := time.Now().UTC().Add(-time.Minute)
	for i := 1; i <= 10; i++ {
		h.insertEvent(a, "s1", "", model.EventReleased, func(e *model.Event) {
			d := launch.Add(time.Duration(i) * time.Second)
			e.LaunchAt, e.DeliveredAt, e.FinishedAt = launch, &d, &d
		})
	}
	h.insertEvent(a, "s1", p.Id, model.EventPending, func(e *model.Event) { e.LaunchAt = launch })
	h.insertEvent(a, "s1", p.Id, model.EventScheduled, func(e *model.Event) { e.LaunchAt = launch })
	h.insertEvent(a, "s1", "", model.EventRetrying)
	h.insertEvent(a, "s1", "", model.EventDead)
	h.insertEvent(a, "s1", "", model.EventCancelled)
	h.insertEvent(b, "s9", "", model.EventDead)

	r, err := ca.GetSummaryWithResponse(h.ctx)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	got := r.JSON200
	wantCounts := client.SummaryCounts{Waiting: 2, Released: 10, Retrying: 1, Dead: 1, Cancelled: 1}
	if got.Counts != wantCounts {
		t.Fatalf("counts %+v, want %+v", got.Counts, wantCounts)
	}
	if got.Schedules.Active != 1 || got.Schedules.Paused != 1 {
		t.Fatalf("schedules %+v, want 1 active, 1 paused", got.Schedules)
	}
	if len(got.Policies) != 1 || got.Policies[0].Id != p.Id || got.Policies[0].Name != "narrow" ||
		got.Policies[0].MaxInFlight != 2 || got.Policies[0].Waiting != 2 || got.Policies[0].InUse != 0 {
		t.Fatalf("policies %+v", got.Policies)
	}
	// Nearest rank over 1..10 seconds.
	if l := got.Lateness; l.Sampled != 10 || l.P50 != 5 || l.P90 != 9 || l.P99 != 10 {
		t.Fatalf("lateness %+v, want p50 5, p90 9, p99 10 over 10", l)
	}
	if got.GeneratedAt.IsZero() {
		t.Fatal("no generatedAt")
	}

	t.Run("Empty", func(t *testing.T) {
		_, c := h.tenant("empty")
		r, err := c.GetSummaryWithResponse(h.ctx)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Lateness.Sampled != 0 || r.JSON200.Counts != (client.SummaryCounts{}) || len(r.JSON200.Policies) != 0 {
			t.Fatalf("summary of an empty tenant: %s", r.Body)
		}
	})
	t.Run("AdminKeyIs403", func(t *testing.T) {
		r, err := h.admin.GetSummaryWithResponse(h.ctx)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusForbidden, "")
	})
}

// TestRedriveEventsBounded checks that one call redrives at most 10,000
// events and says that more match; the next call takes the rest.
func TestRedriveEventsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10,001 events")
	}
	h := newHarness(t)
	a, ca := h.tenant("a")
	now := time.Now().UTC()
	const n = 10_001
	batch := make([]*model.Event, 0, 1000)
	for i := range n {
		id := fmt.Sprintf("ev_bulk%06d", i)
		batch = append(batch, &model.Event{
			ID: id, TenantID: a, ScheduleID: "s1", FireID: "s1.fire", FireTime: now, Index: i, Count: n, LaunchAt: now,
			Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hook"}, MaxAttempts: 3,
			Status: model.EventDead, FinishedAt: &now, CreatedAt: now, UpdatedAt: now,
		})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := h.st.EventInsertMany(h.ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	r, err := ca.RedriveEventsWithResponse(h.ctx, client.RedriveRequest{FireId: ptr("s1.fire")})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.Count != 10_000 || r.JSON200.More == nil || !*r.JSON200.More {
		t.Fatalf("first call: %s, want count 10000 and more", r.Body)
	}
	r, err = ca.RedriveEventsWithResponse(h.ctx, client.RedriveRequest{FireId: ptr("s1.fire")})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.Count != 1 || r.JSON200.More != nil {
		t.Fatalf("second call: %s, want count 1 and no more", r.Body)
	}
}
