package calendar_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

var locs = map[string]*time.Location{}

// oracleExcludes is the calendar rule written out plainly on formatted
// local times: strings compared, no arithmetic on wall seconds.
func oracleExcludes(t *testing.T, c *model.Calendar, at time.Time) bool {
	t.Helper()
	loc, ok := locs[c.Timezone]
	if !ok {
		var err error
		if loc, err = time.LoadLocation(c.Timezone); err != nil {
			t.Fatal(err)
		}
		locs[c.Timezone] = loc
	}
	lt := at.In(loc)
	if slices.Contains(c.Dates, lt.Format("2006-01-02")) {
		return true
	}
	local := lt.Format("2006-01-02T15:04")
	for _, r := range c.Ranges {
		if strings.HasSuffix(r.From, "Z") || strings.Contains(r.From[10:], "+") || strings.Count(r.From[10:], "-") > 0 {
			f, _ := time.Parse(time.RFC3339, r.From)
			to, _ := time.Parse(time.RFC3339, r.To)
			if !at.Before(f) && at.Before(to) {
				return true
			}
			continue
		}
		if r.From <= local && local < r.To {
			return true
		}
	}
	day := strings.ToLower(lt.Weekday().String()[:3])
	clock := lt.Format("15:04")
	for _, w := range c.Weekly {
		from, to := w.From, w.To
		if to == "" {
			to = "24:00"
		}
		if slices.Contains(w.Days, day) && from <= clock && clock < to {
			return true
		}
	}
	return false
}

// zones with DST on the days drawn, one that changes at midnight
// (America/Santiago), one with a 30-minute shift (Australia/Lord_Howe).
var zones = []string{"Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe", "UTC", "Asia/Kolkata"}

// DST days of the zones, around which dates and ranges are drawn.
var dstDays = []string{"2027-03-28", "2027-10-31", "2027-03-14", "2027-11-07", "2027-04-04", "2027-09-05", "2027-10-03"}

func randomCalendar(r *rand.Rand) *model.Calendar {
	c := &model.Calendar{ID: "cal", Name: "random", Timezone: zones[r.IntN(len(zones))]}
	base, _ := time.Parse("2006-01-02", dstDays[r.IntN(len(dstDays))])
	day := func() time.Time { return base.AddDate(0, 0, r.IntN(9)-4) }
	for range r.IntN(3) {
		c.Dates = append(c.Dates, day().Format("2006-01-02"))
	}
	clock := func() string {
		return time.Date(2000, 1, 1, r.IntN(24), r.IntN(4)*15, 0, 0, time.UTC).Format("15:04")
	}
	for range r.IntN(3) {
		f := day().Add(time.Duration(r.IntN(24*60)) * time.Minute)
		to := f.Add(time.Duration(1+r.IntN(3*24*60)) * time.Minute)
		if r.IntN(2) == 0 {
			c.Ranges = append(c.Ranges, model.CalendarRange{From: f.Format("2006-01-02T15:04"), To: to.Format("2006-01-02T15:04")})
		} else {
			c.Ranges = append(c.Ranges, model.CalendarRange{From: f.Format(time.RFC3339), To: to.Format(time.RFC3339)})
		}
	}
	days := []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	for range r.IntN(3) {
		w := model.WeeklyRule{}
		for _, d := range days {
			if r.IntN(3) == 0 {
				w.Days = append(w.Days, d)
			}
		}
		if len(w.Days) == 0 {
			w.Days = []string{"sun"}
		}
		switch r.IntN(4) {
		case 0: // whole day
		case 1:
			w.From = clock()
		case 2:
			w.To = clock()
			if w.To == "00:00" {
				w.To = "06:00"
			}
		default:
			a, b := clock(), clock()
			if a == b {
				b = "24:00"
			}
			w.From, w.To = min(a, b), max(a, b)
		}
		c.Weekly = append(c.Weekly, w)
	}
	return c
}

func compile(t *testing.T, c *model.Calendar) *calendar.Calendar {
	t.Helper()
	cc, err := calendar.Compile(c)
	if err != nil {
		t.Fatalf("compile %+v: %v", c, err)
	}
	return cc
}

// TestAgainstOracle compares Excludes with the oracle on every minute of
// the days around DST changes, and NextIncluded and Decide with a walk
// minute by minute, for random calendars of one or two in a set.
func TestAgainstOracle(t *testing.T) {
	seed := testseed.Get(t, "CALENDAR_SEED", 37)
	r := rand.New(rand.NewPCG(seed, seed))
	for round := range 40 {
		models := []*model.Calendar{randomCalendar(r)}
		if r.IntN(3) == 0 {
			models = append(models, randomCalendar(r))
		}
		var set calendar.Set
		for _, m := range models {
			set = append(set, compile(t, m))
		}
		oracle := func(at time.Time) bool {
			for _, m := range models {
				if oracleExcludes(t, m, at) {
					return true
				}
			}
			return false
		}
		base, _ := time.Parse("2006-01-02", dstDays[r.IntN(len(dstDays))])
		start := base.Add(-3 * 24 * time.Hour)
		// Every minute for six days, every Excludes against the oracle.
		var minutes []time.Time
		for m := start; m.Before(start.Add(6 * 24 * time.Hour)); m = m.Add(time.Minute) {
			minutes = append(minutes, m)
			if c, _ := set.Excludes(m); (c != nil) != oracle(m) {
				t.Fatalf("round %d: %v at %s: Excludes %v, oracle %v", round, models, m.Format(time.RFC3339), c != nil, oracle(m))
			}
		}
		// NextIncluded from random instants against a walk.
		for range 30 {
			at := minutes[r.IntN(len(minutes))].Add(time.Duration(r.IntN(60)) * time.Second)
			want := at
			if oracle(want) {
				want = want.Truncate(time.Minute).Add(time.Minute)
				for oracle(want) {
					want = want.Add(time.Minute)
				}
			}
			got, ok := set.NextIncluded(at)
			if !ok || !got.Equal(want) {
				t.Fatalf("round %d: %v: NextIncluded(%s) = %s %v, walk %s", round, models, at.Format(time.RFC3339), got.Format(time.RFC3339), ok, want.Format(time.RFC3339))
			}
			d := calendar.Decide(set, model.OnExcludedNextIncluded, at)
			if d.Excluded() != oracle(at) || d.Excluded() && !d.To.Equal(want) {
				t.Fatalf("round %d: Decide(%s) = %+v, oracle excluded %v to %s", round, at, d, oracle(at), want)
			}
			if s := calendar.Decide(set, model.OnExcludedSkip, at); s.Excluded() != oracle(at) || !s.To.IsZero() {
				t.Fatalf("round %d: Decide skip(%s) = %+v", round, at, s)
			}
		}
	}
}

func TestDaysInCalendarZone(t *testing.T) {
	c := compile(t, &model.Calendar{ID: "c1", Name: "xmas", Timezone: "Pacific/Auckland", Dates: []string{"2027-12-25"}})
	// 2027-12-25 00:00 in Auckland (NZDT, +13) is 2027-12-24T11:00Z.
	for _, tc := range []struct {
		at   string
		want bool
	}{
		{"2027-12-24T10:59:00Z", false},
		{"2027-12-24T11:00:00Z", true},
		{"2027-12-25T10:59:00Z", true},
		{"2027-12-25T11:00:00Z", false},
	} {
		at, _ := time.Parse(time.RFC3339, tc.at)
		if got, reason := c.Excludes(at); got != tc.want {
			t.Errorf("Excludes(%s) = %v (%s), want %v", tc.at, got, reason, tc.want)
		}
	}
	at, _ := time.Parse(time.RFC3339, "2027-12-24T12:00:00Z")
	d := calendar.Decide(calendar.Set{c}, model.OnExcludedNextIncluded, at)
	if want := "2027-12-25T11:00:00Z"; d.To.UTC().Format(time.RFC3339) != want {
		t.Errorf("moved to %s, want %s", d.To.UTC().Format(time.RFC3339), want)
	}
	if n := d.Note(); !strings.Contains(n, "c1") || !strings.Contains(n, "date 2027-12-25") || !strings.Contains(n, "moved to 2027-12-25T11:00:00Z") {
		t.Errorf("note %q", n)
	}
}

func TestNoIncludedInstant(t *testing.T) {
	c := compile(t, &model.Calendar{ID: "all", Timezone: "UTC", Weekly: []model.WeeklyRule{{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}}}})
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if got, ok := (calendar.Set{c}).NextIncluded(at); ok {
		t.Fatalf("NextIncluded = %s, want none", got)
	}
	if d := calendar.Decide(calendar.Set{c}, model.OnExcludedNextIncluded, at); !d.Excluded() || !d.To.IsZero() {
		t.Fatalf("Decide = %+v, want excluded without a move", d)
	}
}

func TestCompileNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     model.Calendar
		field string
	}{
		{"UnknownZone", model.Calendar{Timezone: "Mars/Base"}, "timezone"},
		{"EmptyZone", model.Calendar{}, "timezone"},
		{"BadDate", model.Calendar{Timezone: "UTC", Dates: []string{"2027-02-30"}}, "dates[0]"},
		{"BadDay", model.Calendar{Timezone: "UTC", Weekly: []model.WeeklyRule{{Days: []string{"sat", "funday"}}}}, "weekly[0].days[1]"},
		{"NoDays", model.Calendar{Timezone: "UTC", Weekly: []model.WeeklyRule{{}}}, "weekly[0].days"},
		{"BadClock", model.Calendar{Timezone: "UTC", Weekly: []model.WeeklyRule{{Days: []string{"sat"}, From: "9:00"}}}, "weekly[0].from"},
		{"FromNotBeforeTo", model.Calendar{Timezone: "UTC", Weekly: []model.WeeklyRule{{Days: []string{"sat"}, From: "10:00", To: "10:00"}}}, "weekly[0].to"},
		{"RangeBackwards", model.Calendar{Timezone: "UTC", Ranges: []model.CalendarRange{{From: "2027-01-02T00:00", To: "2027-01-01T00:00"}}}, "ranges[0].to"},
		{"RangeMixed", model.Calendar{Timezone: "UTC", Ranges: []model.CalendarRange{{From: "2027-01-01T00:00", To: "2027-01-02T00:00:00Z"}}}, "ranges[0].to"},
		{"RangeSeconds", model.Calendar{Timezone: "UTC", Ranges: []model.CalendarRange{{From: "2027-01-01T00:00:30Z", To: "2027-01-02T00:00:00Z"}}}, "ranges[0].from"},
		{"RangeGarbage", model.Calendar{Timezone: "UTC", Ranges: []model.CalendarRange{{From: "tomorrow", To: "2027-01-02T00:00"}}}, "ranges[0].from"},
		{"TooMany", model.Calendar{Timezone: "UTC", Dates: slices.Repeat([]string{"2027-01-01"}, calendar.MaxEntries+1)}, "dates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := calendar.Compile(&tc.c)
			var fe schedule.Errors
			if !errors.As(err, &fe) || len(fe.Reasons(tc.field)) == 0 {
				t.Fatalf("Compile = %v, want an error naming %s", err, tc.field)
			}
			if !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("not ErrInvalid: %v", err)
			}
		})
	}
}
