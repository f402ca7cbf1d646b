package cron

import (
	"errors"
	"strings"
	"testing"
)

// checkRoundTrip is the parse property: the canonical form re-parses to the
// same Expr and is a fixed point; Children agrees with childCount.
func checkRoundTrip(t *testing.T, in string, e *Expr, err error) {
	t.Helper()
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("%q: error %T %v is not *Error", in, err, err)
		}
		return
	}
	c := e.String()
	e2, err := Parse(c)
	if err != nil {
		t.Fatalf("%q: canonical %q does not parse: %v", in, c, err)
	}
	if *e2 != *e || e2.String() != c {
		t.Fatalf("%q: canonical %q re-parses to %q", in, c, e2)
	}
	ks, err := e.Children(2000)
	var tm *TooManyChildrenError
	switch {
	case errors.As(err, &tm):
		if tm.Count != e.childCount() || tm.Count <= 2000 {
			t.Fatalf("%q: bad TooManyChildrenError %v", in, err)
		}
	case err != nil:
		t.Fatalf("%q: Children: %v", in, err)
	case len(ks) != e.childCount():
		t.Fatalf("%q: %d children, childCount %d", in, len(ks), e.childCount())
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "0 9 * 1 0#3", "*/15 1-3,23 1,L JAN-MAR MON-FRI",
		"5/20 0 L 2 7", "0 0 30 2 *", "0 0 13 * 5", "1-5/2 */12 */10 */5 */3", "0 0 * * sun#5,6#1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		checkRoundTrip(t, s, e, err)
	})
}

func FuzzParseFields(f *testing.F) {
	f.Add("0", "9", "", "1", "0#3")
	f.Add("", "3,6,9", "", "", "")
	f.Add("*/5", "*", "L", "feb", "")
	f.Add(" 1 ", "2 ", "31", "4,6", "")
	f.Fuzz(func(t *testing.T, mi, h, dom, mo, dow string) {
		e, err := ParseFields(Fields{Minute: mi, Hour: h, DayOfMonth: dom, Month: mo, DayOfWeek: dow})
		checkRoundTrip(t, "fields", e, err)
		if err != nil {
			return
		}
		cols := []string{mi, h, dom, mo, dow}
		for i, c := range cols {
			if c = strings.TrimSpace(c); c == "" {
				c = "*"
			}
			cols[i] = c
		}
		e2, err := Parse(strings.Join(cols, " "))
		if err != nil || *e2 != *e {
			t.Fatalf("ParseFields %q = %q but Parse of the joined form = %v, %v", cols, e, e2, err)
		}
	})
}

func FuzzParseKey(f *testing.F) {
	for _, le := range []string{"H:*", "W:0#3:09", "M:L:00", "MO:12:23", "MM:02:29:01", "MW:01:0#3:09"} {
		f.Add(le, 0)
	}
	f.Add("H:03", 59)
	f.Fuzz(func(t *testing.T, le string, minute int) {
		k, err := ParseKey(le, minute)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("ParseKey(%q, %d): error %T is not *Error", le, minute, err)
			}
			return
		}
		if k.LaunchExpression() != le || int(k.Minute) != minute {
			t.Fatalf("ParseKey(%q, %d) = %v, renders %q", le, minute, k, k.LaunchExpression())
		}
		k2, err := ParseKey(k.LaunchExpression(), int(k.Minute))
		if err != nil || k2 != k {
			t.Fatalf("round trip of %v: %v, %v", k, k2, err)
		}
	})
}
