package cron

import (
	"strconv"
	"strings"
	"unicode"
)

const (
	// maxExprLen bounds the input so that parsing cost is bounded too.
	maxExprLen = 1024
	// maxListItems bounds a field's list; 60 minutes is the longest useful one.
	maxListItems = 128
)

// Field indexes and the names used in errors (the seed's field names).
const (
	fMinute = iota
	fHour
	fDom
	fMonth
	fDow
)

type fieldSpec struct {
	name   string
	lo, hi int      // accepted numeric values (day-of-week accepts 7 = Sunday)
	names  []string // optional names; names[i] is value i+nameBase
	base   int
}

var specs = [5]fieldSpec{
	{name: "minute", lo: 0, hi: 59},
	{name: "hour", lo: 0, hi: 23},
	{name: "dayOfMonth", lo: 1, hi: 31},
	{name: "month", lo: 1, hi: 12, base: 1, names: []string{
		"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	{name: "dayOfWeek", lo: 0, hi: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// Parse parses the 5-field form "minute hour day-of-month month day-of-week".
func Parse(expr string) (*Expr, error) {
	if len(expr) > maxExprLen {
		return nil, &Error{Field: "cron", Reason: "expression is longer than " + strconv.Itoa(maxExprLen) + " bytes"}
	}
	f := strings.Fields(expr)
	if len(f) != 5 {
		return nil, &Error{Field: "cron", Token: expr,
			Reason: "has " + strconv.Itoa(len(f)) + " fields; want 5 (minute hour dayOfMonth month dayOfWeek)"}
	}
	return parseFields([5]string{f[0], f[1], f[2], f[3], f[4]})
}

// ParseFields parses the seed's field form. An empty (or blank) field means
// "*"; otherwise each field has the syntax of the matching 5-field column, so
// the result equals Parse of the fields joined by spaces.
func ParseFields(f Fields) (*Expr, error) {
	in := [5]string{f.Minute, f.Hour, f.DayOfMonth, f.Month, f.DayOfWeek}
	total := 0
	for i, s := range in {
		total += len(s)
		if total > maxExprLen {
			return nil, &Error{Field: "cron", Reason: "expression is longer than " + strconv.Itoa(maxExprLen) + " bytes"}
		}
		s = strings.TrimSpace(s)
		if s == "" {
			s = "*"
		}
		if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
			return nil, &Error{Field: specs[i].name, Token: s, Reason: "contains white space"}
		}
		in[i] = s
	}
	return parseFields(in)
}

func parseFields(f [5]string) (*Expr, error) {
	var e Expr
	var sets [5]uint64
	for i := range f {
		set, last, nth, err := parseField(&specs[i], f[i])
		if err != nil {
			return nil, err
		}
		sets[i] = set
		if i == fDom {
			e.last = last
		}
		if i == fDow {
			e.nth = nth
		}
	}
	e.minutes = sets[fMinute]
	e.hours = uint32(sets[fHour])
	e.doms = uint32(sets[fDom])
	e.months = uint16(sets[fMonth])
	e.dows = uint8(sets[fDow])
	if err := e.checkPossible(f[fDom]); err != nil {
		return nil, err
	}
	return &e, nil
}

// checkPossible rejects a day-of-month that can never occur in the chosen
// months (e.g. "30 2"), unless day-of-week can still fire (OR rule).
func (e *Expr) checkPossible(domText string) error {
	if !e.domRestricted() || e.dowRestricted() || e.last {
		return nil
	}
	for m := 1; m <= 12; m++ {
		if e.months&(1<<m) != 0 && e.doms&daysMask(maxDaysIn(m)) != 0 {
			return nil
		}
	}
	var names []string
	for m := 1; m <= 12; m++ {
		if e.months&(1<<m) != 0 {
			names = append(names, monthTitle(m))
		}
	}
	return &Error{Field: "dayOfMonth", Token: domText,
		Reason: "never occurs in " + strings.Join(names, ", ") + " (no such day in the month)"}
}

// daysMask is the day-of-month bit set 1..n.
func daysMask(n int) uint32 { return uint32(1)<<(n+1) - 2 }

func monthTitle(m int) string {
	s := specs[fMonth].names[m-1]
	return s[:1] + strings.ToLower(s[1:])
}

// parseField parses one comma-separated field into a bit set, plus L (day of
// month) and d#n (day of week) entries.
func parseField(sp *fieldSpec, s string) (set uint64, last bool, nth [7]uint8, err error) {
	if strings.Count(s, ",") >= maxListItems {
		return 0, false, nth, &Error{Field: sp.name, Reason: "has more than " + strconv.Itoa(maxListItems) + " list items"}
	}
	isDow := sp == &specs[fDow]
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			return 0, false, nth, &Error{Field: sp.name, Token: s, Reason: "has an empty list item"}
		}
		if sp == &specs[fDom] && (item == "L" || item == "l") {
			last = true
			continue
		}
		if isDow && strings.Contains(item, "#") {
			d, n, err := parseNth(sp, item)
			if err != nil {
				return 0, false, nth, err
			}
			nth[d] |= 1 << n
			continue
		}
		bitsOf, err := parseItem(sp, item)
		if err != nil {
			return 0, false, nth, err
		}
		set |= bitsOf
	}
	if isDow && set&(1<<7) != 0 { // 7 is Sunday
		set = set&^(1<<7) | 1
	}
	return set, last, nth, nil
}

// parseNth parses "d#n" (d a weekday number or name, n 1-5).
func parseNth(sp *fieldSpec, item string) (d, n int, err error) {
	ds, ns, _ := strings.Cut(item, "#")
	if ds == "" {
		return 0, 0, &Error{Field: sp.name, Token: item, Reason: "needs a weekday before #"}
	}
	d, err = parseValue(sp, ds)
	if err != nil {
		return 0, 0, err
	}
	if len(ns) != 1 || ns[0] < '1' || ns[0] > '5' {
		return 0, 0, &Error{Field: sp.name, Token: item, Reason: "needs #n with n between 1 and 5"}
	}
	return d % 7, int(ns[0] - '0'), nil
}

// parseItem parses "*", "a", "a-b", each optionally with "/step", and "a/step"
// (a to the field's maximum).
func parseItem(sp *fieldSpec, item string) (uint64, error) {
	rng, stepText, hasStep := strings.Cut(item, "/")
	hi := sp.hi
	if sp == &specs[fDow] {
		hi = 6 // "*" and "a/step" stop at Saturday; 7 only as an explicit value
	}
	step := 1
	if hasStep {
		width := sp.hi - sp.lo + 1
		v, ok := atoiSmall(stepText)
		if !ok || v < 1 || v > width {
			return 0, &Error{Field: sp.name, Token: item, Reason: "needs a step between 1 and " + strconv.Itoa(width)}
		}
		step = v
	}
	var a, b int
	switch {
	case rng == "*":
		a, b = sp.lo, hi
	case strings.Contains(rng, "-"):
		as, bs, _ := strings.Cut(rng, "-")
		if as == "" || bs == "" {
			return 0, &Error{Field: sp.name, Token: item, Reason: "has a range with a missing bound"}
		}
		var err error
		if a, err = parseValue(sp, as); err != nil {
			return 0, err
		}
		if b, err = parseValue(sp, bs); err != nil {
			return 0, err
		}
		if a > b {
			return 0, &Error{Field: sp.name, Token: rng, Reason: "is a range whose start is after its end"}
		}
	case rng == "":
		return 0, &Error{Field: sp.name, Token: item, Reason: "has no value before /"}
	default:
		var err error
		if a, err = parseValue(sp, rng); err != nil {
			return 0, err
		}
		b = a
		if hasStep {
			b = max(a, hi)
		}
	}
	var set uint64
	for v := a; v <= b; v += step {
		set |= 1 << v
	}
	return set, nil
}

// parseValue parses a number or (for month and day of week) a name.
func parseValue(sp *fieldSpec, s string) (int, error) {
	if v, ok := atoiSmall(s); ok {
		if v < sp.lo || v > sp.hi {
			return 0, &Error{Field: sp.name, Token: s, Reason: "is out of range " + strconv.Itoa(sp.lo) + "-" + strconv.Itoa(sp.hi)}
		}
		return v, nil
	}
	if s != "" && isDigits(s) { // too long to be in range
		return 0, &Error{Field: sp.name, Token: s, Reason: "is out of range " + strconv.Itoa(sp.lo) + "-" + strconv.Itoa(sp.hi)}
	}
	for i, n := range sp.names {
		if strings.EqualFold(s, n) {
			return i + sp.base, nil
		}
	}
	reason := "is not a number"
	switch {
	case sp == &specs[fDow]:
		reason = "is not a number or weekday name (SUN-SAT)"
	case sp == &specs[fMonth]:
		reason = "is not a number or month name (JAN-DEC)"
	case sp == &specs[fDom] && strings.ContainsAny(s, "Ll"):
		reason = "is not a number (L must stand alone)"
	}
	return 0, &Error{Field: sp.name, Token: s, Reason: reason}
}

// atoiSmall parses 1-3 ASCII digits, so no overflow is possible.
func atoiSmall(s string) (int, bool) {
	if len(s) == 0 || len(s) > 3 || !isDigits(s) {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
