package master

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// The policy load forecast: the fires of every active schedule naming a
// policy in a range, as the emitter fires them, counted per minute by
// launch time and run through a queue that drains capacityAt events a
// minute, first in first out.

const (
	// forecastMaxRange bounds the range of a forecast.
	forecastMaxRange = 7 * 24 * time.Hour
	// forecastDefaultRange is the range when to is not given.
	forecastDefaultRange = 24 * time.Hour
	// forecastMaxWork bounds the work of one forecast: the fire times
	// computed plus the minutes their spread windows cover.
	forecastMaxWork = 500_000
	// forecastMaxSchedules bounds the schedules a forecast reads;
	// warnMaxSchedules those the forecast of a save reads (a save of a
	// schedule on a policy with more has no warnings: it is not worth a
	// read of them all on every save).
	forecastMaxSchedules = 20_000
	warnMaxSchedules     = 1_000
	// forecastPeaks is how many peak minutes a forecast lists.
	forecastPeaks = 10
	// warnHorizon is how far ahead a create or update looks for fires
	// that would miss their deadlines.
	warnHorizon = 24 * time.Hour
)

var (
	// errForecastTooLarge: the forecast would take more than
	// forecastMaxWork.
	errForecastTooLarge = errors.New("the forecast needs more work than it may do; shorten the range")
	// errTooManySchedules: more schedules name the policy than a forecast
	// reads.
	errTooManySchedules = errors.New("more schedules name the policy than a forecast reads (" + strconv.Itoa(forecastMaxSchedules) + ")")
)

// capacityAt is the events a minute the policy can drain at the instant
// at under c, the limit rule that applies then: its throughput (rate, or
// limit over the measured hold time) at its effective limit and rate. ok
// is false while neither is known.
func capacityAt(p *model.Policy, c model.Cap, at time.Time) (perMinute float64, ok bool) {
	if _, ok := p.Throughput(); !ok {
		return 0, false
	}
	e := *p
	limit, _ := p.Effective(c, at)
	e.MaxInFlight, e.Adaptive = limit, nil
	e.RatePerSecond, _ = p.EffectiveRate(c)
	if limit == 0 {
		return 0, true
	}
	r, ok := e.Throughput()
	return r * 60, ok
}

// capacities fills fc.capacity minute by minute, reading the policy's
// limit rule again only where the last one ends.
func (s *Server) capacities(ctx context.Context, fc *forecast, p *model.Policy) error {
	caps := PolicyCaps(s.store)
	var c model.Cap
	var valid time.Time // c applies before valid; zero: read it
	for i := range fc.capacity {
		at := fc.minuteStart(i)
		if i == 0 || !valid.IsZero() && !at.Before(valid) {
			var err error
			if c, err = caps.PolicyCap(ctx, p, at); err != nil {
				return fmt.Errorf("the limit rule of policy %s at %s: %w", p.ID, at.Format(time.RFC3339), err)
			}
			valid = p.NextChange(c, at)
		}
		fc.capacity[i], _ = capacityAt(p, c, at)
	}
	return nil
}

// fireDeadline is when the events of m's fire launched at launch should
// all be delivered: its deadline (model.Schedule.DeadlineAfter: its own,
// else the end of its window). ok is false for a schedule with neither.
func fireDeadline(m *model.Schedule, launch time.Time) (time.Time, bool) {
	if d := m.DeadlineAfter(); d > 0 {
		return launch.Add(d), true
	}
	return time.Time{}, false
}

// forecastFire is one fire of the forecast.
type forecastFire struct {
	schedule *model.Schedule
	at       time.Time // fire time
	launch   time.Time // fire time + jitter
	deadline time.Time // zero: none
	last     int       // minute index of its last event
	finish   time.Time // when its last event is expected out; zero: not by the end
}

// forecast is a computed forecast.
type forecast struct {
	from      time.Time // whole minute
	minutes   int
	arrivals  []int
	capacity  []float64
	backlog   []int
	drainedAt []time.Time // per minute: when the backlog reached 0 in it (zero: not)
	known     bool
	waiting   int
	events    int
	schedules int
	fires     []forecastFire
	drainedBy time.Time // zero: not drained by the end
}

// ForecastPolicy implements GET /v1/policies/{id}/forecast.
func (s *Server) ForecastPolicy(c echo.Context, id api.ID, params api.ForecastPolicyParams) error {
	ctx := c.Request().Context()
	now := s.now().UTC()
	from := now
	if params.From != nil {
		from = params.From.UTC()
	}
	to := from.Add(forecastDefaultRange)
	if params.To != nil {
		to = params.To.UTC()
		if !to.After(from) {
			return invalid("to", "must be after from")
		}
		if to.Sub(from) > forecastMaxRange {
			return invalid("to", "at most 7 days (168h) after from")
		}
	}
	p, err := s.store.PolicyGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	fc, err := s.forecast(ctx, p, from, to, now, nil, forecastMaxSchedules)
	if errors.Is(err, errForecastTooLarge) {
		return invalid("to", err.Error())
	}
	if errors.Is(err, errTooManySchedules) {
		return invalid("id", err.Error())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, fc.out(p, from, to))
}

// forecast computes the forecast of p over [from, to) at now. extra, if
// set, stands for the stored schedule of its id (a create or an update
// being checked). It reads at most maxSchedules schedules, else
// errTooManySchedules.
func (s *Server) forecast(ctx context.Context, p *model.Policy, from, to, now time.Time, extra *model.Schedule, maxSchedules int) (*forecast, error) {
	scheds, err := s.policySchedules(ctx, p, extra, maxSchedules)
	if err != nil {
		return nil, err
	}
	start := from.Truncate(time.Minute)
	fc := &forecast{from: start, minutes: int(to.Sub(start)+time.Minute-1) / int(time.Minute), schedules: len(scheds)}
	// The queue runs on past to until it drains, at most another range.
	total := fc.minutes * 2
	fc.arrivals, fc.capacity, fc.backlog = make([]int, total), make([]float64, total), make([]int, total)
	fc.drainedAt = make([]time.Time, total)
	_, fc.known = p.Throughput()
	if fc.known {
		if err := s.capacities(ctx, fc, p); err != nil {
			return nil, err
		}
	}
	if !from.After(now) {
		if fc.waiting, err = s.store.EventCountWaiting(ctx, p.ID, now); err != nil {
			return nil, err
		}
	}
	work := 0
	for _, m := range scheds {
		comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
		if err != nil {
			continue // not a definition the emitter fires either
		}
		times, err := s.fireTimesIn(ctx, m, comp, from, to, forecastMaxWork-work)
		if err != nil {
			return nil, err
		}
		work += len(times)
		for _, t := range times {
			launch := t.Add(model.JitterOffset(m.ID, t, m.Jitter))
			f := forecastFire{schedule: m, at: t, launch: launch}
			f.deadline, _ = fireDeadline(m, launch)
			var n int
			f.last, n = fc.arrive(m, launch)
			work += n
			if work > forecastMaxWork {
				return nil, errForecastTooLarge
			}
			fc.events += m.EventCount
			fc.fires = append(fc.fires, f)
		}
	}
	fc.run(p)
	return fc, nil
}

// policySchedules are the tenant's active schedules naming p, with extra
// in place of its stored version.
func (s *Server) policySchedules(ctx context.Context, p *model.Policy, extra *model.Schedule, max int) ([]*model.Schedule, error) {
	var out []*model.Schedule
	lp := &store.ScheduleListParams{TenantID: p.TenantID, PolicyID: p.ID, State: model.ScheduleActive, Limit: min(1000, max+1)}
	for {
		page, err := s.store.ScheduleList(ctx, lp)
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			if extra == nil || m.ID != extra.ID {
				out = append(out, m)
			}
		}
		if len(out) > max {
			return nil, errTooManySchedules
		}
		if len(page) < lp.Limit {
			break
		}
		lp.After = page[len(page)-1].ID
	}
	if extra != nil && extra.State == model.ScheduleActive && extra.PolicyID == p.ID {
		out = append(out, extra)
	}
	return out, nil
}

// fireTimesIn lists m's fire times in [from, to) as the emitter fires
// them: its calendars applied (excluded fires left out, moved ones where
// they move to), skipped fires left out; at most max of them, else
// errForecastTooLarge.
func (s *Server) fireTimesIn(ctx context.Context, m *model.Schedule, comp *schedule.Compiled, from, to time.Time, max int) ([]time.Time, error) {
	var set calendar.Set
	if len(m.ExcludeCalendars) > 0 {
		var err error
		if set, err = s.scheduleCalendars(ctx, m); err != nil {
			return nil, err
		}
	}
	withM := *comp
	withM.Schedule = *m // an interval counts from m's creation
	var out []time.Time
	after := from.Add(-time.Nanosecond)
	looked := 0
	for done := false; !done; {
		batch := withM.NextFireTimes(after, 256)
		done = len(batch) == 0 || m.IsOneOff()
		for _, t := range batch {
			if !t.After(after) && !m.IsOneOff() {
				continue
			}
			after = t
			if !t.Before(to) {
				done = true
				break
			}
			if looked++; looked > max {
				return nil, errForecastTooLarge
			}
			if t.Before(from) {
				continue
			}
			if d := calendar.ForSchedule(set, m, t); d.Excluded() {
				if t = d.To; t.IsZero() || !t.Before(to) {
					continue
				}
			}
			if m.Skipped(t) {
				continue
			}
			out = append(out, t)
		}
	}
	// Moved fires may land after later ones, or on one.
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal), nil
}

// arrive counts the events of m's fire launched at launch into their
// minutes: all at launch, or spread over the window as the emitter lays
// them. It returns the minute of the last event and the minutes it
// touched.
func (fc *forecast) arrive(m *model.Schedule, launch time.Time) (last, work int) {
	n := m.EventCount
	if !m.Spread || m.Window <= 0 || n <= 1 {
		i := fc.index(launch)
		fc.arrivals[i] += n
		return i, 1
	}
	// Event i launches at launch + i*window/n: the events launched before
	// u are ceil(n*(u-launch)/window), clamped to [0, n].
	before := func(u time.Time) int {
		d := u.Sub(launch)
		switch {
		case d <= 0:
			return 0
		case d >= m.Window:
			return n
		}
		return min(n, int(math.Ceil(float64(n)*float64(d)/float64(m.Window))))
	}
	first, end := fc.index(launch), fc.index(launch.Add(m.Window-1))
	for i := first; i <= end; i++ {
		lo, hi := fc.minuteStart(i), fc.minuteStart(i+1)
		if i == first {
			lo = launch
		}
		if k := before(hi) - before(lo); k > 0 {
			fc.arrivals[i] += k
			last = i
		}
	}
	return last, end - first + 1
}

// index is the minute of t, clamped to the simulated minutes.
func (fc *forecast) index(t time.Time) int {
	return min(max(int(t.Sub(fc.from)/time.Minute), 0), len(fc.arrivals)-1)
}

func (fc *forecast) minuteStart(i int) time.Time { return fc.from.Add(time.Duration(i) * time.Minute) }

// run drains the arrivals minute by minute, first in first out, and sets
// each fire's expected finish.
func (fc *forecast) run(p *model.Policy) {
	if !fc.known {
		return
	}
	// cum[i]: events arrived by the end of minute i (the waiting ones at
	// the start); out[i]: delivered by its end.
	cum, out := make([]float64, len(fc.arrivals)), make([]float64, len(fc.arrivals))
	backlog, arrived, served := float64(fc.waiting), float64(fc.waiting), 0.0
	for i := range fc.arrivals {
		c := fc.capacity[i]
		arrived += float64(fc.arrivals[i])
		cum[i] = arrived
		avail := backlog + float64(fc.arrivals[i])
		took := math.Min(avail, c)
		served += took
		out[i] = served
		backlog = avail - took
		if backlog < 0.5 {
			backlog = 0
		}
		fc.backlog[i] = int(math.Ceil(backlog - 1e-9))
		if avail > 0 && backlog == 0 && c > 0 {
			fc.drainedAt[i] = fc.minuteStart(i).Add(time.Duration(took / c * float64(time.Minute)))
		}
	}
	for i := len(fc.arrivals) - 1; i >= 0; i-- {
		if fc.backlog[i] > 0 {
			break
		}
		if !fc.drainedAt[i].IsZero() {
			fc.drainedBy = fc.drainedAt[i]
			break
		}
	}
	if fc.backlog[len(fc.backlog)-1] > 0 {
		fc.drainedBy = time.Time{}
	}
	for k := range fc.fires {
		f := &fc.fires[k]
		need := cum[f.last] - 0.5
		// The first minute whose deliveries reach the fire's last event.
		j, _ := slices.BinarySearchFunc(out[f.last:], need, func(a, b float64) int {
			switch {
			case a < b:
				return -1
			case a > b:
				return 1
			}
			return 0
		})
		j += f.last
		if j >= len(out) || fc.capacity[j] <= 0 {
			continue
		}
		prev := 0.0
		if j > 0 {
			prev = out[j-1]
		}
		frac := math.Min(1, math.Max(0, (need+0.5-prev)/fc.capacity[j]))
		f.finish = fc.minuteStart(j).Add(time.Duration(frac * float64(time.Minute)))
		if f.finish.Before(f.launch) {
			f.finish = f.launch
		}
	}
}

// missed are the fires expected to finish after their deadlines (or not
// within the simulation), of schedule id if set, by fire time.
func (fc *forecast) missed(id string) []forecastFire {
	if !fc.known {
		return nil
	}
	var out []forecastFire
	for _, f := range fc.fires {
		if f.deadline.IsZero() || id != "" && f.schedule.ID != id {
			continue
		}
		if f.finish.IsZero() || f.finish.After(f.deadline) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b forecastFire) int { return a.at.Compare(b.at) })
	return out
}

// out renders the forecast of [from, to).
func (fc *forecast) out(p *model.Policy, from, to time.Time) api.PolicyForecast {
	o := api.PolicyForecast{
		PolicyId: p.ID, From: from, To: to, Schedules: fc.schedules, Events: fc.events,
		CapacityKnown: fc.known, Minutes: []api.ForecastMinute{}, Peaks: []api.ForecastMinute{}, Drains: []api.ForecastDrain{},
	}
	if fc.waiting > 0 {
		o.Waiting = &fc.waiting
	}
	if fc.known {
		c := fc.capacity[0]
		o.CapacityPerMinute = &c
		missed := len(fc.missed(""))
		o.MissedDeadlines = &missed
		if !fc.drainedBy.IsZero() {
			d := fc.drainedBy
			o.DrainedBy = &d
		}
	}
	maxBacklog := 0
	var spell *api.ForecastDrain
	for i := range fc.arrivals {
		inRange := i < fc.minutes
		if inRange && (fc.arrivals[i] > 0 || fc.backlog[i] > 0) {
			o.Minutes = append(o.Minutes, api.ForecastMinute{At: fc.minuteStart(i), Events: fc.arrivals[i], Capacity: fc.capacity[i], Backlog: fc.backlog[i]})
		}
		if !fc.known {
			continue
		}
		maxBacklog = max(maxBacklog, fc.backlog[i])
		busy := fc.backlog[i] > 0 || fc.arrivals[i] > 0 && fc.drainedAt[i].IsZero()
		if spell == nil && (busy || fc.arrivals[i] > 0) && inRange {
			o.Drains = append(o.Drains, api.ForecastDrain{Start: fc.minuteStart(i)})
			spell = &o.Drains[len(o.Drains)-1]
		}
		if spell != nil {
			spell.Events += fc.arrivals[i]
			spell.MaxBacklog = max(spell.MaxBacklog, fc.backlog[i])
			if fc.backlog[i] == 0 {
				if d := fc.drainedAt[i]; !d.IsZero() {
					spell.DrainedAt = &d
				}
				spell = nil
			}
		}
	}
	if fc.known {
		o.MaxBacklog = &maxBacklog
	}
	// A spell whose events were all delivered in their minute is no
	// busy spell.
	o.Drains = slices.DeleteFunc(o.Drains, func(d api.ForecastDrain) bool { return d.MaxBacklog == 0 })
	peaks := slices.Clone(o.Minutes)
	peaks = slices.DeleteFunc(peaks, func(m api.ForecastMinute) bool { return m.Events == 0 })
	slices.SortStableFunc(peaks, func(a, b api.ForecastMinute) int { return b.Events - a.Events })
	o.Peaks = peaks[:min(len(peaks), forecastPeaks)]
	return o
}

// capacityWarnings are the warnings of saving m: its fires in the next
// warnHorizon that the policy is expected not to drain before their
// deadlines, and those of the policy's other schedules that m makes miss
// theirs. None when its policy has no known capacity;
// a forecast too large to make is skipped, not an error of the save.
func (s *Server) capacityWarnings(ctx context.Context, m *model.Schedule) []api.Warning {
	if m.PolicyID == "" || m.State != model.ScheduleActive {
		return nil
	}
	p, err := s.store.PolicyGet(ctx, m.TenantID, m.PolicyID)
	if err != nil {
		return nil
	}
	now := s.now().UTC()
	if _, ok := p.Throughput(); !ok {
		return nil
	}
	fc, err := s.forecast(ctx, p, now, now.Add(warnHorizon), now, m, warnMaxSchedules)
	if err != nil {
		if !errors.Is(err, errForecastTooLarge) && !errors.Is(err, errTooManySchedules) {
			s.log.Warn().Err(err).Str("schedule", m.ID).Msg("the capacity forecast of a saved schedule failed")
		}
		return nil
	}
	var out []api.Warning
	if own := fc.missed(m.ID); len(own) > 0 {
		out = append(out, capacityWarning(own,
			"the policy is not expected to deliver the events of "+itoa(len(own))+" fire(s) of this schedule in the next 24h before their windows end; raise its limit or rate, or widen the window"))
	}
	// Fires of the policy's other schedules that miss with this one and
	// not without it.
	var others []forecastFire
	for _, f := range fc.missed("") {
		if f.schedule.ID != m.ID {
			others = append(others, f)
		}
	}
	if len(others) == 0 {
		return out
	}
	without := *m
	without.PolicyID = "" // the schedule left out
	fc0, err := s.forecast(ctx, p, now, now.Add(warnHorizon), now, &without, warnMaxSchedules)
	if err != nil {
		return out
	}
	before := map[string]bool{}
	for _, f := range fc0.missed("") {
		before[f.schedule.ID+f.at.String()] = true
	}
	others = slices.DeleteFunc(others, func(f forecastFire) bool { return before[f.schedule.ID+f.at.String()] })
	if len(others) > 0 {
		out = append(out, capacityWarning(others,
			"with this schedule the policy is not expected to deliver the events of "+itoa(len(others))+" fire(s) of its other schedules in the next 24h before their windows end (the first of schedule "+others[0].schedule.ID+")"))
	}
	return out
}

// capacityWarning is the warning of the fires missed (by fire time): the
// first of them and their count.
func capacityWarning(missed []forecastFire, msg string) api.Warning {
	f := missed[0]
	n := len(missed)
	w := api.Warning{Code: api.PolicyCapacity, Field: "policyId", FireTime: &f.at, Deadline: &f.deadline, Fires: &n, Message: msg}
	if !f.finish.IsZero() {
		w.FinishAt = &f.finish
	}
	return w
}
