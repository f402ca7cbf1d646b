package emitter_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// calOracle is the calendar rule written out on formatted local times.
func calOracle(t *testing.T, c *model.Calendar, at time.Time) bool {
	t.Helper()
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		t.Fatal(err)
	}
	lt := at.In(loc)
	if slices.Contains(c.Dates, lt.Format("2006-01-02")) {
		return true
	}
	local := lt.Format("2006-01-02T15:04")
	for _, r := range c.Ranges {
		if r.From <= local && local < r.To {
			return true
		}
	}
	day, clock := strings.ToLower(lt.Weekday().String()[:3]), lt.Format("15:04")
	for _, w := range c.Weekly {
		to := w.To
		if to == "" {
			to = "24:00"
		}
		if slices.Contains(w.Days, day) && w.From <= clock && clock < to {
			return true
		}
	}
	return false
}

// fireMap is a schedule's fires by time (UTC, RFC 3339).
func fireMap(t *testing.T, st store.Driver, id string) map[string]*model.Fire {
	t.Helper()
	out := map[string]*model.Fire{}
	for _, f := range firesOf(t, st, id) {
		out[f.FireTime.UTC().Format(time.RFC3339)] = f
	}
	return out
}

// TestCalendarsAgainstOracle runs passes across the US and European DST
// changes for schedules that name calendars (skip and next_included, in
// zones other than the schedule's), each with a twin that names none and
// so fires at every natural instant. The oracle: every natural instant
// the calendars exclude (a walk of the rule above) is recorded
// skipped_calendar and has no events; with next_included a fire exists at
// the first minute no calendar excludes (a minute-by-minute walk), once,
// with n events, also where that is a natural instant of its own.
func TestCalendarsAgainstOracle(t *testing.T) {
	seed := testseed.Get(t, "EMITTER_CALENDAR_SEED", 37)
	r := rand.New(rand.NewPCG(seed, seed))
	t.Run("USChange", func(t *testing.T) {
		calendarsAgainstOracle(t, r, utc("2027-03-12T00:00:00Z"), utc("2027-03-16T00:00:00Z"))
	})
	t.Run("EuropeanChange", func(t *testing.T) {
		calendarsAgainstOracle(t, r, utc("2027-03-26T00:00:00Z"), utc("2027-03-30T00:00:00Z"))
	})
}

func calendarsAgainstOracle(t *testing.T, r *rand.Rand, from, to time.Time) {
	st := openEmbedded(t)
	ctx := context.Background()

	cals := []*model.Calendar{
		{ID: "cal_ny", TenantID: tenant, Name: "ny", Timezone: "America/New_York",
			Dates:  []string{"2027-03-14", "2027-03-27"},
			Weekly: []model.WeeklyRule{{Days: []string{"sat"}}, {Days: []string{"mon", "wed"}, From: "01:30", To: "03:15"}}},
		{ID: "cal_de", TenantID: tenant, Name: "de", Timezone: "Europe/Berlin",
			Dates:  []string{"2027-03-28"},
			Ranges: []model.CalendarRange{{From: "2027-03-12T22:00", To: "2027-03-13T07:45"}, {From: "2027-03-28T22:00", To: "2027-03-29T03:45"}},
			Weekly: []model.WeeklyRule{{Days: []string{"tue", "thu"}, From: "09:00", To: "17:00"}}},
	}
	for _, c := range cals {
		c.Version, c.CreatedAt, c.UpdatedAt = 1, from, from
		if err := st.CalendarCreate(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	exprs := []struct{ cron, tz string }{
		{"0 * * * *", "Europe/Berlin"}, {"15 2 * * *", "America/New_York"}, {"0 9 * * 1-5", "UTC"},
		{"45 */3 * * *", "Asia/Tokyo"}, {"30 2 * * *", "Europe/Berlin"},
	}
	type pair struct {
		s         *model.Schedule
		twin      string
		calendars []*model.Calendar
	}
	var pairs []pair
	p0 := func(s *model.Schedule) { s.Partition = 0 }
	for i, ex := range exprs {
		for _, on := range []model.OnExcludedPolicy{"", model.OnExcludedNextIncluded} {
			id := "s" + string(rune('a'+i)) + string(on)
			var named []*model.Calendar
			for _, c := range cals {
				if r.IntN(3) > 0 {
					named = append(named, c)
				}
			}
			if len(named) == 0 {
				named = cals[:1]
			}
			s := sched(id, ex.cron, ex.tz, 1+r.IntN(3), p0, func(s *model.Schedule) {
				s.OnExcluded = on
				for _, c := range named {
					s.ExcludeCalendars = append(s.ExcludeCalendars, c.ID)
				}
			})
			twin := sched("twin"+id, ex.cron, ex.tz, 1, p0)
			create(t, st, s, twin)
			pairs = append(pairs, pair{s: s, twin: twin.ID, calendars: named})
		}
	}

	clk := newClock(from)
	e := newEmitter(t, st, clk, func(c *emitter.Config, _ *emitter.Deps) {
		c.Partitions, c.Lead, c.Window = 1, 2*time.Hour, 15*time.Minute
	})
	for now := from; now.Before(to); now = now.Add(time.Hour) {
		setClock(clk, now)
		ps := runPass(t, e)
		if ps.CalendarsRead > len(cals) {
			t.Fatalf("pass at %s read %d calendars; each of the %d at most once", now, ps.CalendarsRead, len(cals))
		}
		if ps.FiresLate != 0 {
			t.Fatalf("late fires at %s", now)
		}
	}

	total := 0
	for _, p := range pairs {
		excluded := func(at time.Time) bool {
			for _, c := range p.calendars {
				if calOracle(t, c, at) {
					return true
				}
			}
			return false
		}
		got := fireMap(t, st, p.s.ID)
		want := map[string]model.FireDecision{}
		for _, nat := range fireTimes(firesOf(t, st, p.twin)) {
			if !nat.Before(to) {
				continue
			}
			k := nat.Format(time.RFC3339)
			if !excluded(nat) {
				want[k] = model.FireEmitted
				continue
			}
			want[k] = model.FireSkippedCalendar
			if p.s.OnExcluded == model.OnExcludedNextIncluded {
				m := nat.Add(time.Minute)
				for excluded(m) {
					m = m.Add(time.Minute)
				}
				want[m.Format(time.RFC3339)] = model.FireEmitted
			}
		}
		skipped := 0
		for k, d := range want {
			f, ok := got[k]
			if !ok {
				t.Errorf("%s: no fire at %s, want %s", p.s.ID, k, d)
				continue
			}
			if f.Decision != d {
				t.Errorf("%s: fire at %s is %s (%s), want %s", p.s.ID, k, f.Decision, f.Note, d)
				continue
			}
			n := len(eventsOf(t, st, f.ID))
			switch d {
			case model.FireSkippedCalendar:
				skipped++
				if n != 0 || !strings.Contains(f.Note, "excluded by calendar cal_") {
					t.Errorf("%s: skipped fire at %s has %d events, note %q", p.s.ID, k, n, f.Note)
				}
			default:
				if n != p.s.EventCount {
					t.Errorf("%s: fire at %s has %d events, want %d (one fire, never two bursts)", p.s.ID, k, n, p.s.EventCount)
				}
			}
		}
		for k, f := range got {
			if _, ok := want[k]; !ok && f.FireTime.Before(to) {
				t.Errorf("%s: unexpected fire at %s (%s, %s)", p.s.ID, k, f.Decision, f.Note)
			}
		}
		total += skipped
	}
	if total == 0 {
		t.Error("no fire excluded: the draw tests nothing")
	}
}

// TestCalendarEditAppliesFromNextWindow: a calendar changed after a window
// was emitted leaves that window's fires as they were and applies to the
// windows scanned after the change.
// It runs on both drivers.
func TestCalendarEditAppliesFromNextWindow(t *testing.T) {
	t.Run("Embedded", func(t *testing.T) { calendarEditApplies(t, openEmbedded(t)) })
	t.Run("Mongo", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts FerretDB")
		}
		st, err := mongo.Open(context.Background(), mongotest.URI(t), mongo.Options{})
		if err != nil {
			t.Fatalf("mongo open: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		calendarEditApplies(t, st)
	})
}

func calendarEditApplies(t *testing.T, st store.Driver) {
	ctx := context.Background()
	from := utc("2027-06-01T10:00:00Z")
	cal := &model.Calendar{ID: "cal_1", TenantID: tenant, Name: "maint", Timezone: "UTC", Version: 1, CreatedAt: from, UpdatedAt: from}
	if err := st.CalendarCreate(ctx, cal); err != nil {
		t.Fatal(err)
	}
	s := sched("s1", "*/10 * * * *", "UTC", 1, func(s *model.Schedule) { s.ExcludeCalendars = []string{"cal_1"} })
	create(t, st, s)
	clk := newClock(from)
	e := newEmitter(t, st, clk, func(c *emitter.Config, _ *emitter.Deps) { c.Lead = 30 * time.Minute })
	runPass(t, e) // emits 10:00 .. 10:20

	upd := *cal
	upd.Ranges = []model.CalendarRange{{From: "2027-06-01T10:00", To: "2027-06-01T11:00"}}
	upd.Version = 2
	if err := st.CalendarUpdate(ctx, &upd, 1); err != nil {
		t.Fatal(err)
	}
	for now := from; now.Before(from.Add(time.Hour)); now = now.Add(10 * time.Minute) {
		setClock(clk, now)
		runPass(t, e)
	}
	got := fireMap(t, st, "s1")
	for k, want := range map[string]model.FireDecision{
		"2027-06-01T10:00:00Z": model.FireEmitted, "2027-06-01T10:20:00Z": model.FireEmitted,
		"2027-06-01T10:30:00Z": model.FireSkippedCalendar, "2027-06-01T10:50:00Z": model.FireSkippedCalendar,
		"2027-06-01T11:00:00Z": model.FireEmitted,
	} {
		if f := got[k]; f == nil || f.Decision != want {
			t.Errorf("fire at %s = %+v, want %s", k, f, want)
		}
	}
}

// TestOneOffNamingACalendar: a one-off that names a calendar is not
// planned with its create (PlanCreated leaves it to Saved), and Saved
// applies the calendar: skipped at runAt, or moved to the next included
// minute with its events.
func TestOneOffNamingACalendar(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	now := utc("2027-06-04T10:00:00Z") // a Friday
	cal := &model.Calendar{ID: "cal_1", TenantID: tenant, Name: "maint", Timezone: "UTC", Version: 1,
		Ranges: []model.CalendarRange{{From: "2027-06-04T10:00", To: "2027-06-04T10:30"}}}
	if err := st.CalendarCreate(ctx, cal); err != nil {
		t.Fatal(err)
	}
	e := newEmitter(t, st, newClock(now), nil)
	for _, on := range []model.OnExcludedPolicy{model.OnExcludedSkip, model.OnExcludedNextIncluded} {
		s := oneOff("o-"+string(on), now.Add(10*time.Minute), 2)
		s.ExcludeCalendars, s.OnExcluded = []string{"cal_1"}, on
		fs, _, err := planOne(ctx, e, s)
		if err != nil || fs != nil {
			t.Fatalf("PlanCreates planned %v (err %v) for a one-off naming a calendar", fs, err)
		}
		create(t, st, s)
		if err := e.Saved(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		got := fireMap(t, st, s.ID)
		skipped := got["2027-06-04T10:10:00Z"]
		if skipped == nil || skipped.Decision != model.FireSkippedCalendar || len(eventsOf(t, st, skipped.ID)) != 0 {
			t.Fatalf("%s: fire at runAt %+v", on, skipped)
		}
		moved := got["2027-06-04T10:30:00Z"]
		switch {
		case on == model.OnExcludedSkip && moved != nil:
			t.Fatalf("skip moved the fire: %+v", moved)
		case on == model.OnExcludedNextIncluded && (moved == nil || len(eventsOf(t, st, moved.ID)) != 2):
			t.Fatalf("next_included: moved fire %+v", moved)
		}
	}
}
