package cron

import (
	"math"
	"time"
)

// MinGap returns the shortest time between two consecutive fires of e in
// loc among the fires in (from, to], with at the earlier fire of that pair
// (UTC; the earliest such pair). It is 0 when there are fewer than two fires. The fires are those
// of NextFireTimes, DST rules included: a wall time skipped by a
// spring-forward gap fires at the end of the gap, which can bring it within
// minutes of the fire before it.
//
// A day whose offset is the same from 26 hours before it to 26 hours after
// it costs one step: its fires are the day's wall times, whose smallest gap
// is worked out once. Only days near a transition are expanded fire by
// fire, so a year of a minutely schedule costs a few hundred steps.
func MinGap(e *Expr, loc *time.Location, from, to time.Time) (gap time.Duration, at time.Time) {
	if e == nil || !to.After(from) {
		return 0, time.Time{}
	}
	if loc == nil {
		loc = time.UTC
	}
	// The wall times of a day, in seconds from midnight, and their
	// smallest gap.
	var walls []int64
	for h := int64(0); h < 24; h++ {
		if e.hours&(1<<h) == 0 {
			continue
		}
		for m := int64(0); m < 60; m++ {
			if e.minutes&(1<<m) != 0 {
				walls = append(walls, h*3600+m*60)
			}
		}
	}
	inGap, inAt := int64(math.MaxInt64), 0
	for i := 1; i < len(walls); i++ {
		if d := walls[i] - walls[i-1]; d < inGap {
			inGap, inAt = d, i-1
		}
	}

	a, b := from.Unix(), to.Unix() // fire instants m with a < m <= b
	_, off := from.In(loc).Zone()
	first := floorDiv(a+int64(off), secondsPerDay) - 1
	_, off = to.In(loc).Zone()
	last := floorDiv(b+int64(off), secondsPerDay) + 1

	const margin = 26 * 3600
	var (
		span = zoneSpan{start: math.MaxInt64, end: math.MinInt64}
		best = int64(math.MaxInt64)
		at0  int64
		prev = int64(math.MinInt64) // the last fire looked at
		buf  []int64                // fires of the days near a transition, not yet looked at
	)
	consider := func(d, at int64) {
		if d < best || d == best && at < at0 {
			best, at0 = d, at
		}
	}
	// Days near a transition may list their fires out of order; none of
	// them comes before a uniform day's or after the next one's.
	flush := func() {
		for _, m := range sortDedupe(buf) {
			if m <= prev {
				continue
			}
			if prev != math.MinInt64 {
				consider(m-prev, prev)
			}
			prev = m
		}
		buf = buf[:0]
	}
	for day := first; day <= last; day++ {
		y, mo, d := civilFromDays(day)
		dim := daysIn(y, mo)
		if e.months&(1<<mo) == 0 {
			day += int64(dim - d)
			continue
		}
		if !e.dayMatches(mo, d, weekdayOf(day), d == dim) {
			continue
		}
		w0 := day * secondsPerDay
		lo, hi := w0-margin, w0+secondsPerDay+margin
		if lo < span.start || hi > span.end {
			span = uniformSpan(loc, lo, hi)
		}
		if lo >= span.start && hi <= span.end {
			f0, f1 := w0+walls[0]-span.off, w0+walls[len(walls)-1]-span.off
			if f0 > a && f1 <= b {
				flush()
				if prev != math.MinInt64 {
					consider(f0-prev, prev)
				}
				if inGap != math.MaxInt64 {
					consider(inGap, w0+walls[inAt]-span.off)
				}
				prev = f1
				continue
			}
		}
		n := len(buf)
		buf = e.appendDayFires(buf, loc, day, a)
		kept := buf[:n]
		for _, m := range buf[n:] {
			if m <= b {
				kept = append(kept, m)
			}
		}
		buf = kept
	}
	flush()
	if best == math.MaxInt64 {
		return 0, time.Time{}
	}
	return time.Duration(best) * time.Second, time.Unix(at0, 0).UTC()
}

// uniformSpan returns the stretch around [lo, hi) over which loc keeps one
// offset, joining spans that differ only in name; a span not covering
// [lo, hi) means the offset changes within it.
func uniformSpan(loc *time.Location, lo, hi int64) zoneSpan {
	z := zoneAt(loc, lo)
	for z.end < hi {
		next := zoneAt(loc, z.end)
		if next.off != z.off {
			break
		}
		z.end = next.end
	}
	return z
}
