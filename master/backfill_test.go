package master_test

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// backfillNow is the clock of the backfill tests: after both 2026 DST
// changes of Europe/Berlin.
var backfillNow = time.Date(2027, 1, 15, 12, 0, 0, 0, time.UTC)

// withRealEmitter runs the master over a real emitter (not started: large
// and background fires are written within the call) on clk.
func withRealEmitter(t *testing.T, clk clockwork.Clock, cfg emitter.Config) harnessOption {
	return func(_ *master.Config, d *master.Deps) {
		cfg.Partitions, cfg.Owner = 4, "test"
		e, err := emitter.New(cfg, emitter.Deps{Store: d.Store.(emitter.Store), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		d.Emitter, d.Clock = e, clk
	}
}

// firesOf reads every fire of a schedule from the store, by instant.
func (h *harness) firesOf(tenantID, scheduleID string) map[time.Time]*model.Fire {
	h.t.Helper()
	out := map[time.Time]*model.Fire{}
	p := &store.FireListParams{TenantID: tenantID, ScheduleID: scheduleID, Limit: 1000}
	for {
		fs, err := h.st.FireList(h.ctx, p)
		if err != nil {
			h.t.Fatalf("FireList: %v", err)
		}
		for _, f := range fs {
			out[f.FireTime.UTC()] = f
		}
		if len(fs) < p.Limit {
			return out
		}
		p.Before = fs[len(fs)-1].FireTime
	}
}

func (h *harness) backfill(c *client.ClientWithResponses, id string, from, to time.Time, maxFires int) client.BackfillResult {
	h.t.Helper()
	body := client.BackfillRequest{From: from, To: to}
	if maxFires > 0 {
		body.MaxFires = &maxFires
	}
	r, err := c.BackfillScheduleWithResponse(h.ctx, id, body)
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusAccepted)
	return *r.JSON202
}

// oracleInstants lists the instants in [from, to) of a daily schedule at
// the given hours and minutes in loc, brute force over every UTC minute:
// a wall time that occurs twice fires at its first occurrence, one that a
// spring-forward gap skips fires at the first instant after the gap.
func oracleInstants(loc *time.Location, hours, minutes []int, from, to time.Time) []time.Time {
	type wall struct {
		y    int
		mo   time.Month
		d, h int
		mi   int
	}
	first := map[wall]time.Time{}
	start, end := from.Add(-48*time.Hour).Truncate(time.Minute), to.Add(48*time.Hour)
	for u := start; u.Before(end); u = u.Add(time.Minute) {
		l := u.In(loc)
		w := wall{l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute()}
		if _, ok := first[w]; !ok {
			first[w] = u
		}
	}
	set := map[time.Time]bool{}
	for day := start.In(loc); day.Before(end); day = day.AddDate(0, 0, 1) {
		for _, hh := range hours {
			for _, mm := range minutes {
				w := wall{day.Year(), day.Month(), day.Day(), hh, mm}
				at, ok := first[w]
				if !ok { // in a gap: the first minute whose wall time is later
					want := time.Date(w.y, w.mo, w.d, hh, mm, 0, 0, time.UTC)
					for u := start; u.Before(end); u = u.Add(time.Minute) {
						l := u.In(loc)
						if time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC).After(want) {
							at = u
							break
						}
					}
				}
				if !at.Before(from) && at.Before(to) {
					set[at] = true
				}
			}
		}
	}
	out := make([]time.Time, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// TestBackfillMatchesOracle backfills random ranges (and both DST days of
// Europe/Berlin) and checks that the fires recorded are exactly the
// oracle's instants of every range asked so far, each once, and that a
// repeat creates nothing.
func TestBackfillMatchesOracle(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{}))
	tid, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "dst", Cron: ptr("15,45 1-3 * * *"), Timezone: ptr("Europe/Berlin"), EventCount: ptr(2), Target: httpTarget()})
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(testseed.Get(t, "BACKFILL_SEED", 37), 0))
	ranges := [][2]time.Time{
		{time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC)},
		// from on an instant (included), to on an instant (excluded).
		{time.Date(2026, 11, 3, 0, 15, 0, 0, time.UTC), time.Date(2026, 11, 3, 2, 15, 0, 0, time.UTC)},
	}
	for range 6 {
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(360*24*60)) * time.Minute)
		ranges = append(ranges, [2]time.Time{from, from.Add(time.Duration(1+rng.IntN(20*24*60)) * time.Minute)})
	}
	want := map[time.Time]bool{}
	for _, r := range ranges {
		inst := oracleInstants(loc, []int{1, 2, 3}, []int{15, 45}, r[0], r[1])
		fresh := 0
		for _, at := range inst {
			if !want[at] {
				fresh++
				want[at] = true
			}
		}
		got := h.backfill(c, s.Id, r[0], r[1], 10000)
		if got.Instants != len(inst) || got.Fires != fresh || got.Existing != len(inst)-fresh || got.Events != 2*fresh {
			t.Fatalf("backfill %s..%s: %+v, want %d instants, %d new fires with 2 events each", r[0], r[1], got, len(inst), fresh)
		}
		again := h.backfill(c, s.Id, r[0], r[1], 10000)
		if again.Fires != 0 || again.Events != 0 || again.Existing != len(inst) {
			t.Fatalf("repeat of %s..%s: %+v, want nothing new", r[0], r[1], again)
		}
		fires := h.firesOf(tid, s.Id)
		if len(fires) != len(want) {
			t.Fatalf("after %s..%s: %d fires, want %d", r[0], r[1], len(fires), len(want))
		}
		for at := range want {
			f, ok := fires[at]
			if !ok || f.Decision != model.FireBackfill {
				t.Fatalf("no backfill fire at %s (oracle instant): %+v", at, f)
			}
		}
	}
	// The DST days: 02:15 and 02:45 on 2026-03-29 fire once at 03:00 CEST
	// (01:00Z); on 2026-10-25 each of them fires once, at its first
	// occurrence (CEST).
	for _, at := range []string{"2026-03-29T01:00:00Z", "2026-10-25T00:15:00Z", "2026-10-25T00:45:00Z"} {
		ts, _ := time.Parse(time.RFC3339, at)
		if !want[ts] {
			t.Errorf("oracle lacks %s", at)
		}
	}
	for _, at := range []string{"2026-10-25T01:15:00Z", "2026-10-25T01:45:00Z"} {
		ts, _ := time.Parse(time.RFC3339, at)
		if want[ts] {
			t.Errorf("oracle fires the second occurrence %s", at)
		}
	}
}

// TestBackfillLeavesOutInstantsWithAFire: an instant that already has a
// fire (another version, skipped) keeps it and gets no backfill fire.
func TestBackfillLeavesOutInstantsWithAFire(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{}))
	tid, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "hourly", Cron: ptr("0 * * * *"), EventCount: ptr(1), Target: httpTarget()})
	from := backfillNow.Add(-6 * time.Hour)
	for i, d := range []model.FireDecision{model.FireEmitted, model.FireSkippedManual} {
		at := from.Add(time.Duration(i+1) * time.Hour)
		f := &model.Fire{ID: model.FireID(s.Id, 0, at), ScheduleID: s.Id, TenantID: tid, FireTime: at, Count: 1, Decision: d, CreatedAt: at}
		if _, err := h.st.FireInsert(h.ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	got := h.backfill(c, s.Id, from, backfillNow, 0)
	if got.Instants != 6 || got.Fires != 4 || got.Existing != 2 || got.Events != 4 {
		t.Fatalf("backfill: %+v, want 6 instants, 4 fires, 2 existing", got)
	}
	fires := h.firesOf(tid, s.Id)
	for i, d := range []model.FireDecision{model.FireEmitted, model.FireSkippedManual} {
		at := from.Add(time.Duration(i+1) * time.Hour)
		if fires[at].Decision != d {
			t.Errorf("fire at %s is %s, want the %s one kept", at, fires[at].Decision, d)
		}
	}
}

// TestBackfillLeavesOutExcludedInstantsWithAFire: an instant a calendar
// excludes that already has a fire of another version is left out before
// the calendar is looked at: no skipped_calendar record of this version and
// no fire moved from it.
func TestBackfillLeavesOutExcludedInstantsWithAFire(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{}))
	tid, c := h.tenant("acme")
	cr, err := c.CreateCalendarWithResponse(h.ctx, nil, client.CalendarCreate{Name: "weekends", Timezone: "UTC",
		Weekly: &[]client.WeeklyRule{{Days: []client.WeeklyRuleDays{client.WeeklyRuleDaysSat, client.WeeklyRuleDaysSun}}}})
	mustStatus(t, err, cr.StatusCode(), cr.Body, http.StatusCreated)
	s := h.schedule(c, client.ScheduleCreate{Name: "daily", Cron: ptr("0 9 * * *"), EventCount: ptr(1), Target: httpTarget(),
		ExcludeCalendars: &[]string{cr.JSON201.Id}, OnExcluded: ptr(client.OnExcludedNextIncluded)})
	// Sat 2026-12-12 09:00Z fired under an earlier version.
	sat := time.Date(2026, 12, 12, 9, 0, 0, 0, time.UTC)
	old := &model.Fire{ID: model.FireID(s.Id, 0, sat), ScheduleID: s.Id, TenantID: tid, FireTime: sat, Count: 1, Decision: model.FireEmitted, CreatedAt: sat}
	if _, err := h.st.FireInsert(h.ctx, old); err != nil {
		t.Fatal(err)
	}
	got := h.backfill(c, s.Id, sat.Add(-time.Hour), sat.Add(time.Hour), 0)
	if got.Instants != 1 || got.Existing != 1 || got.Fires != 0 || got.Skipped != 0 {
		t.Fatalf("backfill: %+v, want the one instant left out", got)
	}
	fires := h.firesOf(tid, s.Id)
	if f := fires[sat]; f == nil || f.ID != old.ID {
		t.Fatalf("fire at %s: %+v, want the earlier version's", sat, f)
	}
	if f := fires[time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)]; f != nil {
		t.Fatalf("a fire moved from the instant that had one: %+v", f)
	}
}

// TestBackfillAppliesCalendars: instants a calendar excludes are recorded
// skipped_calendar, without events; with next_included the fire moves to
// the next included instant, once.
func TestBackfillAppliesCalendars(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{}))
	tid, c := h.tenant("acme")
	cr, err := c.CreateCalendarWithResponse(h.ctx, nil, client.CalendarCreate{Name: "weekends", Timezone: "Europe/Berlin",
		Weekly: &[]client.WeeklyRule{{Days: []client.WeeklyRuleDays{client.WeeklyRuleDaysSat, client.WeeklyRuleDaysSun}}}})
	mustStatus(t, err, cr.StatusCode(), cr.Body, http.StatusCreated)
	cals := []string{cr.JSON201.Id}
	skip := h.schedule(c, client.ScheduleCreate{Name: "skip", Cron: ptr("0 9 * * *"), Timezone: ptr("Europe/Berlin"), EventCount: ptr(1),
		Target: httpTarget(), ExcludeCalendars: &cals})
	moved := h.schedule(c, client.ScheduleCreate{Name: "moved", Cron: ptr("0 9 * * *"), Timezone: ptr("Europe/Berlin"), EventCount: ptr(1),
		Target: httpTarget(), ExcludeCalendars: &cals, OnExcluded: ptr(client.OnExcludedNextIncluded)})
	// Mon 2026-12-07 .. Mon 2026-12-14 09:00 CET: 7 instants, 2 on the weekend.
	from, to := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC)
	got := h.backfill(c, skip.Id, from, to, 0)
	if got.Instants != 7 || got.Fires != 5 || got.Skipped != 2 || got.Events != 5 {
		t.Fatalf("backfill with skip: %+v, want 5 fires and 2 skipped", got)
	}
	for at, f := range h.firesOf(tid, skip.Id) {
		wd := at.In(time.UTC).Weekday()
		weekend := wd == time.Saturday || wd == time.Sunday
		if weekend != (f.Decision == model.FireSkippedCalendar) || !weekend && f.Decision != model.FireBackfill {
			t.Errorf("fire at %s (%s): %s", at, wd, f.Decision)
		}
	}
	got = h.backfill(c, moved.Id, from, to, 0)
	// Sat and Sun move to the start of Monday in Berlin, 2026-12-13T23:00Z:
	// one fire there.
	if got.Fires != 6 || got.Skipped != 2 {
		t.Fatalf("backfill with next_included: %+v, want 6 fires (one moved) and 2 skipped", got)
	}
	monday := time.Date(2026, 12, 13, 23, 0, 0, 0, time.UTC)
	if f := h.firesOf(tid, moved.Id)[monday]; f == nil || f.Decision != model.FireBackfill {
		t.Fatalf("no backfill fire at the next included instant %s: %+v", monday, f)
	}
}

// TestBackfillBadInput: each bad request is a 4xx problem naming the field
// and writes no fire.
func TestBackfillBadInput(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{}))
	tid, c := h.tenant("acme")
	minutely := h.schedule(c, client.ScheduleCreate{Name: "minutely", Cron: ptr("* * * * *"), EventCount: ptr(1), Target: httpTarget()})
	oneOff := h.schedule(c, client.ScheduleCreate{Name: "once", RunAt: ptr(backfillNow.Add(time.Hour)), EventCount: ptr(1), Target: httpTarget()})
	paused := h.schedule(c, client.ScheduleCreate{Name: "paused", Cron: ptr("0 * * * *"), EventCount: ptr(1), Target: httpTarget()})
	pr, err := c.PauseScheduleWithResponse(h.ctx, paused.Id, client.PauseRequest{})
	mustStatus(t, err, pr.StatusCode(), pr.Body, http.StatusOK)
	day := backfillNow.Add(-24 * time.Hour)
	before := map[string]int{} // fires planned on create
	for _, id := range []string{minutely.Id, paused.Id, oneOff.Id} {
		before[id] = len(h.firesOf(tid, id))
	}
	for _, tc := range []struct {
		name   string
		id     string
		body   string
		status int
		field  string
		detail string
	}{
		{"ToInTheFuture", minutely.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T12:00:01Z"}`, 422, "to", "after now"},
		{"FromNotBeforeTo", minutely.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T11:00:00Z"}`, 422, "from", ""},
		{"MaxFiresTooLarge", minutely.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T11:10:00Z","maxFires":10001}`, 422, "maxFires", ""},
		{"MaxFiresZero", minutely.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T11:10:00Z","maxFires":0}`, 422, "maxFires", ""},
		{"RangeOverMaxFires", minutely.Id, `{"from":"` + day.Format(time.RFC3339) + `","to":"2027-01-15T12:00:00Z","maxFires":100}`, 422, "to", "holds 1440 fires"},
		{"RangeOverDefault", minutely.Id, `{"from":"` + day.Format(time.RFC3339) + `","to":"2027-01-15T12:00:00Z"}`, 422, "to", "more than maxFires (1000)"},
		{"OneOff", oneOff.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T12:00:00Z"}`, 422, "runAt", ""},
		{"Paused", paused.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T12:00:00Z"}`, 409, "", "paused"},
		{"MissingTo", minutely.Id, `{"from":"2027-01-15T11:00:00Z"}`, 400, "to", ""},
		{"NotATime", minutely.Id, `{"from":"yesterday","to":"2027-01-15T12:00:00Z"}`, 400, "from", ""},
		{"UnknownField", minutely.Id, `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T12:00:00Z","count":3}`, 400, "count", ""},
		{"UnknownSchedule", "sch_nope", `{"from":"2027-01-15T11:00:00Z","to":"2027-01-15T12:00:00Z"}`, 404, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.BackfillScheduleWithBodyWithResponse(h.ctx, tc.id, "application/json", strings.NewReader(tc.body))
			p := wantProblem(t, err, r.HTTPResponse, r.Body, tc.status, tc.field)
			if tc.detail != "" && (p.Detail == nil || !strings.Contains(*p.Detail, tc.detail)) && !strings.Contains(string(r.Body), tc.detail) {
				t.Errorf("answer %s does not say %q", r.Body, tc.detail)
			}
		})
	}
	for id, n := range before {
		if got := len(h.firesOf(tid, id)); got != n {
			t.Errorf("schedule %s has %d fires after refused backfills, %d before", id, got, n)
		}
	}
}

// TestBackfillKeepsLargeBackfillsOutOfTheRequest: the events written within
// the request stay within the background threshold; the rest are written
// by the background, and every fire ends with all its events.
func TestBackfillKeepsLargeBackfillsOutOfTheRequest(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{BackgroundThreshold: 25, BackgroundChunk: 10}))
	tid, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "hourly", Cron: ptr("0 * * * *"), EventCount: ptr(10), Target: httpTarget()})
	got := h.backfill(c, s.Id, backfillNow.Add(-10*time.Hour), backfillNow, 0)
	if got.Fires != 10 || got.Events > 25 || got.Events+got.EventsPending != 100 {
		t.Fatalf("backfill: %+v, want 10 fires, at most 25 events written in the request, 100 in all", got)
	}
	for at, f := range h.firesOf(tid, s.Id) {
		counts, err := h.st.EventCountByFire(h.ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if counts[model.EventPending] != 10 {
			t.Errorf("fire at %s has %v events, want 10 pending", at, counts)
		}
	}
}

// TestBackfillQuotas: the tenant's maxEventsStored judges all the events of
// a backfill's new fires before any is written (429 naming the quota),
// and a repeat of a backfill that went through needs no room.
func TestBackfillQuotas(t *testing.T) {
	clk := clockwork.NewFakeClockAt(backfillNow)
	h := newHarness(t, withRealEmitter(t, clk, emitter.Config{}), func(c *master.Config, _ *master.Deps) { c.QuotaCountTTL = -1 })
	tid, c := h.tenant("limited")
	s := h.schedule(c, client.ScheduleCreate{Name: "hourly", Cron: ptr("0 * * * *"), EventCount: ptr(2), Target: httpTarget()})
	planned := 0 // events of the fires planned on create
	for _, f := range h.firesOf(tid, s.Id) {
		planned += f.Count
	}
	h.patchTenant(tid, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxEventsStored: ptr(planned + 10)}})
	from := backfillNow.Add(-6 * time.Hour)
	r, err := c.BackfillScheduleWithResponse(h.ctx, s.Id, client.BackfillRequest{From: from, To: backfillNow})
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusTooManyRequests, "maxEventsStored")
	if !strings.Contains(*p.Detail, "12 more") {
		t.Errorf("refusal %q does not say how many events the backfill adds", *p.Detail)
	}
	if n := len(h.firesOf(tid, s.Id)); n*2 != planned {
		t.Fatalf("%d fires after a refused backfill, want only the %d planned", n, planned/2)
	}
	got := h.backfill(c, s.Id, from.Add(time.Hour), backfillNow, 0) // 5 fires, 10 events
	if got.Fires != 5 || got.Events != 10 {
		t.Fatalf("backfill within the quota: %+v", got)
	}
	if again := h.backfill(c, s.Id, from.Add(time.Hour), backfillNow, 0); again.Existing != 5 || again.Fires != 0 {
		t.Fatalf("repeat at the quota: %+v, want nothing new and no refusal", again)
	}
}
