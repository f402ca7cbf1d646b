// Package calendar evaluates exclusion calendars: which instants a
// model.Calendar excludes, and where a fire that a schedule's calendars
// exclude goes. It has no infrastructure: the emitter (per due fire), the
// schedule preview and backfill call the same rule, Decide.
//
// Every rule is judged in the calendar's own time zone. A date excludes its
// whole local day; a weekly rule excludes the local times of day [from, to)
// on its days (on a day the clocks go back, a repeated time of day is
// excluded both times it occurs; a time of day skipped by a spring-forward
// gap does not occur); a range excludes [from, to), compared as instants
// when given with an offset and as local date-times otherwise. All
// boundaries are whole minutes.
package calendar

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// MaxEntries is the most dates, ranges and weekly rules (together) one
// calendar may hold.
const MaxEntries = 1000

// Horizon is how far after an excluded instant NextIncluded looks for one
// that is not excluded.
const Horizon = 400 * 24 * time.Hour

// Day names of weekly rules, indexed by time.Weekday.
var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

const (
	dateLayout  = "2006-01-02"
	localLayout = "2006-01-02T15:04" // a local date-time of a range
	clockLayout = "15:04"
)

// Calendar is a compiled model.Calendar.
type Calendar struct {
	ID, Name string
	loc      *time.Location
	dates    map[int64]bool // civil day numbers (wall seconds / 86400)
	ranges   []span
	weekly   []weekly
}

// span is a range: instants (Unix seconds) if abs, else wall seconds.
type span struct {
	from, to int64
	abs      bool
	text     string
}

type weekly struct {
	days     [7]bool
	from, to int // minutes of the day; to 1440 is the end of the day
	text     string
}

// wall is the local wall clock of t in loc, in seconds since 1970-01-01
// 00:00 of that wall clock: comparable across days without a zone.
func wall(t time.Time, loc *time.Location) int64 {
	lt := t.In(loc)
	_, off := lt.Zone()
	return lt.Unix() + int64(off)
}

// Compile checks c and compiles it. Its errors name the fields of a
// calendar's API body ("timezone", "dates[2]", "weekly[0].from").
func Compile(c *model.Calendar) (*Calendar, error) {
	var fe schedule.Errors
	out := &Calendar{ID: c.ID, Name: c.Name, dates: map[int64]bool{}}
	loc, err := cron.LoadLocation(c.Timezone)
	if err != nil {
		fe.Add("timezone", strings.TrimPrefix(err.Error(), "timezone: "))
		loc = time.UTC
	}
	out.loc = loc
	if n := len(c.Dates) + len(c.Ranges) + len(c.Weekly); n > MaxEntries {
		fe.Add("dates", "the calendar has "+strconv.Itoa(n)+" dates, ranges and weekly rules; at most "+strconv.Itoa(MaxEntries)+" together")
	}
	for i, d := range c.Dates {
		t, err := time.Parse(dateLayout, d)
		if err != nil {
			fe.Add("dates["+strconv.Itoa(i)+"]", strconv.Quote(d)+" is not a date YYYY-MM-DD")
			continue
		}
		out.dates[t.Unix()/86400] = true
	}
	for i, r := range c.Ranges {
		f := "ranges[" + strconv.Itoa(i) + "]"
		from, fabs, ok1 := parseBound(&fe, f+".from", r.From)
		to, tabs, ok2 := parseBound(&fe, f+".to", r.To)
		if !ok1 || !ok2 {
			continue
		}
		if fabs != tabs {
			fe.Add(f+".to", "from and to must both have an offset (instants) or both have none (local date-times)")
			continue
		}
		if from >= to {
			fe.Add(f+".to", strconv.Quote(r.To)+" is not after from "+strconv.Quote(r.From))
			continue
		}
		out.ranges = append(out.ranges, span{from: from, to: to, abs: fabs, text: r.From + " to " + r.To})
	}
	for i, w := range c.Weekly {
		f := "weekly[" + strconv.Itoa(i) + "]"
		var r weekly
		if len(w.Days) == 0 {
			fe.Add(f+".days", "is empty; want days such as [\"sat\",\"sun\"]")
		}
		for j, d := range w.Days {
			k := slices.Index(dayNames[:], strings.ToLower(d))
			if k < 0 {
				fe.Add(f+".days["+strconv.Itoa(j)+"]", strconv.Quote(d)+" is not a day; want one of mon, tue, wed, thu, fri, sat, sun")
				continue
			}
			r.days[k] = true
		}
		r.from, r.to = 0, 1440
		okf, okt := true, true
		if w.From != "" {
			r.from, okf = parseClock(&fe, f+".from", w.From)
		}
		if w.To != "" {
			r.to, okt = parseClock(&fe, f+".to", w.To)
		}
		if okf && okt && r.from >= r.to {
			fe.Add(f+".to", strconv.Quote(w.To)+" is not after from "+strconv.Quote(w.From))
		}
		r.text = weeklyText(w)
		out.weekly = append(out.weekly, r)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseBound parses a range bound: an RFC 3339 instant (abs) or a local
// date-time, whole minutes either way. It returns Unix or wall seconds.
func parseBound(fe *schedule.Errors, field, s string) (int64, bool, bool) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if t.Second() != 0 || t.Nanosecond() != 0 {
			fe.Add(field, strconv.Quote(s)+" is not a whole minute")
			return 0, false, false
		}
		return t.Unix(), true, true
	}
	if t, err := time.Parse(localLayout, s); err == nil {
		return t.Unix(), false, true
	}
	fe.Add(field, strconv.Quote(s)+" is neither an RFC 3339 instant (2027-12-24T18:00:00Z) nor a local date-time (2027-12-24T18:00)")
	return 0, false, false
}

func parseClock(fe *schedule.Errors, field, s string) (int, bool) {
	if s == "24:00" && strings.HasSuffix(field, ".to") {
		return 1440, true
	}
	t, err := time.Parse(clockLayout, s)
	if err != nil || len(s) != 5 {
		fe.Add(field, strconv.Quote(s)+" is not a time of day HH:MM")
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

func weeklyText(w model.WeeklyRule) string {
	s := "weekly " + strings.Join(w.Days, ",")
	if w.From != "" || w.To != "" {
		s += " " + cmpOr(w.From, "00:00") + "-" + cmpOr(w.To, "24:00")
	}
	return s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Location is the calendar's time zone.
func (c *Calendar) Location() *time.Location { return c.loc }

// Excludes reports whether c excludes t, and which of its rules does
// ("date 2027-12-25", "weekly sat,sun", "range ...").
func (c *Calendar) Excludes(t time.Time) (bool, string) {
	ok, reason, _ := c.excludes(t)
	return ok, reason
}

// excludes is Excludes that also returns a hint: an instant after t up to
// which (about) the exclusion lasts, where NextIncluded looks next.
func (c *Calendar) excludes(t time.Time) (bool, string, time.Time) {
	w := wall(t, c.loc)
	day := floorDiv(w, 86400)
	if c.dates[day] {
		return true, "date " + time.Unix(day*86400, 0).UTC().Format(dateLayout), c.at(day*86400 + 86400)
	}
	u := t.Unix()
	for _, r := range c.ranges {
		if r.abs && r.from <= u && u < r.to {
			return true, "range " + r.text, time.Unix(r.to, 0)
		}
		if !r.abs && r.from <= w && w < r.to {
			return true, "range " + r.text, c.at(r.to)
		}
	}
	wd := int((day + 4) % 7) // 1970-01-01 was a Thursday
	if wd < 0 {
		wd += 7
	}
	mod := int(w-day*86400) / 60
	for _, r := range c.weekly {
		if r.days[wd] && r.from <= mod && mod < r.to {
			return true, r.text, c.at(day*86400 + int64(r.to)*60)
		}
	}
	return false, "", time.Time{}
}

// at is an instant of the local wall clock w (wall seconds): the one
// time.Date gives, which NextIncluded treats as a hint only.
func (c *Calendar) at(w int64) time.Time {
	u := time.Unix(w, 0).UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), 0, 0, c.loc)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Set is the calendars a schedule names.
type Set []*Calendar

// Excludes returns the first calendar of s that excludes t and why, or nil.
func (s Set) Excludes(t time.Time) (*Calendar, string) {
	for _, c := range s {
		if ok, reason := c.Excludes(t); ok {
			return c, reason
		}
	}
	return nil, ""
}

// NextIncluded returns the first instant at or after t that no calendar of
// s excludes, and false if there is none within Horizon.
func (s Set) NextIncluded(t time.Time) (time.Time, bool) {
	limit := t.Add(Horizon)
	for !t.After(limit) {
		var hint time.Time
		for _, c := range s {
			if ok, _, h := c.excludes(t); ok && h.After(hint) {
				hint = h
			}
		}
		if hint.IsZero() {
			return t, true
		}
		// Boundaries are whole minutes, and the hint is exact but for
		// wall clocks a zone transition makes ambiguous or skipped: look
		// at the whole minutes up to hint from a transition's length
		// before it, and take the first one included.
		next := t.Truncate(time.Minute).Add(time.Minute)
		if hint.After(next) {
			back := hint.Add(-maxShift)
			if back.After(next) {
				next = back.Truncate(time.Minute)
			}
			found := false
			for m := next; m.Before(hint); m = m.Add(time.Minute) {
				if c, _ := s.Excludes(m); c == nil {
					next, found = m, true
					break
				}
			}
			if !found {
				next = hint
			}
		}
		t = next
	}
	return time.Time{}, false
}

// maxShift bounds how far the wall clock jumps at a zone transition.
const maxShift = 3 * time.Hour

// Decision is what the calendars of a schedule make of one of its fires.
type Decision struct {
	// By is the calendar that excludes the fire time, nil when none does.
	By     *Calendar
	Reason string
	// To is where the fire moves (OnExcludedNextIncluded), zero when it
	// does not move: skipped, or no included instant within Horizon.
	To time.Time
}

// Excluded reports whether a calendar excludes the fire.
func (d Decision) Excluded() bool { return d.By != nil }

// Note is the note of the skipped_calendar fire.
func (d Decision) Note() string {
	n := "excluded by calendar " + d.By.ID
	if d.By.Name != "" {
		n += " (" + strconv.Quote(d.By.Name) + ")"
	}
	n += ": " + d.Reason
	if !d.To.IsZero() {
		n += "; moved to " + d.To.UTC().Format(time.RFC3339)
	}
	return n
}

// ForSchedule is Decide for the fire at t of m, whose calendars are s: a
// fire would move past m's EndAt is not moved. The emitter, the preview and
// backfill call it per (schedule, instant).
func ForSchedule(s Set, m *model.Schedule, t time.Time) Decision {
	if len(s) == 0 {
		return Decision{}
	}
	d := Decide(s, m.OnExcluded, t)
	if !d.To.IsZero() && m.EndAt != nil && d.To.After(*m.EndAt) {
		d.To = time.Time{}
	}
	return d
}

// Decide applies the calendars s with policy on to the fire time t of a
// schedule.
func Decide(s Set, on model.OnExcludedPolicy, t time.Time) Decision {
	c, reason := s.Excludes(t)
	if c == nil {
		return Decision{}
	}
	d := Decision{By: c, Reason: reason}
	if on == model.OnExcludedNextIncluded {
		if to, ok := s.NextIncluded(t); ok {
			d.To = to
		}
	}
	return d
}
