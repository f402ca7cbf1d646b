package master_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// pauseT0 is the fake clock's start: half a minute past a minute, so that
// an every-minute schedule's fires are never at the clock's instant.
var pauseT0 = time.Date(2027, 1, 4, 10, 0, 30, 0, time.UTC)

// withEmitter gives the harness a real emitter (not started: the tests
// call it through the master) and the fake clock clk for both.
func withEmitter(t *testing.T, clk *clockwork.FakeClock) harnessOption {
	return func(_ *master.Config, d *master.Deps) {
		e, err := emitter.New(emitter.Config{Partitions: 4, Owner: "test"}, emitter.Deps{Store: d.Store.(emitter.Store), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		d.Emitter, d.Clock = e, clk
	}
}

// firesOf maps the fire times of schedule id to the decisions of its fires
// that have events not cancelled (live), and lists the decisions of every
// fire at each time.
func firesOf(t *testing.T, h *harness, tenantID, id string) (live map[time.Time]model.FireDecision, all map[time.Time][]model.FireDecision) {
	t.Helper()
	fs, err := h.st.FireList(h.ctx, &store.FireListParams{TenantID: tenantID, ScheduleID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	live, all = map[time.Time]model.FireDecision{}, map[time.Time][]model.FireDecision{}
	for _, f := range fs {
		all[f.FireTime] = append(all[f.FireTime], f.Decision)
		counts, err := h.st.EventCountByFire(h.ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		for st, n := range counts {
			if n > 0 && st != model.EventCancelled {
				if d, dup := live[f.FireTime]; dup {
					t.Fatalf("two live fires at %s: %s and %s", f.FireTime, d, f.Decision)
				}
				live[f.FireTime] = f.Decision
			}
		}
	}
	return live, all
}

// TestPauseUntilResumesWithMisfirePolicy pauses an every-minute schedule
// until 10:05, lets the clock pass 10:08:30 with nobody resuming it, and
// has the resume job resume it. The oracle: no fire of the pause (10:01 to
// 10:04) is delivered; the fires of the gap [10:05, 10:08) follow the
// misfire policy (fire_all: each, late; fire_once: the latest, late; skip:
// none); the fires from 10:08 on are emitted as usual.
func TestPauseUntilResumesWithMisfirePolicy(t *testing.T) {
	for _, policy := range []model.MisfirePolicy{model.MisfireFireAll, model.MisfireFireOnce, model.MisfireSkip} {
		t.Run(string(policy), func(t *testing.T) {
			clk := clockwork.NewFakeClockAt(pauseT0)
			h := newHarness(t, withEmitter(t, clk))
			tenantID, c := h.tenant("acme")
			mf := client.Misfire(policy)
			s := h.schedule(c, client.ScheduleCreate{Name: "every-minute", Cron: ptr("* * * * *"), Target: httpTarget(), Misfire: &mf})

			resumeAt := pauseT0.Add(4*time.Minute + 30*time.Second) // 10:05:00
			p, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{Note: ptr("database migration"), Until: &resumeAt})
			mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
			got := p.JSON200
			if got.State != client.ScheduleStatePaused || deref(got.PausedNote) != "database migration" || got.ResumeAt == nil || !got.ResumeAt.Equal(resumeAt) ||
				got.PausedAt == nil || !got.PausedAt.Equal(pauseT0) || !strings.HasPrefix(deref(got.PausedBy), "sk_") {
				t.Fatalf("paused schedule: %s", p.Body)
			}

			// Nothing resumes before its time.
			clk.Advance(4 * time.Minute) // 10:04:30
			if n, err := h.srv.ResumeDue(h.ctx); err != nil || n != 0 {
				t.Fatalf("ResumeDue before resumeAt: %d, %v; want 0", n, err)
			}
			clk.Advance(4 * time.Minute) // 10:08:30: the gap is 10:05, 10:06, 10:07
			now := clk.Now()
			if n, err := h.srv.ResumeDue(h.ctx); err != nil || n != 1 {
				t.Fatalf("ResumeDue: %d, %v; want 1", n, err)
			}
			if n, err := h.srv.ResumeDue(h.ctx); err != nil || n != 0 {
				t.Fatalf("ResumeDue again: %d, %v; want 0", n, err)
			}
			g, err := c.GetScheduleWithResponse(h.ctx, s.Id)
			mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
			if g.JSON200.State != client.ScheduleStateActive || g.JSON200.PausedNote != nil || g.JSON200.ResumeAt != nil || g.JSON200.PausedAt != nil || g.JSON200.PausedBy != nil {
				t.Fatalf("resumed schedule: %s", g.Body)
			}

			// The oracle, minute by minute.
			want := map[time.Time]model.FireDecision{}
			var gap []time.Time
			for m := resumeAt; m.Before(now.Truncate(time.Minute)); m = m.Add(time.Minute) {
				gap = append(gap, m)
			}
			switch policy {
			case model.MisfireFireAll:
				for _, m := range gap {
					want[m] = model.FireLate
				}
			case model.MisfireFireOnce:
				want[gap[len(gap)-1]] = model.FireLate
			}
			live, _ := firesOf(t, h, tenantID, s.Id)
			for m := pauseT0.Truncate(time.Minute).Add(time.Minute); m.Before(now.Add(3 * time.Minute)); m = m.Add(time.Minute) {
				w, ok := want[m]
				if !m.Before(now.Truncate(time.Minute)) {
					w, ok = model.FireEmitted, true // from the current window on
				}
				if gotD, gotOK := live[m]; gotOK != ok || gotD != w {
					t.Errorf("%s: live fire %v (%s), want %v (%s)", m.Format("15:04"), gotOK, gotD, ok, w)
				}
			}
		})
	}
}

// TestResumeByHandAppliesTheMisfirePolicyToo: a schedule resumed by hand
// after its resume time has passed is resumed by the same rule.
func TestResumeByHandAppliesTheMisfirePolicyToo(t *testing.T) {
	clk := clockwork.NewFakeClockAt(pauseT0)
	h := newHarness(t, withEmitter(t, clk))
	tenantID, c := h.tenant("acme")
	mf := client.MisfireFireAll
	s := h.schedule(c, client.ScheduleCreate{Name: "every-minute", Cron: ptr("* * * * *"), Target: httpTarget(), Misfire: &mf})
	resumeAt := pauseT0.Add(90 * time.Second) // 10:02:00
	p, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{Until: &resumeAt})
	mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
	clk.Advance(4 * time.Minute) // 10:04:30: the gap is 10:02, 10:03
	r, err := c.ResumeScheduleWithResponse(h.ctx, s.Id)
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	live, _ := firesOf(t, h, tenantID, s.Id)
	for _, m := range []string{"10:02", "10:03"} {
		at, _ := time.Parse("2006-01-02 15:04", "2027-01-04 "+m)
		if live[at] != model.FireLate {
			t.Errorf("%s: %q, want a late fire", m, live[at])
		}
	}
	if _, ok := live[pauseT0.Add(30*time.Second)]; ok {
		t.Error("the fire at 10:01, during the pause, is live")
	}
	if n, err := h.srv.ResumeDue(h.ctx); err != nil || n != 0 {
		t.Fatalf("ResumeDue after the resume by hand: %d, %v; want 0", n, err)
	}
}

// TestResumerResumesByItself starts the Resumer: it resumes a schedule
// whose resume time has passed without any call, and the emitter's
// Emitted hook signals the late fire it emits.
func TestResumerResumesByItself(t *testing.T) {
	clk := clockwork.NewFakeClockAt(pauseT0)
	emitted := make(chan *model.Fire, 64)
	h := newHarness(t, func(_ *master.Config, d *master.Deps) {
		e, err := emitter.New(emitter.Config{Partitions: 4, Owner: "test"}, emitter.Deps{Store: d.Store.(emitter.Store), Clock: clk, Emitted: emitted})
		if err != nil {
			t.Fatal(err)
		}
		d.Emitter, d.Clock = e, clk
	})
	_, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "every-minute", Cron: ptr("* * * * *"), Target: httpTarget()})
	resumeAt := pauseT0.Add(90 * time.Second)
	p, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{Until: &resumeAt})
	mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
	drain := func() {
		for {
			select {
			case <-emitted:
			default:
				return
			}
		}
	}
	drain()
	clk.Advance(4 * time.Minute)
	r := h.srv.NewResumer(time.Minute)
	if err := r.Start(h.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	select {
	case f := <-emitted:
		if f.ScheduleID != s.Id || f.Decision != model.FireLate {
			t.Fatalf("first fire after the resume: %+v, want the late fire of %s", f, s.Id)
		}
	case <-t.Context().Done():
		t.Fatal("the resumer never resumed the schedule")
	}
}

// TestSkipByCountAndUntil skips by count and then by time: the skipped
// fires are recorded as skipped_manual with no events, fires emitted ahead
// of the skip lose their events, the preview marks them, and the emitter's
// pass records later skipped fires the same way.
func TestSkipByCountAndUntil(t *testing.T) {
	clk := clockwork.NewFakeClockAt(pauseT0)
	h := newHarness(t, withEmitter(t, clk))
	tenantID, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "every-minute", Cron: ptr("* * * * *"), Target: httpTarget()})
	minute := func(hm string) time.Time {
		at, err := time.Parse("2006-01-02 15:04", "2027-01-04 "+hm)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	if live, _ := firesOf(t, h, tenantID, s.Id); len(live) == 0 {
		t.Fatal("the create emitted no fire ahead: the skip would cancel nothing")
	}

	r, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Count: ptr(3)})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	if r.JSON200.SkipUntil == nil || !r.JSON200.SkipUntil.Equal(minute("10:04")) {
		t.Fatalf("skip 3 at 10:00:30: skipUntil %v, want 10:04", r.JSON200.SkipUntil)
	}
	pv, err := c.PreviewScheduleWithResponse(h.ctx, s.Id, &client.PreviewScheduleParams{Count: ptr(5)})
	mustStatus(t, err, pv.StatusCode(), pv.Body, http.StatusOK)
	var skipped []bool
	for _, f := range pv.JSON200.FireTimes {
		skipped = append(skipped, f.Skipped != nil && *f.Skipped)
	}
	if !slices.Equal(skipped, []bool{true, true, true, false, false}) {
		t.Fatalf("preview skipped marks %v, want the first three", skipped)
	}
	live, all := firesOf(t, h, tenantID, s.Id)
	for _, m := range []string{"10:01", "10:02", "10:03"} {
		if _, ok := live[minute(m)]; ok {
			t.Errorf("%s: skipped fire has live events", m)
		}
		if !slices.Contains(all[minute(m)], model.FireSkippedManual) {
			t.Errorf("%s: decisions %v, want one skipped_manual", m, all[minute(m)])
		}
	}
	if live[minute("10:04")] != model.FireEmitted {
		t.Errorf("10:04: %q, want emitted", live[minute("10:04")])
	}

	// Until 10:10; the emitter's pass meets the rest of the skipped fires.
	until := minute("10:10")
	r, err = c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Until: &until})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	em := newPassEmitter(t, h, clk)
	for p := range 4 { // as if passes had run until now
		if err := h.st.WatermarkAdvance(h.ctx, model.Watermark{Partition: p, Until: minute("10:01")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 11 { // passes every minute until 10:10:30
		if _, err := em.RunPass(h.ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	live, all = firesOf(t, h, tenantID, s.Id)
	for m := minute("10:01"); m.Before(until); m = m.Add(time.Minute) {
		if d, ok := live[m]; ok {
			t.Errorf("%s: skipped fire is live (%s)", m.Format("15:04"), d)
		}
		if !slices.Contains(all[m], model.FireSkippedManual) {
			t.Errorf("%s: decisions %v, want skipped_manual", m.Format("15:04"), all[m])
		}
	}
	if _, ok := live[until]; !ok {
		t.Errorf("10:10, the first fire not skipped, is not live: %v", all[until])
	}
	// A trigger is never skipped.
	tr, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
	mustStatus(t, err, tr.StatusCode(), tr.Body, http.StatusAccepted)
	if tr.JSON202.Decision != client.FireDecisionTriggered {
		t.Errorf("trigger decision %s", tr.JSON202.Decision)
	}
}

// newPassEmitter is an emitter over h's store that runs passes, as the
// instance's own would.
func newPassEmitter(t *testing.T, h *harness, clk *clockwork.FakeClock) *emitter.Emitter {
	t.Helper()
	e, err := emitter.New(emitter.Config{Partitions: 4, Owner: "pass", CatchUpLimit: time.Hour}, emitter.Deps{Store: h.st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPauseAndSkipRefuseBadInput: every refusal names its field and
// changes nothing.
func TestPauseAndSkipRefuseBadInput(t *testing.T) {
	clk := clockwork.NewFakeClockAt(pauseT0)
	h := newHarness(t, withEmitter(t, clk))
	tenantID, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "every-minute", Cron: ptr("* * * * *"), Target: httpTarget()})
	past, future := pauseT0.Add(-time.Minute), pauseT0.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		do     func() (*http.Response, []byte, error)
		status int
		field  string
	}{
		{"PauseUntilPast", func() (*http.Response, []byte, error) {
			r, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{Until: &past})
			return resp(r, err)
		}, http.StatusUnprocessableEntity, "until"},
		{"PauseNoteTooLong", func() (*http.Response, []byte, error) {
			r, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{Note: ptr(strings.Repeat("n", 1001))})
			return resp(r, err)
		}, http.StatusBadRequest, "note"},
		{"PauseUnknownField", func() (*http.Response, []byte, error) {
			r, err := c.PauseScheduleWithBodyWithResponse(h.ctx, s.Id, "application/json", strings.NewReader(`{"reason":"x"}`))
			return resp(r, err)
		}, http.StatusBadRequest, "reason"},
		{"SkipCountAndUntil", func() (*http.Response, []byte, error) {
			r, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Count: ptr(1), Until: &future})
			return resp(r, err)
		}, http.StatusUnprocessableEntity, "until"},
		{"SkipNeither", func() (*http.Response, []byte, error) {
			r, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{})
			return resp(r, err)
		}, http.StatusUnprocessableEntity, "count"},
		{"SkipCountZero", func() (*http.Response, []byte, error) {
			r, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Count: ptr(0)})
			return resp(r, err)
		}, http.StatusUnprocessableEntity, "count"},
		{"SkipCountHuge", func() (*http.Response, []byte, error) {
			r, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Count: ptr(1001)})
			return resp(r, err)
		}, http.StatusUnprocessableEntity, "count"},
		{"SkipUntilPast", func() (*http.Response, []byte, error) {
			r, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Until: &past})
			return resp(r, err)
		}, http.StatusUnprocessableEntity, "until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, body, err := tc.do()
			wantProblem(t, err, r, body, tc.status, tc.field)
			got := h.storedSchedule(tenantID, s.Id)
			if got.Version != 1 || got.State != model.ScheduleActive || got.SkipUntil != nil {
				t.Fatalf("a refused request changed the schedule: %+v", got)
			}
		})
	}

	// A completed schedule can be neither paused nor skipped.
	done := h.storedSchedule(tenantID, s.Id)
	old := done.Version
	done.State, done.Version = model.ScheduleCompleted, old+1
	if err := h.st.ScheduleUpdate(h.ctx, done, old, nil); err != nil {
		t.Fatal(err)
	}
	pr, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{Note: ptr("x")})
	wantProblem(t, err, pr.HTTPResponse, pr.Body, http.StatusConflict, "")
	sr, err := c.SkipScheduleWithResponse(h.ctx, s.Id, client.SkipRequest{Count: ptr(1)})
	wantProblem(t, err, sr.HTTPResponse, sr.Body, http.StatusConflict, "")
}

// resp gives the answer of a generated client call to wantProblem.
func resp(r interface{ StatusCode() int }, err error) (*http.Response, []byte, error) {
	switch v := r.(type) {
	case *client.PauseScheduleResponse:
		return v.HTTPResponse, v.Body, err
	case *client.SkipScheduleResponse:
		return v.HTTPResponse, v.Body, err
	}
	return nil, nil, err
}
