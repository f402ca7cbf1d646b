package master_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// TestPreviewSpec: POST /v1/schedules/preview validates a create body as
// create does, answers its next fires with DST marks and the expression in
// words, and stores nothing.
func TestPreviewSpec(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("a")
	start := time.Date(2027, 3, 27, 0, 0, 0, 0, time.UTC)
	body := client.ScheduleCreate{Name: "berlin", Cron: ptr("30 2 * * *"), Timezone: ptr("Europe/Berlin"),
		StartAt: &start, Jitter: ptr("10m"), Target: httpTarget()}
	r, err := c.PreviewScheduleSpecWithResponse(h.ctx, &client.PreviewScheduleSpecParams{Count: ptr(3)}, body)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	p := r.JSON200
	if p.ScheduleId != "" || p.Timezone != "Europe/Berlin" || deref(p.Description) != "at 02:30 every day" || deref(p.Jitter) != "10m0s" {
		t.Fatalf("preview %s", r.Body)
	}
	want := []struct{ local, dst string }{
		{"2027-03-27T02:30:00+01:00", ""}, {"2027-03-28T03:00:00+02:00", "skipped"}, {"2027-03-29T02:30:00+02:00", ""},
	}
	if len(p.FireTimes) != len(want) {
		t.Fatalf("%d fires, want %d: %s", len(p.FireTimes), len(want), r.Body)
	}
	for i, f := range p.FireTimes {
		var dst string
		if f.Dst != nil {
			dst = string(*f.Dst)
		}
		if f.Local != want[i].local || dst != want[i].dst || f.LaunchAt != nil || f.Jitter != nil {
			t.Errorf("fire %d: %+v, want %+v and no launchAt (no id yet)", i, f, want[i])
		}
	}
	list, err := c.ListSchedulesWithResponse(h.ctx, nil)
	mustStatus(t, err, list.StatusCode(), list.Body, http.StatusOK)
	if len(list.JSON200.Items) != 0 {
		t.Fatalf("the preview stored %d schedules", len(list.JSON200.Items))
	}

	t.Run("RejectsAJitterAsLongAsTheGap", func(t *testing.T) {
		bad := body
		bad.Cron, bad.Jitter = ptr("*/30 * * * *"), ptr("30m")
		r, err := c.PreviewScheduleSpecWithResponse(h.ctx, nil, bad)
		wantReason(t, wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "jitter"), "jitter",
			"must be shorter than the smallest gap between fires (30m0s")
		cr, err := c.CreateScheduleWithResponse(h.ctx, nil, bad)
		wantProblem(t, err, cr.HTTPResponse, cr.Body, http.StatusUnprocessableEntity, "jitter")
	})
	t.Run("RejectsWhatCreateRejects", func(t *testing.T) {
		bad := body
		bad.Cron, bad.PolicyId = ptr("0 25 * * *"), ptr("pol_nope")
		r, err := c.PreviewScheduleSpecWithResponse(h.ctx, nil, bad)
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "cron")
		wantReason(t, p, "policyId", "unknown policy")
	})
}

// TestPreviewSavedJitter: a stored schedule's preview gives each fire its
// launch, offset by model.JitterOffset of the schedule's id, and the
// schedule shows its jitter.
func TestPreviewSavedJitter(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("a")
	s := h.schedule(c, client.ScheduleCreate{Name: "j", Cron: ptr("0 * * * *"), Jitter: ptr("15m"), Target: httpTarget()})
	if deref(s.Jitter) != "15m0s" {
		t.Fatalf("schedule jitter %v", s.Jitter)
	}
	r, err := c.PreviewScheduleWithResponse(h.ctx, s.Id, &client.PreviewScheduleParams{Count: ptr(24)})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	for _, f := range r.JSON200.FireTimes {
		off := model.JitterOffset(s.Id, f.Utc, 15*time.Minute)
		if f.LaunchAt == nil || !f.LaunchAt.Equal(f.Utc.Add(off)) || deref(f.Jitter) != off.String() {
			t.Fatalf("fire %v: launchAt %v jitter %v, want offset %v", f.Utc, f.LaunchAt, f.Jitter, off)
		}
	}
	// Removing it.
	u, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Jitter: ptr("")})
	mustStatus(t, err, u.StatusCode(), u.Body, http.StatusOK)
	if u.JSON200.Jitter != nil {
		t.Fatalf("jitter %v after removing it", *u.JSON200.Jitter)
	}
}

// TestTriggerOverrides: the trigger's optional body sets this fire's count,
// payload and note, checked as a schedule's own fields and against the
// tenant's per-fire quota; without a body the schedule's apply.
func TestTriggerOverrides(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.MaxEventCount, c.MaxPayloadBytes = 100, 64 })
	id, c := h.tenant("a")
	h.patchTenant(id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxEventsPerFire: ptr(50)}})
	s := h.schedule(c, client.ScheduleCreate{Name: "t", Cron: ptr("0 3 * * *"), EventCount: ptr(2), Target: httpTarget()})

	payload := client.Payload(json.RawMessage(`{"invoice":42}`))
	r, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{EventCount: ptr(3), Payload: &payload, Note: ptr("re-run invoice 42")})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusAccepted)
	if f := r.JSON202; f.N != 3 || deref(f.Note) != "re-run invoice 42" {
		t.Fatalf("fire %s", r.Body)
	}
	evs, err := h.st.EventList(h.ctx, &store.EventListParams{TenantID: id, FireID: r.JSON202.Id, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || string(evs[0].Payload) != `{"invoice":42}` {
		t.Fatalf("%d events, first payload %s", len(evs), evs[0].Payload)
	}

	// No body at all: the schedule's count and payload.
	nb, err := c.TriggerScheduleWithBodyWithResponse(h.ctx, s.Id, "application/json", strings.NewReader(""))
	mustStatus(t, err, nb.StatusCode(), nb.Body, http.StatusAccepted)

	for _, tc := range []struct {
		name   string
		body   string
		status int
		field  string
		reason string
	}{
		{"ZeroCount", `{"eventCount":0}`, http.StatusBadRequest, "eventCount", ""},
		{"CountOverLimit", `{"eventCount":101}`, http.StatusUnprocessableEntity, "eventCount", "must be between 1 and 100"},
		{"CountOverPerFireQuota", `{"eventCount":51}`, http.StatusUnprocessableEntity, "eventCount", "quota (50)"},
		{"NullPayload", `{"payload":null}`, http.StatusBadRequest, "payload", ""},
		{"LargePayload", `{"payload":"` + strings.Repeat("x", 70) + `"}`, http.StatusUnprocessableEntity, "payload", "larger than 64 bytes"},
		{"LongNote", `{"note":"` + strings.Repeat("n", 501) + `"}`, http.StatusBadRequest, "note", ""},
		{"UnknownField", `{"count":3}`, http.StatusBadRequest, "count", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.TriggerScheduleWithBodyWithResponse(h.ctx, s.Id, "application/json", strings.NewReader(tc.body))
			p := wantProblem(t, err, r.HTTPResponse, r.Body, tc.status, tc.field)
			if tc.reason != "" {
				wantReason(t, p, tc.field, tc.reason)
			}
		})
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestBatchJitter: a batch item keeps its jitter, and an item whose jitter
// is as long as its gap fails alone, naming the item's jitter.
func TestBatchJitter(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("a")
	r, err := c.CreateSchedulesBatchWithResponse(h.ctx, client.ScheduleBatchCreate{Items: []client.ScheduleBatchItem{
		{Name: "ok", Cron: ptr("0 3 * * *"), Jitter: ptr("1h"), Target: httpTarget()},
		{Name: "bad", Cron: ptr("0 * * * *"), Jitter: ptr("1h"), Target: httpTarget()},
	}})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	items := r.JSON200.Items
	if r.JSON200.Created != 1 || items[0].Schedule == nil || deref(items[0].Schedule.Jitter) != "1h0m0s" {
		t.Fatalf("batch answer %s", r.Body)
	}
	if p := items[1].Problem; items[1].Status != http.StatusUnprocessableEntity || p == nil || p.Errors == nil ||
		(*p.Errors)[0].Field != "items[1].jitter" {
		t.Fatalf("bad item: %s", r.Body)
	}
}
