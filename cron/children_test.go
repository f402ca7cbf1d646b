package cron

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func keyStrings(ks []Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	return out
}

func TestChildren(t *testing.T) {
	cases := []struct {
		name, expr string
		want       []string
	}{
		{"seed example", "0 3,6,9 * * *", []string{"H:03@00", "H:06@00", "H:09@00"}},
		{"every hour", "5,35 * * * *", []string{"H:*@05", "H:*@35"}},
		{"weekdays", "0 3 * * 1-5", []string{"W:1:03@00", "W:2:03@00", "W:3:03@00", "W:4:03@00", "W:5:03@00"}},
		{"3rd Sunday of January", "0 9 * 1 0#3", []string{"MW:01:0#3:09@00"}},
		{"month only", "30 23 * 6,12 *", []string{"MO:06:23@30", "MO:12:23@30"}},
		{"day of month", "0 0 1,L * *", []string{"M:01:00@00", "M:L:00@00"}},
		{"month and day", "0 12 L 2 *", []string{"MM:02:L:12@00"}},
		{"month and days skips impossible", "0 0 29-31 2,4 *", []string{"MM:02:29:00@00", "MM:04:29:00@00", "MM:04:30:00@00"}},
		{"OR rule makes both classes", "0 0 13 * 5", []string{"M:13:00@00", "W:5:00@00"}},
		{"OR rule with months", "0 0 13 1 FRI#2,FRI", []string{"MM:01:13:00@00", "MW:01:5:00@00", "MW:01:5#2:00@00"}},
		{"every-hour weekday", "0 * * * SUN", []string{"W:0:*@00"}},
		{"nth with full weekdays", "0 0 * * *,1#1", []string{
			"W:0:00@00", "W:1:00@00", "W:1#1:00@00", "W:2:00@00", "W:3:00@00", "W:4:00@00", "W:5:00@00", "W:6:00@00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := mustParse(t, c.expr)
			ks, err := e.Children(MaxChildren)
			if err != nil {
				t.Fatal(err)
			}
			if got := keyStrings(ks); !slices.Equal(got, c.want) {
				t.Errorf("Children(%q) = %v, want %v", c.expr, got, c.want)
			}
			if n := e.childCount(); n != len(ks) {
				t.Errorf("childCount = %d, len = %d", n, len(ks))
			}
		})
	}
}

func TestTooManyChildren(t *testing.T) {
	cases := []struct {
		name, expr string
		limit      int
		count      int
	}{
		{"every minute of 23 hours on 30 days", "* 0-22 1-30 * *", MaxChildren, 41400},
		{"every minute of every hour", "* * * * *", 59, 60},
		{"Jan-Nov days 1-30", "* 0-22 1-30 1-11 *", MaxChildren, 454020}, // Feb 30 is not a child,
		{"zero limit means MaxChildren", "* 0-22 1-30 * *", 0, 41400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := mustParse(t, c.expr).Children(c.limit)
			var tm *TooManyChildrenError
			if !errors.As(err, &tm) {
				t.Fatalf("Children(%q) error = %v, want *TooManyChildrenError", c.expr, err)
			}
			if tm.Count != c.count {
				t.Errorf("Count = %d, want %d", tm.Count, c.count)
			}
			if want := "would make " + strconv.Itoa(c.count) + " children; the limit is"; !strings.Contains(err.Error(), want) {
				t.Errorf("message %q lacks %q", err, want)
			}
		})
	}
	ks, err := mustParse(t, "* * * * *").Children(60)
	if err != nil || len(ks) != 60 {
		t.Errorf("Children at exactly the limit: %d, %v", len(ks), err)
	}
}

func TestKeyFormat(t *testing.T) {
	cases := []struct {
		k      Key
		le, ks string
	}{
		{Key{Class: ClassH, Hour: -1, Minute: 5}, "H:*", "H:*@05"},
		{Key{Class: ClassH, Hour: 3}, "H:03", "H:03@00"},
		{Key{Class: ClassW, Day: 0, Hour: 9, Minute: 30}, "W:0:09", "W:0:09@30"},
		{Key{Class: ClassW, Day: 6, Nth: 5, Hour: -1}, "W:6#5:*", "W:6#5:*@00"},
		{Key{Class: ClassM, Day: 7, Hour: 23, Minute: 59}, "M:07:23", "M:07:23@59"},
		{Key{Class: ClassM, Day: dayLast, Hour: 0}, "M:L:00", "M:L:00@00"},
		{Key{Class: ClassMO, Month: 12, Hour: -1}, "MO:12:*", "MO:12:*@00"},
		{Key{Class: ClassMM, Month: 2, Day: 29, Hour: 1}, "MM:02:29:01", "MM:02:29:01@00"},
		{Key{Class: ClassMM, Month: 2, Day: dayLast, Hour: 1}, "MM:02:L:01", "MM:02:L:01@00"},
		{Key{Class: ClassMW, Month: 1, Day: 0, Nth: 3, Hour: 9}, "MW:01:0#3:09", "MW:01:0#3:09@00"},
		{Key{Class: ClassMW, Month: 11, Day: 4, Hour: -1, Minute: 1}, "MW:11:4:*", "MW:11:4:*@01"},
	}
	for _, c := range cases {
		t.Run(c.ks, func(t *testing.T) {
			if got := c.k.LaunchExpression(); got != c.le {
				t.Errorf("LaunchExpression = %q, want %q", got, c.le)
			}
			if got := c.k.String(); got != c.ks {
				t.Errorf("String = %q, want %q", got, c.ks)
			}
			back, err := ParseKey(c.le, int(c.k.Minute))
			if err != nil || back != c.k {
				t.Errorf("ParseKey(%q) = %+v, %v; want %+v", c.le, back, err, c.k)
			}
		})
	}
}

func TestParseKeyErrors(t *testing.T) {
	cases := []struct {
		le     string
		minute int
		want   string
	}{
		{"H:*", 60, "minute: 60 is out of range 0-59"},
		{"X:*", 0, "unknown class"},
		{"H:24", 0, "needs an hour"},
		{"H:3", 0, "needs an hour"},
		{"W:7:03", 0, "needs a weekday"},
		{"W:1#6:03", 0, "n 1-5"},
		{"M:32:03", 0, "needs a day"},
		{"M:00:03", 0, "needs a day"},
		{"MM:02:30:03", 0, "never has"},
		{"MO:13:03", 0, "needs a month"},
		{"MW:01:0:03:04", 0, "has 5 parts; want 4"},
		{"", 0, "unknown class"},
	}
	for _, c := range cases {
		t.Run(c.le, func(t *testing.T) {
			_, err := ParseKey(c.le, c.minute)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ParseKey(%q, %d) = %v, want %q", c.le, c.minute, err, c.want)
			}
		})
	}
}

// TestEligibleKeysRoundTrip checks every key AppendEligible makes in a year
// survives LaunchExpression/ParseKey.
func TestEligibleKeysRoundTrip(t *testing.T) {
	seen := map[Key]bool{}
	var buf []Slot
	t0 := utc(2028, 1, 1, 0, 0)
	for d := t0; d.Before(t0.AddDate(1, 0, 0)); d = d.Add(6 * time.Hour) {
		buf = AppendEligible(buf[:0], time.UTC, d, d.Add(6*time.Minute))
		for _, s := range buf {
			seen[s.Key] = true
		}
	}
	for k := range seen {
		back, err := ParseKey(k.LaunchExpression(), int(k.Minute))
		if err != nil || back != k {
			t.Fatalf("round trip of %v: %+v, %v", k, back, err)
		}
	}
}
