package calendar

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// A policy's limit schedule (model.Policy.Limits) lowers its limit at
// times of day or in calendar periods. A time-of-day rule applies on its
// days in [from, to) of the local wall clock in its zone, judged as a
// calendar's weekly rule is (a wall time repeated when the clocks go back
// applies both times; one skipped when they go forward does not occur). A
// calendar rule applies while the tenant's calendar covers the instant.
// Where several rules apply, the lowest limit and the lowest rate do.

// MaxLimitRules is the most rules a policy's limit schedule may hold.
const MaxLimitRules = 32

// MaxLimitRate bounds a rule's ratePerSecond.
const MaxLimitRate = 1e6

// Limits is a compiled limit schedule.
type Limits struct {
	rules []limitRule
}

type limitRule struct {
	weekly      *Calendar // a one-rule calendar, or nil
	calendarID  string
	maxInFlight int
	rate        float64
}

// CompileLimits checks a policy's limit schedule and compiles it. Errors
// name the fields of the policy's API body ("limits[1].when.timezone").
// Time-of-day rules must not overlap, and share one zone.
func CompileLimits(rules []model.LimitRule) (*Limits, error) {
	var fe schedule.Errors
	if len(rules) > MaxLimitRules {
		fe.Add("limits", "has "+strconv.Itoa(len(rules))+" rules; at most "+strconv.Itoa(MaxLimitRules))
		return nil, fe
	}
	out := &Limits{}
	zone, zoneOf := "", -1
	for i, r := range rules {
		f := "limits[" + strconv.Itoa(i) + "]"
		lr := limitRule{maxInFlight: r.MaxInFlight, rate: r.RatePerSecond}
		switch {
		case r.MaxInFlight < 0:
			fe.Add(f+".maxInFlight", "must not be negative")
		case r.MaxInFlight > math.MaxInt32:
			fe.Add(f+".maxInFlight", "too large")
		}
		switch x := r.RatePerSecond; {
		case math.IsNaN(x) || math.IsInf(x, 0):
			fe.Add(f+".ratePerSecond", "must be a finite number")
		case x < 0:
			fe.Add(f+".ratePerSecond", "must not be negative")
		case x > MaxLimitRate:
			fe.Add(f+".ratePerSecond", "more than "+strconv.FormatFloat(MaxLimitRate, 'f', -1, 64))
		}
		w := r.When
		weekly := len(w.Days) > 0 || w.From != "" || w.To != "" || w.Timezone != ""
		switch {
		case weekly && w.CalendarID != "":
			fe.Add(f+".when", "either days, from, to and timezone or calendarId, not both")
		case w.CalendarID != "":
			lr.calendarID = w.CalendarID
		case !weekly:
			fe.Add(f+".when", "is empty; want {days, from, to, timezone} or {calendarId}")
		default:
			c, err := Compile(&model.Calendar{Timezone: w.Timezone, Weekly: []model.WeeklyRule{{Days: w.Days, From: w.From, To: w.To}}})
			if err != nil {
				for _, e := range err.(schedule.Errors) {
					fe.Add(f+".when."+strings.TrimPrefix(e.Field, "weekly[0]."), e.Reason)
				}
				break
			}
			if w.Timezone == "" {
				fe.Add(f+".when.timezone", "is required; want an IANA zone such as \"Europe/Paris\"")
				break
			}
			if zoneOf >= 0 && w.Timezone != zone {
				fe.Add(f+".when.timezone", "differs from limits["+strconv.Itoa(zoneOf)+"] ("+zone+"): a policy's time-of-day rules share one zone")
				break
			}
			zone, zoneOf = w.Timezone, i
			for j, o := range out.rules {
				if o.weekly != nil && overlap(o.weekly.weekly[0], c.weekly[0]) {
					fe.Add(f+".when", "overlaps limits["+strconv.Itoa(j)+"] ("+o.weekly.weekly[0].text+")")
				}
			}
			lr.weekly = c
		}
		out.rules = append(out.rules, lr)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// overlap reports whether two weekly rules share a day and a time of day.
func overlap(a, b weekly) bool {
	for d := range a.days {
		if a.days[d] && b.days[d] && a.from < b.to && b.from < a.to {
			return true
		}
	}
	return false
}

// CalendarIDs are the calendars the schedule's rules name.
func (l *Limits) CalendarIDs() []string {
	var out []string
	for _, r := range l.rules {
		if r.calendarID != "" && !slices.Contains(out, r.calendarID) {
			out = append(out, r.calendarID)
		}
	}
	return out
}

// At is what the schedule allows at t. cals are the compiled calendars of
// its calendar rules by id; a rule whose calendar is missing does not
// apply. Next is the next instant at which a rule may start or stop
// applying: a time-of-day rule's exact boundary, or the next whole minute
// while a calendar rule is present (calendar boundaries are whole minutes).
func (l *Limits) At(t time.Time, cals map[string]*Calendar) model.Cap {
	c := model.NoCap
	if l == nil {
		return c
	}
	for i, r := range l.rules {
		var on bool
		var next time.Time
		if r.weekly != nil {
			on, _ = r.weekly.Excludes(t)
			next = r.weekly.nextChange(t, on)
		} else {
			if cal := cals[r.calendarID]; cal != nil {
				on, _ = cal.Excludes(t)
			}
			next = t.Truncate(time.Minute).Add(time.Minute)
		}
		if !next.IsZero() && (c.Next.IsZero() || next.Before(c.Next)) {
			c.Next = next
		}
		if !on {
			continue
		}
		if c.MaxInFlight < 0 || r.maxInFlight < c.MaxInFlight {
			c.MaxInFlight, c.Rule = r.maxInFlight, i
		}
		if r.rate > 0 && (c.RatePerSecond == 0 || r.rate < c.RatePerSecond) {
			c.RatePerSecond = r.rate
		}
	}
	return c
}

// nextLook is how far ahead nextChange looks: a weekly rule changes
// within a week unless it applies always or never.
const nextLook = 8 * 24 * time.Hour

// nextChange is the first instant after t at which the one-rule calendar
// c's Excludes differs from on; zero if none within nextLook. A boundary
// wall time w occurs at w minus each offset the zone has around it, and a
// zone transition may jump over it: those instants are the candidates.
func (c *Calendar) nextChange(t time.Time, on bool) time.Time {
	r := c.weekly[0]
	end := t.Add(nextLook)
	// The zone's offsets and transitions from t to end.
	var offsets []int
	var cands []time.Time
	for u := t; u.Before(end); {
		lt := u.In(c.loc)
		_, off := lt.Zone()
		if !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
		_, e := lt.ZoneBounds()
		if e.IsZero() || !e.After(u) {
			break
		}
		cands = append(cands, e)
		u = e
	}
	day := floorDiv(wall(t, c.loc), 86400)
	for d := day - 1; d <= day+9; d++ {
		for _, m := range []int{r.from, r.to} {
			w := d*86400 + int64(m)*60
			for _, off := range offsets {
				cands = append(cands, time.Unix(w-int64(off), 0))
			}
		}
	}
	slices.SortFunc(cands, func(a, b time.Time) int { return a.Compare(b) })
	for _, u := range cands {
		if !u.After(t) || u.After(end) {
			continue
		}
		if x, _ := c.Excludes(u); x != on {
			return u
		}
	}
	return time.Time{}
}

// CalendarGetter reads a tenant's calendar (store.Driver does).
type CalendarGetter interface {
	CalendarGet(ctx context.Context, tenantID, id string) (*model.Calendar, error)
}

// PolicyCaps evaluates policies' limit schedules with the calendars of
// their tenants (the throttle's CapSource, and the API's answer).
type PolicyCaps struct {
	Calendars CalendarGetter
}

// PolicyCap is what p's limit schedule allows at now. A calendar that no
// longer exists makes its rule not apply.
func (pc PolicyCaps) PolicyCap(ctx context.Context, p *model.Policy, now time.Time) (model.Cap, error) {
	if len(p.Limits) == 0 {
		return model.NoCap, nil
	}
	l, err := CompileLimits(p.Limits)
	if err != nil {
		return model.NoCap, fmt.Errorf("policy %s limits: %w", p.ID, err)
	}
	var cals map[string]*Calendar
	for _, id := range l.CalendarIDs() {
		mc, err := pc.Calendars.CalendarGet(ctx, p.TenantID, id)
		if errors.Is(err, model.ErrNotFound) {
			continue
		}
		if err != nil {
			return model.NoCap, fmt.Errorf("policy %s calendar %s: %w", p.ID, id, err)
		}
		c, err := Compile(mc)
		if err != nil {
			return model.NoCap, fmt.Errorf("policy %s calendar %s: %w", p.ID, id, err)
		}
		if cals == nil {
			cals = map[string]*Calendar{}
		}
		cals[id] = c
	}
	return l.At(now, cals), nil
}
