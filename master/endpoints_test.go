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
	"github.com/schedulerd/schedulerd/store/embedded"
)

func TestPolicies(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")

	var pol client.Policy
	t.Run("Create", func(t *testing.T) {
		r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{
			Name: "nightly", MaxInFlight: 200, TokenTimeout: ptr("15m"), AutoRelease: ptr(false)})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
		pol = *r.JSON201
		if pol.Id == "" || pol.Name != "nightly" || pol.MaxInFlight != 200 || pol.TokenTimeout != "15m0s" ||
			pol.AutoRelease || pol.TokensInUse != 0 || pol.Waiting != 0 {
			t.Fatalf("unexpected policy %+v", pol)
		}
	})
	t.Run("CreateDefaultsTokenTimeout", func(t *testing.T) {
		p := h.policy(c, "defaults", 5)
		if p.TokenTimeout != "15m0s" {
			t.Fatalf("tokenTimeout %q", p.TokenTimeout)
		}
	})
	t.Run("Get", func(t *testing.T) {
		r, err := c.GetPolicyWithResponse(h.ctx, pol.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Id != pol.Id || r.JSON200.Name != "nightly" {
			t.Fatalf("got %+v", r.JSON200)
		}
	})
	t.Run("ShowsLiveCounts", func(t *testing.T) {
		if n, err := h.st.PolicyAcquireTokens(h.ctx, pol.Id, 2); err != nil || n != 2 {
			t.Fatalf("acquire: %d %v", n, err)
		}
		tid := h.storedPolicyTenant(pol.Id)
		h.insertEvent(tid, "sch_x", pol.Id, model.EventPending)
		r, err := c.GetPolicyWithResponse(h.ctx, pol.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.TokensInUse != 2 || r.JSON200.Waiting != 1 {
			t.Fatalf("tokensInUse %d waiting %d, want 2 and 1", r.JSON200.TokensInUse, r.JSON200.Waiting)
		}
	})
	t.Run("List", func(t *testing.T) {
		r, err := c.ListPoliciesWithResponse(h.ctx)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 2 {
			t.Fatalf("%d policies, want 2", len(r.JSON200.Items))
		}
	})
	t.Run("Update", func(t *testing.T) {
		r, err := c.UpdatePolicyWithResponse(h.ctx, pol.Id, client.PolicyUpdate{MaxInFlight: ptr(50), AutoRelease: ptr(true)})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		p := r.JSON200
		if p.MaxInFlight != 50 || !p.AutoRelease || p.Name != "nightly" || p.Version != pol.Version+1 || p.TokensInUse != 2 {
			t.Fatalf("updated policy %+v", p)
		}
	})
	t.Run("DeleteRefusedWhileScheduleUsesIt", func(t *testing.T) {
		s := h.schedule(c, client.ScheduleCreate{Name: "uses", Cron: ptr("*/5 * * * *"), PolicyId: &pol.Id, Target: httpTarget()})
		r, err := c.DeletePolicyWithResponse(h.ctx, pol.Id)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusConflict, "")
		d, err := c.DeleteScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, d.StatusCode(), d.Body, http.StatusNoContent)
	})
	t.Run("Delete", func(t *testing.T) {
		r, err := c.DeletePolicyWithResponse(h.ctx, pol.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusNoContent)
		g, err := c.GetPolicyWithResponse(h.ctx, pol.Id)
		wantProblem(t, err, g.HTTPResponse, g.Body, http.StatusNotFound, "")
	})
}

func (h *harness) storedPolicyTenant(policyID string) string {
	h.t.Helper()
	p, err := h.st.PolicyGetByID(h.ctx, policyID)
	if err != nil {
		h.t.Fatal(err)
	}
	return p.TenantID
}

func TestSchedules(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("acme")
	pol := h.policy(c, "p", 10)

	var s client.Schedule
	t.Run("CreateCron", func(t *testing.T) {
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{
			Name: "nightly", Cron: ptr("0 3 * * *"), Timezone: ptr("Europe/Berlin"), EventCount: ptr(50000),
			PolicyId: &pol.Id, Window: ptr("2h"), Spread: ptr(true), Priority: ptr(5), Overlap: ptr(client.OverlapSkip),
			Target: httpTarget(), Payload: ptr(json.RawMessage(`{"job":"report"}`)), MaxAttempts: ptr(7),
			Misfire: ptr(client.MisfireSkip),
		})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
		s = *r.JSON201
		if s.Id == "" || s.Children != 1 || len(s.NextFireTimes) != 5 || s.State != client.ScheduleStateActive || s.Version != 1 {
			t.Fatalf("unexpected schedule %s", r.Body)
		}
		berlin, _ := time.LoadLocation("Europe/Berlin")
		for _, ft := range s.NextFireTimes {
			if l := ft.In(berlin); l.Hour() != 3 || l.Minute() != 0 {
				t.Fatalf("fire time %v is not 03:00 in Berlin", ft)
			}
		}
		if s.Window == nil || *s.Window != "2h0m0s" || !s.Spread || s.Priority != 5 || s.Overlap != client.OverlapSkip ||
			s.Misfire != client.MisfireSkip || s.MaxAttempts != 7 || string(*s.Payload) != `{"job":"report"}` {
			t.Fatalf("fields not kept: %s", r.Body)
		}
		m := h.storedSchedule(tid, s.Id)
		if m.Partition != model.PartitionOf(s.Id, 4) || m.Cron != "0 3 * * *" {
			t.Fatalf("stored %+v", m)
		}
		if h.em.savedCount(s.Id) != 1 {
			t.Fatalf("emitter.Saved called %d times", h.em.savedCount(s.Id))
		}
	})
	t.Run("CreateDefaults", func(t *testing.T) {
		d := h.schedule(c, client.ScheduleCreate{Name: "defaults", Cron: ptr("*/15 * * * *"), Target: httpTarget()})
		if d.Timezone != "UTC" || d.EventCount != 1 || d.MaxAttempts != 5 || d.Overlap != client.OverlapAllow ||
			d.Misfire != client.MisfireFireOnce || d.Priority != 0 || d.Children != 4 {
			t.Fatalf("defaults %+v", d)
		}
	})
	t.Run("CreateWithFields", func(t *testing.T) {
		f := h.schedule(c, client.ScheduleCreate{Name: "fields", Fields: &client.CronFields{
			Minute: ptr("30"), Hour: ptr("9"), DayOfWeek: ptr("MON-FRI")}, Target: httpTarget()})
		if f.Cron == nil || f.Children != 5 || len(f.NextFireTimes) != 5 {
			t.Fatalf("fields schedule %+v", f)
		}
		for _, ft := range f.NextFireTimes {
			if ft.Hour() != 9 || ft.Minute() != 30 || ft.Weekday() == time.Saturday || ft.Weekday() == time.Sunday {
				t.Fatalf("fire time %v", ft)
			}
		}
	})
	t.Run("CreateSQSTarget", func(t *testing.T) {
		q := h.schedule(c, client.ScheduleCreate{Name: "sqs", Cron: ptr("0 * * * *"), Target: client.Target{
			Type: client.TargetTypeSqs, QueueUrl: ptr("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo")}})
		if q.Target.Type != client.TargetTypeSqs || q.Target.QueueUrl == nil {
			t.Fatalf("target %+v", q.Target)
		}
	})
	t.Run("Get", func(t *testing.T) {
		r, err := c.GetScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Id != s.Id || r.JSON200.Children != 1 || len(r.JSON200.NextFireTimes) != 5 {
			t.Fatalf("got %s", r.Body)
		}
	})
	t.Run("ListWithFilters", func(t *testing.T) {
		r, err := c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 4 || r.JSON200.NextCursor != nil {
			t.Fatalf("%d items", len(r.JSON200.Items))
		}
		r, err = c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{PolicyId: &pol.Id})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 1 || r.JSON200.Items[0].Id != s.Id {
			t.Fatalf("policy filter: %s", r.Body)
		}
		r, err = c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{NamePrefix: ptr("def")})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 1 || r.JSON200.Items[0].Name != "defaults" {
			t.Fatalf("name filter: %s", r.Body)
		}
	})
	t.Run("Preview", func(t *testing.T) {
		r, err := c.PreviewScheduleWithResponse(h.ctx, s.Id, &client.PreviewScheduleParams{Count: ptr(3)})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		p := r.JSON200
		if len(p.FireTimes) != 3 || p.Timezone != "Europe/Berlin" {
			t.Fatalf("preview %s", r.Body)
		}
		for _, ft := range p.FireTimes {
			local, err := time.Parse(time.RFC3339, ft.Local)
			if err != nil || !local.Equal(ft.Utc) || local.Hour() != 3 {
				t.Fatalf("local %q utc %v", ft.Local, ft.Utc)
			}
		}
		r, err = c.PreviewScheduleWithResponse(h.ctx, s.Id, nil)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.FireTimes) != 10 {
			t.Fatalf("default preview has %d", len(r.JSON200.FireTimes))
		}
	})

	var fire client.Fire
	t.Run("Trigger", func(t *testing.T) {
		small := h.schedule(c, client.ScheduleCreate{Name: "small", Cron: ptr("0 3 * * *"), EventCount: ptr(4), Target: httpTarget()})
		r, err := c.TriggerScheduleWithResponse(h.ctx, small.Id, client.TriggerRequest{})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusAccepted)
		fire = *r.JSON202
		if fire.N != 4 || fire.Decision != "triggered" || fire.Counts.Waiting != 4 || fire.ScheduleId != small.Id {
			t.Fatalf("fire %s", r.Body)
		}
		ev, err := c.ListEventsWithResponse(h.ctx, &client.ListEventsParams{ScheduleId: &small.Id})
		mustStatus(t, err, ev.StatusCode(), ev.Body, http.StatusOK)
		if len(ev.JSON200.Items) != 4 {
			t.Fatalf("%d events", len(ev.JSON200.Items))
		}
	})
	t.Run("Fires", func(t *testing.T) {
		r, err := c.ListScheduleFiresWithResponse(h.ctx, fire.ScheduleId, nil)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 1 || r.JSON200.Items[0].Id != fire.Id {
			t.Fatalf("fires %s", r.Body)
		}
		// Deliver and release one event, then read the live counts.
		e := model.EventID(fire.Id, 0)
		now := time.Now().UTC()
		if _, err := h.st.EventTransition(h.ctx, []store.EventTransition{{ID: e, From: model.EventPending, To: model.EventReleased, FinishedAt: &now, At: now}}); err != nil {
			t.Fatal(err)
		}
		g, err := c.GetFireWithResponse(h.ctx, fire.Id)
		mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
		f := g.JSON200
		if f.Counts.Waiting != 3 || f.Counts.Released != 1 || f.LastFinishedAt == nil || f.LocalTime == "" {
			t.Fatalf("fire %s", g.Body)
		}
	})
	t.Run("Update", func(t *testing.T) {
		// A fire emitted early for the old definition is cancelled by the edit.
		old := h.storedSchedule(tid, s.Id)
		old.EventCount = 3 // keep the test small; the count is not what is tested
		future, err := h.em.emit(h.ctx, old, time.Now().Add(time.Hour).Truncate(time.Minute), model.FireEmitted)
		if err != nil {
			t.Fatal(err)
		}
		past, err := h.em.emit(h.ctx, old, time.Now().Add(-time.Hour).Truncate(time.Minute), model.FireEmitted)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{
			Cron: ptr("0 4,5 * * *"), Timezone: ptr("America/New_York"), EventCount: ptr(10)})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		u := r.JSON200
		if u.Version != 2 || u.Children != 2 || u.Timezone != "America/New_York" || u.EventCount != 10 || u.Name != "nightly" ||
			u.PolicyId == nil || *u.PolicyId != pol.Id {
			t.Fatalf("updated %s", r.Body)
		}
		counts, _ := h.st.EventCountByFire(h.ctx, future.ID)
		if counts[model.EventCancelled] != old.EventCount {
			t.Fatalf("future fire counts %v, want all %d cancelled", counts, old.EventCount)
		}
		counts, _ = h.st.EventCountByFire(h.ctx, past.ID)
		if counts[model.EventPending] != old.EventCount {
			t.Fatalf("past fire counts %v, want untouched", counts)
		}
		if h.em.savedCount(s.Id) != 2 {
			t.Fatalf("Saved called %d times, want 2", h.em.savedCount(s.Id))
		}
		if m := h.storedSchedule(tid, s.Id); m.Version != 2 || m.Cron != "0 4,5 * * *" {
			t.Fatalf("stored %+v", m)
		}
	})
	t.Run("UpdateRejectsInvalidMerge", func(t *testing.T) {
		r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Timezone: ptr("Mars/Olympus")})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "timezone")
		if m := h.storedSchedule(tid, s.Id); m.Version != 2 || m.Timezone != "America/New_York" {
			t.Fatalf("rejected update changed the schedule: %+v", m)
		}
	})
	t.Run("PauseAndResume", func(t *testing.T) {
		m := h.storedSchedule(tid, s.Id)
		m.EventCount = 3
		future, err := h.em.emit(h.ctx, m, time.Now().Add(2*time.Hour).Truncate(time.Minute), model.FireEmitted)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.State != client.ScheduleStatePaused || len(r.JSON200.NextFireTimes) != 0 {
			t.Fatalf("paused %s", r.Body)
		}
		counts, _ := h.st.EventCountByFire(h.ctx, future.ID)
		if counts[model.EventCancelled] != m.EventCount {
			t.Fatalf("future fire after pause: %v", counts)
		}
		again, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{})
		mustStatus(t, err, again.StatusCode(), again.Body, http.StatusOK)
		saved := h.em.savedCount(s.Id)
		res, err := c.ResumeScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, res.StatusCode(), res.Body, http.StatusOK)
		if res.JSON200.State != client.ScheduleStateActive || len(res.JSON200.NextFireTimes) != 5 {
			t.Fatalf("resumed %s", res.Body)
		}
		if h.em.savedCount(s.Id) != saved+1 {
			t.Fatal("resume did not call emitter.Saved")
		}
		// Children were rewritten for the new version (stale ones are ignored).
		st := h.storedSchedule(tid, s.Id)
		kids, err := h.st.ChildrenFind(h.ctx, &store.ChildrenFindParams{Partition: st.Partition, Timezone: st.Timezone,
			Keys: []model.ChildKey{{LaunchExpression: "H:04", Minute: 0}, {LaunchExpression: "H:05", Minute: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if k.ScheduleID == s.Id && k.ScheduleVersion != st.Version {
				t.Fatalf("child of version %d, schedule at %d", k.ScheduleVersion, st.Version)
			}
		}
	})
	t.Run("OneOffRunAtAndCancel", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		o := h.schedule(c, client.ScheduleCreate{Name: "once", RunAt: &at, EventCount: ptr(2), Target: httpTarget()})
		if o.Children != 0 || o.Cron != nil || len(o.NextFireTimes) != 1 || !o.NextFireTimes[0].Equal(at) {
			t.Fatalf("one-off %+v", o)
		}
		ev, err := c.ListEventsWithResponse(h.ctx, &client.ListEventsParams{ScheduleId: &o.Id, Status: ptr(client.EventStatusPending)})
		mustStatus(t, err, ev.StatusCode(), ev.Body, http.StatusOK)
		if len(ev.JSON200.Items) != 2 || !ev.JSON200.Items[0].LaunchAt.Equal(at) {
			t.Fatalf("one-off events %s", ev.Body)
		}
		d, err := c.DeleteScheduleWithResponse(h.ctx, o.Id)
		mustStatus(t, err, d.StatusCode(), d.Body, http.StatusNoContent)
		ev, err = c.ListEventsWithResponse(h.ctx, &client.ListEventsParams{ScheduleId: &o.Id, Status: ptr(client.EventStatusCancelled)})
		mustStatus(t, err, ev.StatusCode(), ev.Body, http.StatusOK)
		if len(ev.JSON200.Items) != 2 {
			t.Fatalf("cancelled one-off events %s", ev.Body)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		r, err := c.DeleteScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusNoContent)
		g, err := c.GetScheduleWithResponse(h.ctx, s.Id)
		wantProblem(t, err, g.HTTPResponse, g.Body, http.StatusNotFound, "")
		again, err := c.DeleteScheduleWithResponse(h.ctx, s.Id)
		wantProblem(t, err, again.HTTPResponse, again.Body, http.StatusNotFound, "")
	})
}

// The master releases and extends only through the Tokens it is given.
func TestNewRequiresTokens(t *testing.T) {
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	_, err = master.New(master.Config{AdminKey: testAdminKey, Partitions: 4}, master.Deps{Store: st})
	if err == nil || !strings.Contains(err.Error(), "Tokens") {
		t.Fatalf("New without Tokens = %v, want an error naming Tokens", err)
	}
}

func TestEvents(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("acme")
	pol := h.policy(c, "p", 10)
	anon := h.client("")

	t.Run("ReleaseWithTokenGivesTokenBackOnce", func(t *testing.T) {
		if n, _ := h.st.PolicyAcquireTokens(h.ctx, pol.Id, 2); n != 2 {
			t.Fatalf("acquired %d", n)
		}
		e := h.insertEvent(tid, "sch_a", pol.Id, model.EventDelivered)
		h.insertEvent(tid, "sch_a", pol.Id, model.EventDelivered) // holds the other token
		before := h.released.Load()
		r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Status != client.EventStatusReleased {
			t.Fatalf("release %s", r.Body)
		}
		if p, _ := h.st.PolicyGetByID(h.ctx, pol.Id); p.InUse != 1 {
			t.Fatalf("InUse %d after one release, want 1", p.InUse)
		}
		again, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
		mustStatus(t, err, again.StatusCode(), again.Body, http.StatusOK)
		if p, _ := h.st.PolicyGetByID(h.ctx, pol.Id); p.InUse != 1 {
			t.Fatalf("InUse %d after a repeated release, want still 1", p.InUse)
		}
		if got := h.released.Load() - before; got != 1 {
			t.Fatalf("the Tokens released %d times, want 1", got)
		}
		stored, _ := h.st.EventGetByID(h.ctx, e.ID)
		if stored.Status != model.EventReleased || stored.FinishedAt == nil || stored.TokenExpiresAt != nil {
			t.Fatalf("stored %+v", stored)
		}
	})
	t.Run("ReleaseWhileDelivering", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_a", "", model.EventDelivering)
		r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	})
	t.Run("ReleaseConcurrentGivesBackOnce", func(t *testing.T) {
		p := h.policy(c, "conc", 5)
		if n, _ := h.st.PolicyAcquireTokens(h.ctx, p.Id, 2); n != 2 {
			t.Fatal("acquire")
		}
		e := h.insertEvent(tid, "sch_a", p.Id, model.EventDelivered)
		done := make(chan int, 8)
		for range 8 {
			go func() {
				r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
				if err != nil {
					done <- 0
					return
				}
				done <- r.StatusCode()
			}()
		}
		for range 8 {
			if code := <-done; code != http.StatusOK {
				t.Fatalf("concurrent release answered %d", code)
			}
		}
		if got, _ := h.st.PolicyGetByID(h.ctx, p.Id); got.InUse != 1 {
			t.Fatalf("InUse %d, want 1", got.InUse)
		}
	})
	t.Run("ReleaseWrongTokenIs404", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_a", "", model.EventDelivered)
		r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: "rt_wrong"})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
		u, err := anon.ReleaseEventWithResponse(h.ctx, "ev_unknown", client.ReleaseRequest{Token: "rt_wrong"})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusNotFound, "")
		if string(stripInstance(r.Body)) != string(stripInstance(u.Body)) {
			t.Fatalf("wrong token and unknown event differ:\n%s\n%s", r.Body, u.Body)
		}
		if stored, _ := h.st.EventGetByID(h.ctx, e.ID); stored.Status != model.EventDelivered {
			t.Fatal("wrong token changed the event")
		}
	})
	t.Run("ReleaseMissingTokenIs400", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_a", "", model.EventDelivered)
		r, err := anon.ReleaseEventWithBodyWithResponse(h.ctx, e.ID, "application/json", stringsReader(`{}`))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "token")
	})
	t.Run("ReleasePendingIs409", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_a", pol.Id, model.EventPending)
		r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusConflict, "")
	})
	t.Run("ReleaseOfSupersededCopyIs409", func(t *testing.T) {
		// Sent under fence 2, then claimed again under 3 and sent again:
		// the first copy's token must not release the second copy's.
		fence := func(f int64) func(*model.Event) { return func(e *model.Event) { e.Fence, e.Attempts = f, 1 } }
		e := h.insertEvent(tid, "sch_a", pol.Id, model.EventDelivered, fence(3))
		old := e.ReleaseToken + ".2"
		r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: old})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusConflict, "")
		x, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: old})
		wantProblem(t, err, x.HTTPResponse, x.Body, http.StatusConflict, "")
		if stored, _ := h.st.EventGetByID(h.ctx, e.ID); stored.Status != model.EventDelivered || !stored.TokenExpiresAt.Equal(*e.TokenExpiresAt) {
			t.Fatalf("a superseded copy's calls changed the event: %s, expiry %v", stored.Status, stored.TokenExpiresAt)
		}
		// A token without the fence and attempt, or naming others than the
		// current copy's, is no way around the check.
		for _, forged := range []string{e.ReleaseToken, e.ReleaseToken + ".3", e.ReleaseToken + ".4.1", e.ReleaseToken + ".3.2"} {
			r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: forged})
			wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusConflict, "")
			x, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: forged})
			wantProblem(t, err, x.HTTPResponse, x.Body, http.StatusConflict, "")
		}
		if stored, _ := h.st.EventGetByID(h.ctx, e.ID); stored.Status != model.EventDelivered || !stored.TokenExpiresAt.Equal(*e.TokenExpiresAt) {
			t.Fatalf("a token without the current fence changed the event: %s, expiry %v", stored.Status, stored.TokenExpiresAt)
		}
		// The current copy's token (made before its delivery counted the
		// attempt) works.
		sent := *e
		sent.Attempts = 0
		cur := model.DeliveryToken(&sent)
		if !strings.HasSuffix(cur, ".3.1") || strings.Contains(cur, e.ReleaseToken) {
			t.Fatalf("DeliveryToken %q", cur)
		}
		// Nor is the token of an earlier copy, given the current copy's
		// fence and attempt: it is no token of the event.
		earlier := sent
		earlier.Fence = 2
		tag := strings.TrimSuffix(model.DeliveryToken(&earlier), ".2.1")
		forged, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: tag + ".3.1"})
		wantProblem(t, err, forged.HTTPResponse, forged.Body, http.StatusNotFound, "")
		ok, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: cur})
		mustStatus(t, err, ok.StatusCode(), ok.Body, http.StatusOK)
		// An event never claimed under a fence is released by its plain token.
		e2 := h.insertEvent(tid, "sch_a", pol.Id, model.EventDelivered)
		plain, err := anon.ReleaseEventWithResponse(h.ctx, e2.ID, client.ReleaseRequest{Token: e2.ReleaseToken})
		mustStatus(t, err, plain.StatusCode(), plain.Body, http.StatusOK)
		// A forged fence on a wrong secret is still a 404.
		bad, err := anon.ReleaseEventWithResponse(h.ctx, e2.ID, client.ReleaseRequest{Token: "nope.3"})
		wantProblem(t, err, bad.HTTPResponse, bad.Body, http.StatusNotFound, "")
	})
	t.Run("ReleaseUnthrottledFinishesIt", func(t *testing.T) {
		// A consumer may release before the handler recorded the
		// delivery (scheduled), or after an attempt that timed out on the
		// handler's side reached it (retrying): either way it has the
		// event, which must not be delivered again.
		for _, from := range []model.EventStatus{model.EventScheduled, model.EventRetrying} {
			e := h.insertEvent(tid, "sch_a", "", from)
			r, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
			mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
			if r.JSON200.Status != client.EventStatusReleased {
				t.Fatalf("release of an unthrottled %s event answered %s, want released", from, r.JSON200.Status)
			}
			stored, _ := h.st.EventGetByID(h.ctx, e.ID)
			if stored.Status != model.EventReleased || stored.FinishedAt == nil {
				t.Fatalf("release of an unthrottled %s event stored %s (finishedAt %v), want released", from, stored.Status, stored.FinishedAt)
			}
			// Releasing again answers the same and changes nothing.
			again, err := anon.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
			mustStatus(t, err, again.StatusCode(), again.Body, http.StatusOK)
			if s2, _ := h.st.EventGetByID(h.ctx, e.ID); !s2.FinishedAt.Equal(*stored.FinishedAt) {
				t.Fatalf("second release moved finishedAt from %v to %v", stored.FinishedAt, s2.FinishedAt)
			}
		}
		// A dead event stays dead.
		d := h.insertEvent(tid, "sch_a", "", model.EventDead)
		r, err := anon.ReleaseEventWithResponse(h.ctx, d.ID, client.ReleaseRequest{Token: d.ReleaseToken})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if stored, _ := h.st.EventGetByID(h.ctx, d.ID); stored.Status != model.EventDead {
			t.Fatalf("release of a dead unthrottled event changed it to %s", stored.Status)
		}
	})
	t.Run("Extend", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_a", pol.Id, model.EventDelivered)
		before, err := h.st.EventGetByID(h.ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: e.ReleaseToken, ExtendBy: ptr("10m")})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		// The token had 15 minutes left: the extension counts from its
		// stored expiry, not from now.
		want := before.TokenExpiresAt.Add(10 * time.Minute)
		if r.JSON200.TokenExpiresAt == nil || !r.JSON200.TokenExpiresAt.Equal(want) {
			t.Fatalf("tokenExpiresAt %v, want %v (the stored expiry plus 10m)", r.JSON200.TokenExpiresAt, want)
		}
		stored, _ := h.st.EventGetByID(h.ctx, e.ID)
		if !stored.TokenExpiresAt.Equal(*r.JSON200.TokenExpiresAt) || stored.Status != model.EventDelivered {
			t.Fatalf("stored %+v", stored)
		}
		bad, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: "nope"})
		wantProblem(t, err, bad.HTTPResponse, bad.Body, http.StatusNotFound, "")
		inv, err := anon.ExtendEventWithResponse(h.ctx, e.ID, client.ExtendRequest{Token: e.ReleaseToken, ExtendBy: ptr("soon")})
		wantProblem(t, err, inv.HTTPResponse, inv.Body, http.StatusUnprocessableEntity, "extendBy")
	})
	t.Run("Redrive", func(t *testing.T) {
		// Dead after its last attempt failed: it shows when it finished
		// and what failed.
		e := h.insertEvent(tid, "sch_a", "", model.EventDead, func(e *model.Event) {
			fin := e.LaunchAt.Add(time.Minute)
			e.Attempts, e.LastError, e.FinishedAt, e.DeliveredAt, e.TokenTimedOut = 3, "HTTP 500", &fin, &fin, true
		})
		r, err := c.RedriveEventWithResponse(h.ctx, e.ID)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Status != client.EventStatusPending || r.JSON200.Attempts != 0 {
			t.Fatalf("redriven %s", r.Body)
		}
		// Nothing says it is finished; the error stays as history.
		if r.JSON200.FinishedAt != nil || r.JSON200.DeliveredAt != nil || (r.JSON200.TokenTimedOut != nil && *r.JSON200.TokenTimedOut) {
			t.Fatalf("redriven event still describes its finished attempt: %s", r.Body)
		}
		if r.JSON200.LastError == nil || *r.JSON200.LastError != "HTTP 500" {
			t.Fatalf("redriven event lost its last error: %s", r.Body)
		}
		if stored, _ := h.st.EventGetByID(h.ctx, e.ID); stored.FinishedAt != nil || stored.DeliveredAt != nil {
			t.Fatalf("stored redriven event %+v still finished", stored)
		}
		again, err := c.RedriveEventWithResponse(h.ctx, e.ID)
		wantProblem(t, err, again.HTTPResponse, again.Body, http.StatusConflict, "")
	})
	t.Run("GetHidesReleaseToken", func(t *testing.T) {
		e := h.insertEvent(tid, "sch_a", pol.Id, model.EventDelivered)
		r, err := c.GetEventWithResponse(h.ctx, e.ID)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Id != e.ID || r.JSON200.Status != client.EventStatusDelivered || string(*r.JSON200.Payload) != `{"k":1}` {
			t.Fatalf("event %s", r.Body)
		}
		if containsStr(string(r.Body), e.ReleaseToken) {
			t.Fatal("the release token is shown")
		}
	})
	t.Run("ListFiltersAndPages", func(t *testing.T) {
		for range 5 {
			h.insertEvent(tid, "sch_list", "", model.EventDead)
		}
		h.insertEvent(tid, "sch_list", "", model.EventPending)
		var ids []string
		params := &client.ListEventsParams{ScheduleId: ptr("sch_list"), Status: ptr(client.EventStatusDead), Limit: ptr(2)}
		for pages := 0; ; pages++ {
			r, err := c.ListEventsWithResponse(h.ctx, params)
			mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
			for _, e := range r.JSON200.Items {
				if e.ScheduleId != "sch_list" || e.Status != client.EventStatusDead {
					t.Fatalf("filter leaked %+v", e)
				}
				ids = append(ids, e.Id)
			}
			if r.JSON200.NextCursor == nil {
				break
			}
			params.Cursor = r.JSON200.NextCursor
			if pages > 5 {
				t.Fatal("too many pages")
			}
		}
		if len(ids) != 5 {
			t.Fatalf("%d dead events, want 5", len(ids))
		}
		future := time.Now().Add(time.Hour)
		r, err := c.ListEventsWithResponse(h.ctx, &client.ListEventsParams{ScheduleId: ptr("sch_list"), From: &future})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 0 {
			t.Fatalf("time range: %d events", len(r.JSON200.Items))
		}
		past := time.Now().Add(-time.Hour)
		r, err = c.ListEventsWithResponse(h.ctx, &client.ListEventsParams{ScheduleId: ptr("sch_list"), From: &past, To: &future})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 6 {
			t.Fatalf("time range: %d events, want 6", len(r.JSON200.Items))
		}
	})
}

func TestTenantsAndKeys(t *testing.T) {
	h := newHarness(t)
	tid, tc := h.tenant("acme")
	t.Run("GetTenant", func(t *testing.T) {
		r, err := h.admin.GetTenantWithResponse(h.ctx, tid)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if r.JSON200.Name != "acme" {
			t.Fatalf("tenant %s", r.Body)
		}
	})
	t.Run("ListKeysHidesSecrets", func(t *testing.T) {
		r, err := h.admin.ListAPIKeysWithResponse(h.ctx, tid)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if len(r.JSON200.Items) != 1 || r.JSON200.Items[0].Prefix == "" || containsStr(string(r.Body), `"key"`) || containsStr(string(r.Body), "hash") {
			t.Fatalf("keys %s", r.Body)
		}
	})
	t.Run("RevokeKey", func(t *testing.T) {
		kr, err := h.admin.CreateAPIKeyWithResponse(h.ctx, tid, nil)
		mustStatus(t, err, kr.StatusCode(), kr.Body, http.StatusCreated)
		k := h.client(kr.JSON201.Key)
		if r, err := k.ListPoliciesWithResponse(h.ctx); err != nil || r.StatusCode() != http.StatusOK {
			t.Fatal("new key does not work")
		}
		rv, err := h.admin.RevokeAPIKeyWithResponse(h.ctx, tid, kr.JSON201.Id)
		mustStatus(t, err, rv.StatusCode(), rv.Body, http.StatusNoContent)
		r, err := k.ListPoliciesWithResponse(h.ctx)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnauthorized, "")
		if r, err := tc.ListPoliciesWithResponse(h.ctx); err != nil || r.StatusCode() != http.StatusOK {
			t.Fatal("revoking one key broke the other")
		}
		l, err := h.admin.ListAPIKeysWithResponse(h.ctx, tid)
		mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
		if len(l.JSON200.Items) != 2 || l.JSON200.Items[1].RevokedAt == nil {
			t.Fatalf("keys after revoke %s", l.Body)
		}
	})
	t.Run("UnknownTenantIs404", func(t *testing.T) {
		r, err := h.admin.CreateAPIKeyWithResponse(h.ctx, "ten_missing", nil)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
		g, err := h.admin.GetTenantWithResponse(h.ctx, "ten_missing")
		wantProblem(t, err, g.HTTPResponse, g.Body, http.StatusNotFound, "")
		rv, err := h.admin.RevokeAPIKeyWithResponse(h.ctx, tid, "key_missing")
		wantProblem(t, err, rv.HTTPResponse, rv.Body, http.StatusNotFound, "")
	})
}
