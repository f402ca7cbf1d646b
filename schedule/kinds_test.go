package schedule_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/schedule"
)

func TestCompileRejectsIntervalAndCrons(t *testing.T) {
	many := make([]string, schedule.MaxCrons+1)
	for i := range many {
		many[i] = strconv.Itoa(i) + " 9 * * *"
	}
	cases := []struct {
		name   string
		mutate func(*schedule.Spec)
		field  string
		reason string
	}{
		{"IntervalBelowAMinute", func(s *schedule.Spec) { s.Cron, s.Interval = nil, ptr("59s") }, "interval", "must be at least 1m0s"},
		{"IntervalUnparsable", func(s *schedule.Spec) { s.Cron, s.Interval = nil, ptr("every hour") }, "interval", `not a duration such as "90m" or "6h"`},
		{"IntervalNegative", func(s *schedule.Spec) { s.Cron, s.Interval = nil, ptr("-90m") }, "interval", "must be at least 1m0s"},
		{"IntervalFraction", func(s *schedule.Spec) { s.Cron, s.Interval = nil, ptr("90.5s") }, "interval", "must be a whole number of seconds"},
		{"CronAndInterval", func(s *schedule.Spec) { s.Interval = ptr("90m") }, "interval", schedule.MutuallyExclusive},
		{"CronAndCrons", func(s *schedule.Spec) { s.Crons = []string{"0 9 * * *"} }, "crons", schedule.MutuallyExclusive},
		{"CronsAndInterval", func(s *schedule.Spec) { s.Cron, s.Crons, s.Interval = nil, []string{"0 9 * * *"}, ptr("1h") }, "crons", schedule.MutuallyExclusive},
		{"RunAtAndInterval", func(s *schedule.Spec) { s.Cron, s.RunAt, s.Interval = nil, ptr(testNow.Add(time.Hour)), ptr("1h") }, "interval", schedule.MutuallyExclusive},
		{"RunAtAndCrons", func(s *schedule.Spec) {
			s.Cron, s.RunAt, s.Crons = nil, ptr(testNow.Add(time.Hour)), []string{"0 9 * * *"}
		}, "crons", schedule.MutuallyExclusive},
		{"CronsEmpty", func(s *schedule.Spec) { s.Cron, s.Crons = nil, []string{} }, "crons", "must hold at least one expression"},
		{"CronsTooMany", func(s *schedule.Spec) { s.Cron, s.Crons = nil, many }, "crons", "holds 17 expressions; at most 16"},
		{"CronsInvalid", func(s *schedule.Spec) { s.Cron, s.Crons = nil, []string{"0 9 * * 1-5", "0 25 * * *"} }, "crons[1]", "hour: 25 is out of range 0-23"},
		{"CronsTwice", func(s *schedule.Spec) { s.Cron, s.Crons = nil, []string{"0 9 * * 1-5", "0 9 * * mon-fri"} }, "crons[1]", "the same expression as crons[0]"},
		{"CronsTooManyChildren", func(s *schedule.Spec) { s.Cron, s.Crons = nil, []string{"*/10 0-11 * * *", "*/10 12-23 * * *"} },
			"crons", "together need 144 children; at most 100"},
		{"JitterNotShorterThanInterval", func(s *schedule.Spec) { s.Cron, s.Interval, s.Jitter = nil, ptr("15m"), "15m" },
			"jitter", "must be shorter than the interval (15m0s)"},
		{"StartAtWithRunAtNamesIntervals", func(s *schedule.Spec) { s.Cron, s.RunAt, s.StartAt = nil, ptr(testNow.Add(time.Hour)), ptr(testNow) },
			"startAt", "applies to cron and interval schedules only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := valid()
			tc.mutate(&sp)
			_, err := schedule.Compile(sp, testLimits(), testNow)
			fe, ok := err.(schedule.Errors)
			if !ok {
				t.Fatalf("Compile: got %v (%T), want schedule.Errors", err, err)
			}
			if got := fe.Reasons(tc.field); !slices.Contains(got, tc.reason) {
				t.Fatalf("reasons for %s: got %q (all: %v), want %q", tc.field, got, err, tc.reason)
			}
		})
	}
}

func TestCompileIntervalAndCrons(t *testing.T) {
	sp := valid()
	sp.Cron, sp.Interval, sp.Timezone = nil, ptr("90m"), "Europe/Berlin"
	c, err := schedule.Compile(sp, testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.Schedule.Interval != 90*time.Minute || c.Schedule.Cron != "" || len(c.Keys) != 0 {
		t.Fatalf("interval compiled to %+v keys %v", c.Schedule, c.Keys)
	}
	if got := c.Describe(); got != "every 90 minutes from its creation" {
		t.Fatalf("Describe: %q", got)
	}
	m := c.Schedule
	m.ID, m.CreatedAt = "s1", time.Date(2026, 3, 29, 0, 10, 0, 0, time.UTC)
	if got := c.Children(&m); len(got) != 0 {
		t.Fatalf("an interval schedule has no children: %v", got)
	}
	back, err := schedule.FromSchedule(&m, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := back.Describe(), "every 90 minutes from 2026-03-29T01:10:00+01:00"; got != want {
		t.Fatalf("Describe of the stored schedule: %q, want %q", got, want)
	}
	if got := schedule.SpecFromSchedule(&m).Interval; got == nil || *got != "1h30m0s" {
		t.Fatalf("SpecFromSchedule interval %v", got)
	}

	sp = valid()
	sp.Cron, sp.Crons = nil, []string{"0 9 * * 1-5", "30 12 * * 6", "0 9 * * mon-fri"}
	if _, err := schedule.Compile(sp, testLimits(), testNow); err == nil {
		t.Fatal("crons[2] repeats crons[0] in other words: want an error")
	}
	sp.Crons = []string{"0 9 * * 1-5", "30 12 * * 6", "0 9 * * *"}
	c, err = schedule.Compile(sp, testLimits(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0 9 * * 1-5", "30 12 * * 6", "0 9 * * *"}; !slices.Equal(c.Schedule.Crons, want) {
		t.Fatalf("crons %v, want %v", c.Schedule.Crons, want)
	}
	if d := c.Describe(); strings.Count(d, "; and ") != 2 {
		t.Fatalf("Describe of three crons: %q", d)
	}
	seen := map[cron.Key]bool{}
	for _, k := range c.Keys {
		if seen[k] {
			t.Fatalf("key %v twice in %v", k, c.Keys)
		}
		seen[k] = true
	}
	m = c.Schedule
	m.ID = "s2"
	back, err = schedule.FromSchedule(&m, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Keys, c.Keys) {
		t.Fatalf("FromSchedule keys %v, want %v", back.Keys, c.Keys)
	}
}

// TestIntervalAcrossDST: an interval is elapsed time from its first fire,
// whatever the zone does. The oracle counts whole seconds from the anchor
// in Unix time.
func TestIntervalAcrossDST(t *testing.T) {
	seed := testseed.Get(t, "SCHEDULE_INTERVAL_SEED", 20261202)
	r := rand.New(rand.NewPCG(seed, 37))
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "UTC"}
	// Days with a DST change in one of the zones, and the days after.
	days := []time.Time{
		time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 4, 0, 0, 0, 0, time.UTC),
	}
	for i := range 200 {
		sp := valid()
		sp.Cron, sp.Timezone = nil, zones[r.IntN(len(zones))]
		iv := time.Duration(60+r.IntN(2*24*3600)) * time.Second
		if i%4 == 0 {
			iv = time.Duration(1+r.IntN(180)) * time.Minute
		}
		sp.Interval = ptr(iv.String())
		day := days[r.IntN(len(days))]
		anchor := day.Add(time.Duration(r.IntN(48*3600)-24*3600)*time.Second + time.Duration(r.IntN(1000))*time.Millisecond)
		useStart := r.IntN(2) == 0
		if useStart {
			sp.StartAt = &anchor
		}
		c, err := schedule.Compile(sp, testLimits(), anchor.Add(-time.Hour))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		m := c.Schedule
		m.CreatedAt = anchor.Add(-time.Hour)
		if !useStart {
			m.CreatedAt = anchor
		}
		c.Schedule = m
		now := anchor.Add(time.Duration(r.IntN(6*3600)-3*3600) * time.Second)
		k := 1 + r.IntN(40)
		got := c.NextFireTimes(now, k)

		// Oracle: whole milliseconds from the epoch.
		first := anchor.UnixMilli()
		if anchor.Nanosecond()%int(time.Millisecond) != 0 {
			first++
		}
		if !useStart {
			first += iv.Milliseconds()
		}
		var want []time.Time
		for f := first; len(want) < k; f += iv.Milliseconds() {
			if tm := time.UnixMilli(f).UTC(); tm.After(now) {
				want = append(want, tm)
			}
		}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("case %d (seed %d): %s every %s, first %v, after %v:\n got %v\nwant %v", i, seed, sp.Timezone, iv, time.UnixMilli(first).UTC(), now, got, want)
		}
		for j, p := range c.PreviewAt("s", got) {
			if p.DST != "" {
				t.Fatalf("case %d: fire %d marked %q: an interval has no DST marks", i, j, p.DST)
			}
		}
	}
}

// TestCronsUnionAgainstOracle: several crons fire at the union of their
// instants, each once, the same whether listed (NextFireTimes) or found by
// the union of their children keys (as the emitter's scan finds them),
// against an oracle that walks every minute and asks each expression alone;
// and a jitter is accepted exactly when it is shorter than every gap of
// the union.
func TestCronsUnionAgainstOracle(t *testing.T) {
	seed := testseed.Get(t, "SCHEDULE_CRONS_SEED", 20261202)
	r := rand.New(rand.NewPCG(seed, 38))
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"}
	minutes := []string{"0", "30", "*/15", "5,35", "59", "0-2", "*/20"}
	hours := []string{"*", "2", "1-3", "9", "*/6", "12", "0,23"}
	doms := []string{"*", "*", "1", "29-31", "*/2"}
	dows := []string{"*", "*", "1-5", "6", "0", "sun,wed"}
	froms := []time.Time{
		time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 6, 0, 0, 0, time.UTC),
	}
	lim := testLimits()
	lim.MaxChildren = 1 << 20
	for i := range 60 {
		sp := valid()
		sp.Cron, sp.Timezone = nil, zones[r.IntN(len(zones))]
		for range 1 + r.IntN(4) {
			e := minutes[r.IntN(len(minutes))] + " " + hours[r.IntN(len(hours))] + " " + doms[r.IntN(len(doms))] + " * " + dows[r.IntN(len(dows))]
			if !slices.Contains(sp.Crons, e) {
				sp.Crons = append(sp.Crons, e)
			}
		}
		from := froms[r.IntN(len(froms))]
		to := from.Add(3 * 24 * time.Hour)
		c, err := schedule.Compile(sp, lim, from)
		if err != nil {
			var fe schedule.Errors
			if e, ok := err.(schedule.Errors); ok {
				fe = e
			}
			if len(fe) == 1 && strings.HasPrefix(fe[0].Field, "crons[") && strings.Contains(fe[0].Reason, "same expression") {
				continue
			}
			t.Fatalf("case %d %v: %v", i, sp.Crons, err)
		}
		loc, _ := time.LoadLocation(sp.Timezone)

		// Oracle: each expression alone, then every minute in turn.
		sets := make([]map[int64]bool, len(sp.Crons))
		for j, text := range sp.Crons {
			e, err := cron.Parse(text)
			if err != nil {
				t.Fatal(err)
			}
			sets[j] = map[int64]bool{}
			for _, f := range cron.NextFireTimes(e, loc, from, 5000) {
				if f.Before(to) {
					sets[j][f.Unix()] = true
				}
			}
		}
		var want []time.Time
		for m := from.Add(time.Minute); m.Before(to); m = m.Add(time.Minute) {
			for _, s := range sets {
				if s[m.Unix()] {
					want = append(want, m)
					break
				}
			}
		}

		var got []time.Time
		for _, f := range c.NextFireTimes(from, len(want)+1) {
			if f.Before(to) {
				got = append(got, f)
			}
		}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("case %d (seed %d) %s %q: NextFireTimes\n got %v\nwant %v", i, seed, sp.Timezone, sp.Crons, got, want)
		}

		own := map[cron.Key]bool{}
		for _, k := range c.Keys {
			own[k] = true
		}
		var byKeys []time.Time
		for _, sl := range cron.AppendEligible(nil, loc, from.Add(time.Minute), to) {
			if own[sl.Key] {
				byKeys = append(byKeys, sl.At)
			}
		}
		slices.SortFunc(byKeys, time.Time.Compare)
		if !slices.EqualFunc(slices.CompactFunc(byKeys, time.Time.Equal), want, time.Time.Equal) {
			t.Fatalf("case %d (seed %d) %s %q: children keys\n got %v\nwant %v", i, seed, sp.Timezone, sp.Crons, byKeys, want)
		}

		// Jitter against the union's smallest gap within (from, endAt].
		if len(want) < 2 {
			continue
		}
		gap := time.Duration(1<<63 - 1)
		for j := 1; j < len(want); j++ {
			gap = min(gap, want[j].Sub(want[j-1]))
		}
		for _, j := range []time.Duration{gap - time.Second, gap, gap + time.Minute} {
			if j <= 0 || j > lim.MaxWindow {
				continue
			}
			sj := sp
			sj.Jitter, sj.EndAt = j.String(), ptr(want[len(want)-1])
			_, err := schedule.Compile(sj, lim, from)
			if accepted := err == nil; accepted != (j < gap) {
				t.Fatalf("case %d (seed %d) %q: jitter %s with smallest gap %s: accepted=%v (%v)", i, seed, sp.Crons, j, gap, accepted, err)
			}
		}
	}
}
