package cron

import (
	"strings"
	"testing"
	"time"
)

// TestFireTimes checks hand-computed fire instants through both
// NextFireTimes and Children+AppendEligible.
func TestFireTimes(t *testing.T) {
	cases := []struct {
		name, expr, tz string
		from, to       time.Time // window; NextFireTimes starts just before from
		want           []time.Time
	}{
		{"spring forward NY 02:30 fires at 03:00 EDT once", "30 2 * * *", "America/New_York",
			utc(2026, 3, 8, 0, 0), utc(2026, 3, 10, 0, 0),
			[]time.Time{utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)}},
		{"spring forward NY every hour skips 02:30", "30 * * * *", "America/New_York",
			utc(2026, 3, 8, 5, 0), utc(2026, 3, 8, 9, 0),
			[]time.Time{utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 30), utc(2026, 3, 8, 8, 30)}},
		{"spring forward NY 02:00-02:59 hourly list fires once", "0,59 2 * * *", "America/New_York",
			utc(2026, 3, 8, 0, 0), utc(2026, 3, 9, 0, 0),
			[]time.Time{utc(2026, 3, 8, 7, 0)}},
		{"Lord_Howe gap 02:00-02:30 fires at 02:30", "15 2 * * *", "Australia/Lord_Howe",
			utc(2026, 10, 3, 12, 0), utc(2026, 10, 4, 12, 0),
			[]time.Time{utc(2026, 10, 3, 15, 30)}},
		{"Lord_Howe 02:45 after gap is normal", "45 2 * * *", "Australia/Lord_Howe",
			utc(2026, 10, 3, 12, 0), utc(2026, 10, 4, 12, 0),
			[]time.Time{utc(2026, 10, 3, 15, 45)}},
		{"fall back NY 01:30 fires once at first occurrence", "30 1 * * *", "America/New_York",
			utc(2026, 11, 1, 0, 0), utc(2026, 11, 2, 0, 0),
			[]time.Time{utc(2026, 11, 1, 5, 30)}},
		{"fall back NY */30 fires on both real 01:30s", "*/30 * * * *", "America/New_York",
			utc(2026, 11, 1, 5, 0), utc(2026, 11, 1, 7, 1),
			[]time.Time{utc(2026, 11, 1, 5, 0), utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 0), utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 7, 0)}},
		{"fall back Lord_Howe 01:45 fires once", "45 1 * * *", "Australia/Lord_Howe",
			utc(2026, 4, 4, 12, 0), utc(2026, 4, 5, 12, 0),
			[]time.Time{utc(2026, 4, 4, 14, 45)}},
		{"L is Feb 28 2026 and Feb 29 2028", "0 12 L 2 *", "UTC",
			utc(2026, 1, 1, 0, 0), utc(2029, 1, 1, 0, 0),
			[]time.Time{utc(2026, 2, 28, 12, 0), utc(2027, 2, 28, 12, 0), utc(2028, 2, 29, 12, 0)}},
		{"1,L in April", "0 0 1,L 4 *", "UTC",
			utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0),
			[]time.Time{utc(2026, 4, 1, 0, 0), utc(2026, 4, 30, 0, 0)}},
		{"3rd Sunday of January 2026 is Jan 18", "0 9 * 1 0#3", "UTC",
			utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0),
			[]time.Time{utc(2026, 1, 18, 9, 0)}},
		{"SUN#3 in Kolkata", "0 9 * JAN SUN#3", "Asia/Kolkata",
			utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0),
			[]time.Time{utc(2026, 1, 18, 3, 30)}},
		{"Chatham 12:45 offset", "0 0 1 1 *", "Pacific/Chatham",
			utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0),
			[]time.Time{utc(2026, 12, 31, 10, 15)}},
		{"5th Sunday in Feb only 2032 (Feb 29)", "0 0 * 2 0#5", "UTC",
			utc(2031, 12, 1, 0, 0), utc(2033, 1, 1, 0, 0),
			[]time.Time{utc(2032, 2, 29, 0, 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, loc := mustParse(t, c.expr), mustLoc(t, c.tz)
			got := eligibleFires(t, e, loc, c.from, c.to)
			if !sameTimes(got, c.want) {
				t.Errorf("eligible fires of %q in %s = %v, want %v", c.expr, c.tz, got, c.want)
			}
			next := NextFireTimes(e, loc, c.from.Add(-time.Second), len(c.want))
			if !sameTimes(next, c.want) {
				t.Errorf("NextFireTimes(%q, %s) = %v, want %v", c.expr, c.tz, next, c.want)
			}
		})
	}
}

// TestNth5 checks that #5 fires only in months that have a 5th such weekday.
func TestNth5(t *testing.T) {
	e := mustParse(t, "0 0 * * MON#5")
	t0, t1 := utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0)
	var want []time.Time
	for d := t0; d.Before(t1); d = d.AddDate(0, 0, 1) {
		if d.Weekday() == time.Monday && d.Day() > 28 {
			want = append(want, d)
		}
	}
	if len(want) == 0 || len(want) >= 12 {
		t.Fatalf("bad expectation %v", want)
	}
	if got := eligibleFires(t, e, time.UTC, t0, t1); !sameTimes(got, want) {
		t.Errorf("MON#5 2026 = %v, want %v", got, want)
	}
}

// TestORRule checks classic cron: both day fields restricted means either.
func TestORRule(t *testing.T) {
	t0, t1 := utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0)
	days := func(keep func(time.Time) bool) []time.Time {
		var out []time.Time
		for d := t0; d.Before(t1); d = d.AddDate(0, 0, 1) {
			if keep(d) {
				out = append(out, d)
			}
		}
		return out
	}
	cases := []struct {
		name, expr string
		want       []time.Time
	}{
		{"13th or Friday", "0 0 13 * 5", days(func(d time.Time) bool { return d.Day() == 13 || d.Weekday() == time.Friday })},
		{"13th only", "0 0 13 * *", days(func(d time.Time) bool { return d.Day() == 13 })},
		{"Friday only", "0 0 * * FRI", days(func(d time.Time) bool { return d.Weekday() == time.Friday })},
		{"*/2 dom is restricted", "0 0 */2 * 1", days(func(d time.Time) bool { return d.Day()%2 == 1 || d.Weekday() == time.Monday })},
		{"full dow range is unrestricted", "0 0 13 * 0-6", days(func(d time.Time) bool { return d.Day() == 13 })},
		{"0-7 dow is unrestricted", "0 0 13 * 0-7", days(func(d time.Time) bool { return d.Day() == 13 })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := eligibleFires(t, mustParse(t, c.expr), time.UTC, t0, t1)
			if !sameTimes(got, c.want) {
				t.Errorf("%q: got %d fires, want %d", c.expr, len(got), len(c.want))
			}
		})
	}
	if n := len(days(func(d time.Time) bool { return d.Day() == 13 || d.Weekday() == time.Friday })); n != 61 {
		t.Errorf("13th-or-Friday days in 2026 = %d, want 61", n)
	}
}

func TestFieldFormEqualsString(t *testing.T) {
	cases := []struct {
		name string
		f    Fields
		s    string
	}{
		{"seed example", Fields{Hour: "3,6,9"}, "* 3,6,9 * * *"},
		{"all empty", Fields{}, "* * * * *"},
		{"third Sunday", Fields{Minute: "0", Hour: "9", Month: "1", DayOfWeek: "0#3"}, "0 9 * 1 0#3"},
		{"names and L", Fields{Minute: "*/15", Hour: "1-3,23", DayOfMonth: "1,L", Month: "jan-mar", DayOfWeek: "mon-fri"}, "*/15 1-3,23 1,L JAN-MAR MON-FRI"},
		{"blank means star", Fields{Minute: " 5 ", Hour: "  "}, "5 * * * *"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseFields(c.f)
			if err != nil {
				t.Fatal(err)
			}
			b := mustParse(t, c.s)
			if *a != *b || a.String() != b.String() {
				t.Errorf("ParseFields(%+v) = %q, Parse(%q) = %q", c.f, a, c.s, b)
			}
		})
	}
}

func TestCanonicalString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"* * * * *", "* * * * *"},
		{"*/15 * * * *", "0,15,30,45 * * * *"},
		{"0-59 0-23 1-31 1-12 0-6", "* * * * *"},
		{"0 0 * * 7", "0 0 * * 0"},
		{"0 0 * * 5-7", "0 0 * * 0,5,6"},
		{"5/20 1-3,23 L,1 jan-MAR Sun#3,mon", "5,25,45 1-3,23 1,L 1-3 1,0#3"},
		{"0 0 1-31,L * *", "0 0 1-31,L * *"},
		{"0 0 * * *,0#3", "0 0 * * 0-6,0#3"},
		{"0 0 L * 0#1,0#1", "0 0 L * 0#1"},
		{"1-5/2 */12 */10 */5 */3", "1,3,5 0,12 1,11,21,31 1,6,11 0,3,6"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			e := mustParse(t, c.in)
			if got := e.String(); got != c.want {
				t.Fatalf("String() = %q, want %q", got, c.want)
			}
			if again := mustParse(t, e.String()); *again != *e {
				t.Errorf("re-parse of %q differs", e)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"hour out of range", "0 24 * * *", "hour: 24 is out of range 0-23"},
		{"minute out of range", "60 * * * *", "minute: 60 is out of range 0-59"},
		{"dom zero", "0 0 0 * *", "dayOfMonth: 0 is out of range 1-31"},
		{"month 13", "0 0 * 13 *", "month: 13 is out of range 1-12"},
		{"dow 8", "0 0 * * 8", "dayOfWeek: 8 is out of range 0-7"},
		{"four fields", "0 0 * *", "cron: \"0 0 * *\" has 4 fields; want 5"},
		{"six fields", "0 0 * * * *", "has 6 fields"},
		{"empty", "", "cron: has 0 fields"},
		{"bad name", "0 0 * FOO *", "month: FOO is not a number or month name"},
		{"bad weekday", "0 0 * * FUN", "dayOfWeek: FUN is not a number or weekday name"},
		{"step zero", "*/0 * * * *", "minute: */0 needs a step between 1 and 60"},
		{"reverse range", "0 5-1 * * *", "hour: 5-1 is a range whose start is after its end"},
		{"nth 6", "0 0 * * 1#6", "dayOfWeek: 1#6 needs #n with n between 1 and 5"},
		{"nth 0", "0 0 * * 1#0", "needs #n"},
		{"L in hour", "0 L * * *", "hour: L is not a number"},
		{"L with step", "0 0 L/2 * *", "dayOfMonth: L is not a number (L must stand alone)"},
		{"empty item", "0 1,,2 * * *", "hour: 1,,2 has an empty list item"},
		{"Feb 30", "0 0 30 2 *", "dayOfMonth: 30 never occurs in Feb"},
		{"31 in short months", "0 0 31 4,6,9,11 *", "dayOfMonth: 31 never occurs in Apr, Jun, Sep, Nov"},
		{"huge number", "99999999999999999999 * * * *", "minute: 99999999999999999999 is out of range 0-59"},
		{"negative", "-1 * * * *", "minute: -1 has a range with a missing bound"},
		{"no value before step", "/5 * * * *", "minute: /5 has no value before /"},
		{"no weekday before #", "0 0 * * #2", "dayOfWeek: #2 needs a weekday before #"},
		{"too long", strings.Repeat("1,", 600) + "1 * * * *", "cron: expression is longer than 1024 bytes"},
		{"too many items", strings.Repeat("1,", 200) + "1 * * * *", "minute: has more than 128 list items"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.in)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error containing %q", c.in, c.want)
			}
			var pe *Error
			if !asError(err, &pe) {
				t.Fatalf("Parse(%q) error %T is not *Error", c.in, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse(%q) = %q, want it to contain %q", c.in, err, c.want)
			}
		})
	}
}

func TestFieldsErrors(t *testing.T) {
	_, err := ParseFields(Fields{Hour: "1, 2"})
	if err == nil || !strings.Contains(err.Error(), "hour: \"1, 2\" contains white space") {
		t.Errorf("ParseFields with inner space: %v", err)
	}
	_, err = ParseFields(Fields{DayOfMonth: "30", Month: "FEB"})
	if err == nil || !strings.HasPrefix(err.Error(), "dayOfMonth:") {
		t.Errorf("ParseFields Feb 30: %v", err)
	}
}

func TestLoadLocation(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "timezone: is empty"},
		{"local", "Local", "timezone: Local is not allowed"},
		{"unknown", "Mars/Olympus_Mons", "timezone: Mars/Olympus_Mons is not a known IANA time zone"},
		{"path", "../etc/passwd", "timezone: ../etc/passwd is not a known"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadLocation(c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LoadLocation(%q) = %v, want %q", c.in, err, c.want)
			}
		})
	}
	if loc, err := LoadLocation("Pacific/Chatham"); err != nil || loc.String() != "Pacific/Chatham" {
		t.Errorf("LoadLocation(Pacific/Chatham) = %v, %v", loc, err)
	}
}
