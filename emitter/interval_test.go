package emitter_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// crashyStore fails, at random, the watermark advance (the window is
// scanned again) and the interval advance (the index still says the fires
// are due), as a crash between the writes of a window would leave them.
type crashyStore struct {
	emitter.Store
	mu  sync.Mutex
	rng *rand.Rand
	on  bool
}

func (c *crashyStore) fail() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on && c.rng.IntN(4) == 0
}

func (c *crashyStore) WatermarkAdvance(ctx context.Context, w model.Watermark) error {
	if c.fail() {
		return errInjected
	}
	return c.Store.WatermarkAdvance(ctx, w)
}

func (c *crashyStore) ScheduleIntervalAdvance(ctx context.Context, p *store.ScheduleIntervalAdvanceParams) error {
	if c.fail() {
		return errInjected
	}
	return c.Store.ScheduleIntervalAdvance(ctx, p)
}

// intervalOracle lists first+k*every in [from, to), counting milliseconds.
func intervalOracle(first time.Time, every time.Duration, from, to time.Time) []time.Time {
	var out []time.Time
	for ms := first.UnixMilli(); ms < to.UnixMilli(); ms += every.Milliseconds() {
		if t := time.UnixMilli(ms).UTC(); !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}

// TestIntervalFiresOnceAcrossRescansAndTwoEmitters: an interval schedule
// over a DST change fires every interval of elapsed time exactly once
// (each fire with its events once), whichever of two emitters scans a
// window, however often a window is scanned again after a failed
// watermark or index advance.
func TestIntervalFiresOnceAcrossRescansAndTwoEmitters(t *testing.T) {
	seed := testseed.Get(t, "EMITTER_INTERVAL_SEED", 20261202)
	rng := rand.New(rand.NewPCG(seed, 37))
	st := openEmbedded(t)
	cs := &crashyStore{Store: st, rng: rand.New(rand.NewPCG(seed, 38))}
	start := utc("2027-03-28T00:00:00Z") // Berlin springs forward at 01:00Z
	clk := newClock(start)
	e1 := newEmitter(t, cs, clk, nil)
	e2 := newEmitter(t, cs, clk, nil)
	first := start.Add(3*time.Minute + 20*time.Second + 500*time.Millisecond)
	s := sched("iv1", "", "Europe/Berlin", 2, func(s *model.Schedule) {
		// fire_all: a window scanned again after its watermark advance
		// failed may be a missed one by then; its fires are late, not
		// superseded.
		s.Interval, s.StartAt, s.CreatedAt, s.Misfire = 7*time.Minute, &first, start, model.MisfireFireAll
	})
	create(t, st, s)
	if err := e1.Saved(t.Context(), s, nil); err != nil {
		t.Fatal(err)
	}
	cs.on = true
	end := start.Add(4 * time.Hour)
	for clk.Now().Before(end) {
		clk.Advance(time.Duration(10+rng.IntN(170)) * time.Second)
		for _, e := range [][]*emitter.Emitter{{e1}, {e2}, {e1, e2}}[rng.IntN(3)] {
			if _, err := e.RunPass(t.Context()); err != nil && !errors.Is(err, errInjected) {
				t.Fatalf("RunPass: %v", err)
			}
		}
	}
	cs.on = false
	runPass(t, e1)

	// The index has moved past every window scanned: the next pass does
	// not read the schedule before its next fire.
	wm, err := st.WatermarkGet(t.Context(), s.Partition)
	if err != nil {
		t.Fatal(err)
	}
	due, err := st.ScheduleIntervalDue(t.Context(), &store.ScheduleIntervalDueParams{Partition: s.Partition, Before: wm.Until, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 0 {
		t.Fatalf("index: %s still due before the watermark %v (next %v)", due[0].ID, wm.Until, due[0].IntervalNextFire())
	}

	fires := firesOf(t, st, s.ID)
	var before []time.Time
	for _, f := range fires {
		if f.FireTime.Before(clk.Now()) {
			before = append(before, f.FireTime.UTC())
		}
		if f.Decision != model.FireEmitted && f.Decision != model.FireLate {
			t.Errorf("fire at %v: decision %s", f.FireTime, f.Decision)
		}
		if n := len(eventsOf(t, st, f.ID)); n != s.EventCount {
			t.Errorf("fire at %v has %d events, want %d", f.FireTime, n, s.EventCount)
		}
	}
	want := intervalOracle(first, s.Interval, start, clk.Now())
	if !slices.EqualFunc(before, want, time.Time.Equal) {
		t.Fatalf("seed %d: fires before %v\n got %v\nwant %v", seed, clk.Now(), before, want)
	}
	for i := 1; i < len(fires); i++ {
		if d := fires[i].FireTime.Sub(fires[i-1].FireTime); d != s.Interval {
			t.Fatalf("fires %v and %v are %v apart, want %v (elapsed time across DST)", fires[i-1].FireTime, fires[i].FireTime, d, s.Interval)
		}
	}
}

// TestIntervalMisfireAfterDowntime: the fires of an interval schedule
// missed while no emitter ran follow its misfire policy, as a cron
// schedule's do, and the index then carries on from the present.
func TestIntervalMisfireAfterDowntime(t *testing.T) {
	st := openEmbedded(t)
	start := utc("2027-10-31T00:30:00Z") // Berlin falls back at 01:00Z
	clk := newClock(start)
	e := newEmitter(t, st, clk, nil)
	first := start.Add(5 * time.Minute)
	mk := func(id string, mp model.MisfirePolicy) *model.Schedule {
		return sched(id, "", "Europe/Berlin", 1, func(s *model.Schedule) {
			s.Interval, s.StartAt, s.CreatedAt, s.Misfire = 5*time.Minute, &first, start, mp
		})
	}
	all, once, skip := mk("ivall", model.MisfireFireAll), mk("ivonce", model.MisfireFireOnce), mk("ivskip", model.MisfireSkip)
	create(t, st, all, once, skip)
	runPass(t, e)
	setClock(clk, start.Add(42*time.Minute)) // down from 00:32 to 01:12
	runPass(t, e)
	for range 18 {
		clk.Advance(time.Minute)
		runPass(t, e)
	}

	// The pass at 00:30 scanned up to 00:33 (lead 2m); the windows from
	// 00:33 to 01:12 were missed: fires 00:35 .. 01:10.
	missed := intervalOracle(first, 5*time.Minute, start.Add(3*time.Minute), start.Add(42*time.Minute))
	onTime := intervalOracle(first, 5*time.Minute, start.Add(42*time.Minute), start.Add(60*time.Minute+time.Millisecond))
	check := func(s *model.Schedule, late []time.Time) {
		t.Helper()
		var gotLate, gotOn []time.Time
		for _, f := range firesOf(t, st, s.ID) {
			if f.FireTime.After(start.Add(60 * time.Minute)) {
				continue
			}
			switch f.Decision {
			case model.FireLate:
				gotLate = append(gotLate, f.FireTime.UTC())
			case model.FireEmitted:
				gotOn = append(gotOn, f.FireTime.UTC())
			default:
				t.Errorf("%s: fire at %v decided %s", s.ID, f.FireTime, f.Decision)
			}
		}
		if !slices.EqualFunc(gotLate, late, time.Time.Equal) {
			t.Errorf("%s: late fires\n got %v\nwant %v", s.ID, gotLate, late)
		}
		if !slices.EqualFunc(gotOn, onTime, time.Time.Equal) {
			t.Errorf("%s: fires on time\n got %v\nwant %v", s.ID, gotOn, onTime)
		}
	}
	check(all, missed)
	check(once, missed[len(missed)-1:])
	check(skip, nil)
}

// TestCronsFireOncePerInstant: a schedule with several crons fires at the
// union of their instants, each once even where two of them name the
// same minute, against a minute-by-minute oracle, through passes and
// Saved alike.
func TestCronsFireOncePerInstant(t *testing.T) {
	st := openEmbedded(t)
	start := utc("2027-03-28T00:00:00Z")
	clk := newClock(start)
	e := newEmitter(t, st, clk, nil)
	s := sched("crons1", "", "Europe/Berlin", 1, func(s *model.Schedule) {
		s.Crons = []string{"*/5 * * * *", "*/3 * * * *", "0 2 * * *"}
	})
	create(t, st, s)
	if err := e.Saved(t.Context(), s, keysOf(t, s)); err != nil {
		t.Fatal(err)
	}
	end := start.Add(3 * time.Hour)
	for clk.Now().Before(end) {
		clk.Advance(time.Minute)
		runPass(t, e)
	}
	loc, _ := time.LoadLocation(s.Timezone)
	var want []time.Time
	for m := start; m.Before(end); m = m.Add(time.Minute) {
		l := m.In(loc)
		if l.Minute()%5 == 0 || l.Minute()%3 == 0 || l.Hour() == 2 && l.Minute() == 0 {
			want = append(want, m)
		}
	}
	var got []time.Time
	for _, f := range firesOf(t, st, s.ID) {
		if f.FireTime.Before(end) {
			got = append(got, f.FireTime.UTC())
		}
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("fires\n got %v\nwant %v", got, want)
	}
}

// TestIntervalFiresGoThroughCalendars: an interval schedule's fires on a
// day its calendar excludes (judged in the calendar's zone) are recorded
// as skipped_calendar, as a cron schedule's are.
func TestIntervalFiresGoThroughCalendars(t *testing.T) {
	st := openEmbedded(t)
	from := utc("2027-01-01T11:00:00Z")
	cal := &model.Calendar{ID: "cal_1", TenantID: tenant, Name: "holiday", Timezone: "Europe/Berlin",
		Dates: []string{"2027-01-02"}, Version: 1, CreatedAt: from, UpdatedAt: from}
	if err := st.CalendarCreate(t.Context(), cal); err != nil {
		t.Fatal(err)
	}
	first := utc("2027-01-01T12:00:00Z")
	s := sched("iv", "", "UTC", 1, func(s *model.Schedule) {
		s.Interval, s.StartAt, s.CreatedAt, s.ExcludeCalendars = 6*time.Hour, &first, from, []string{"cal_1"}
	})
	create(t, st, s)
	clk := newClock(from)
	e := newEmitter(t, st, clk, func(c *emitter.Config, _ *emitter.Deps) { c.Lead = 2 * time.Hour })
	for now := from; now.Before(utc("2027-01-03T02:00:00Z")); now = now.Add(time.Hour) {
		setClock(clk, now)
		runPass(t, e)
	}
	got := fireMap(t, st, "iv")
	want := map[string]model.FireDecision{
		"2027-01-01T12:00:00Z": model.FireEmitted, "2027-01-01T18:00:00Z": model.FireEmitted,
		// 2 January in Berlin is 23:00Z on the 1st to 23:00Z on the 2nd.
		"2027-01-02T00:00:00Z": model.FireSkippedCalendar, "2027-01-02T06:00:00Z": model.FireSkippedCalendar,
		"2027-01-02T12:00:00Z": model.FireSkippedCalendar, "2027-01-02T18:00:00Z": model.FireSkippedCalendar,
		"2027-01-03T00:00:00Z": model.FireEmitted,
	}
	for k, d := range want {
		if f := got[k]; f == nil || f.Decision != d {
			t.Errorf("fire at %s = %+v, want %s", k, f, d)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d fires, want %d: %v", len(got), len(want), got)
	}
}

// TestIntervalResumedGap: an interval schedule resumed after a pause that
// ended at since fires the gap from since to the current window by its
// misfire policy (fire_all: each, late), and what follows on time.
func TestIntervalResumedGap(t *testing.T) {
	st := openEmbedded(t)
	first := utc("2027-03-28T00:02:30Z")
	since := utc("2027-03-28T00:40:00Z")
	now := utc("2027-03-28T01:05:50Z")
	clk := newClock(now)
	e := newEmitter(t, st, clk, nil)
	s := sched("iv", "", "Europe/Berlin", 1, func(s *model.Schedule) {
		s.Interval, s.StartAt, s.Misfire = 5*time.Minute, &first, model.MisfireFireAll
	})
	create(t, st, s)
	if err := e.Resumed(t.Context(), s, nil, since); err != nil {
		t.Fatal(err)
	}
	lateEnd := now.Truncate(time.Minute)
	var late, onTime []time.Time
	for _, f := range firesOf(t, st, s.ID) {
		switch f.Decision {
		case model.FireLate:
			late = append(late, f.FireTime.UTC())
		case model.FireEmitted:
			onTime = append(onTime, f.FireTime.UTC())
		}
	}
	if want := intervalOracle(first, s.Interval, since, lateEnd); !slices.EqualFunc(late, want, time.Time.Equal) {
		t.Errorf("late fires\n got %v\nwant %v", late, want)
	}
	if len(onTime) == 0 || !onTime[0].Equal(utc("2027-03-28T01:07:30Z")) {
		t.Errorf("fires on time %v, want the first at 01:07:30", onTime)
	}
}
