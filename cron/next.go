package cron

import (
	"slices"
	"time"
)

// searchDays bounds NextFireTimes to about 30 years, long enough for rare
// dates such as Feb 29 or a 5th Sunday in February.
const searchDays = 30 * 366

// NextFireTimes returns up to k fire instants (in UTC) strictly after after,
// ascending and without duplicates. It follows exactly the rules of Children
// plus AppendEligible (OR rule, L, #n and the DST rules), walking local days
// and skipping those that cannot match. It returns fewer than k when the
// schedule does not fire that often within about 30 years.
func NextFireTimes(e *Expr, loc *time.Location, after time.Time, k int) []time.Time {
	if e == nil || k <= 0 {
		return nil
	}
	if loc == nil {
		loc = time.UTC
	}
	a := after.Unix() // minute instants m > after are exactly those m > a
	_, off := after.In(loc).Zone()
	first := floorDiv(a+int64(off), secondsPerDay) - 1 // skipped walls of the day before fire today
	stop := first + searchDays
	var secs []int64
	for day := first; day <= stop; day++ {
		y, mo, d := civilFromDays(day)
		dim := daysIn(y, mo)
		if e.months&(1<<mo) == 0 {
			day += int64(dim - d) // skip the rest of the month
			continue
		}
		if !e.dayMatches(mo, d, weekdayOf(day), d == dim) {
			continue
		}
		secs = e.appendDayFires(secs, loc, day, a)
		if len(secs) >= k && stop > day+2 {
			// DST can reorder instants across a day boundary: look two more days.
			if secs = sortDedupe(secs); len(secs) >= k {
				stop = day + 2
			}
		}
	}
	secs = sortDedupe(secs)
	if len(secs) > k {
		secs = secs[:k]
	}
	out := make([]time.Time, len(secs))
	for i, s := range secs {
		out[i] = time.Unix(s, 0).UTC()
	}
	return out
}

// appendDayFires appends the instants after `after` at which the schedule's
// times on local day `day` fire: the first real occurrence of each wall
// minute, later occurrences only for every-hour schedules, and for skipped
// wall minutes (hour-specific schedules only) the end of the gap.
func (e *Expr) appendDayFires(out []int64, loc *time.Location, day, after int64) []int64 {
	const margin = 26 * 3600 // larger than any UTC offset
	w0 := day * secondsPerDay
	// Spans are joined where the offset does not change, so only real
	// transitions (at least four days apart) take a slot.
	var spans [8]zoneSpan
	n := 0
	for s := w0 - margin; n < len(spans); {
		z := zoneAt(loc, s)
		if n > 0 && spans[n-1].off == z.off {
			spans[n-1].end = z.end
		} else {
			spans[n] = z
			n++
		}
		if z.end >= w0+secondsPerDay+margin {
			break
		}
		s = z.end
	}
	every := e.everyHour()
	for h := int64(0); h < 24; h++ {
		if e.hours&(1<<h) == 0 {
			continue
		}
		for mi := int64(0); mi < 60; mi++ {
			if e.minutes&(1<<mi) == 0 {
				continue
			}
			w := w0 + h*3600 + mi*60
			found := false
			for i := range spans[:n] {
				m := w - spans[i].off
				if m < spans[i].start || m >= spans[i].end {
					continue
				}
				if (!found || every) && m > after {
					out = append(out, m)
				}
				found = true
			}
			if found || every {
				continue
			}
			for i := 1; i < n; i++ {
				t := spans[i].start
				if spans[i-1].off < spans[i].off && w >= t+spans[i-1].off && w < t+spans[i].off {
					if m := -floorDiv(-t, 60) * 60; m > after {
						out = append(out, m)
					}
				}
			}
		}
	}
	return out
}

func sortDedupe(s []int64) []int64 {
	slices.Sort(s)
	return slices.Compact(s)
}
