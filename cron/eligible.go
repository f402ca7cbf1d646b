package cron

import "time"

// AppendEligible appends to dst one Slot for every key whose children fire at
// a minute-aligned instant m with t0 <= m < t1, in time zone loc (nil means
// UTC). For the local wall minute of m the keys are H, W(d), W(d#n), M(dom),
// M(L) on the last day, MO, MM(month, dom), MM(month, L), MW(month, d) and
// MW(month, d#n), each with Hour = the wall hour and Hour = -1.
//
// DST: when m shows a wall minute for the second time (fall-back) only the
// Hour = -1 keys are appended, so hour-specific schedules fire once; at the
// first instant after a spring-forward gap the hour-specific keys of every
// skipped wall minute are appended too, with At = that instant.
//
// It allocates nothing when dst has room: the emitter calls it every minute
// for every time zone.
func AppendEligible(dst []Slot, loc *time.Location, t0, t1 time.Time) []Slot {
	if loc == nil {
		loc = time.UTC
	}
	m := ceilMinute(t0)
	end := t1.Unix()
	if t1.Nanosecond() > 0 {
		end++
	}
	for m < end {
		z := zoneAt(loc, m)
		stop := min(end, z.end)
		for ; m < stop; m += 60 {
			at := time.Unix(m, 0).UTC()
			if z.repeated(m) {
				dst = appendWall(dst, m+z.off, at, false, true)
				continue
			}
			dst = appendWall(dst, m+z.off, at, true, true)
			if z.gapAt(m) {
				for w := z.start + z.prevOff; w < z.start+z.off; w += 60 {
					dst = appendWall(dst, w, at, true, false)
				}
			}
		}
	}
	return dst
}

// appendWall appends the keys of wall minute wall (local seconds since the
// epoch): the hour-specific variants if specific, the Hour = -1 ones if every.
func appendWall(dst []Slot, wall int64, at time.Time, specific, every bool) []Slot {
	days := floorDiv(wall, secondsPerDay)
	sod := wall - days*secondsPerDay
	hour, minute := int8(sod/3600), int8(sod%3600/60)
	y, mo, d := civilFromDays(days)
	wd := int8(weekdayOf(days))
	last := d == daysIn(y, mo)
	nth := int8((d-1)/7 + 1)
	month, day := int8(mo), int8(d)

	var keys [10]Key
	n := 0
	add := func(k Key) {
		keys[n] = k
		n++
	}
	add(Key{Class: ClassH})
	add(Key{Class: ClassW, Day: wd})
	add(Key{Class: ClassW, Day: wd, Nth: nth})
	add(Key{Class: ClassM, Day: day})
	if last {
		add(Key{Class: ClassM, Day: dayLast})
	}
	add(Key{Class: ClassMO, Month: month})
	add(Key{Class: ClassMM, Month: month, Day: day})
	if last {
		add(Key{Class: ClassMM, Month: month, Day: dayLast})
	}
	add(Key{Class: ClassMW, Month: month, Day: wd})
	add(Key{Class: ClassMW, Month: month, Day: wd, Nth: nth})

	for _, k := range keys[:n] {
		k.Minute = minute
		if specific {
			k.Hour = hour
			dst = append(dst, Slot{Key: k, At: at})
		}
		if every {
			k.Hour = -1
			dst = append(dst, Slot{Key: k, At: at})
		}
	}
	return dst
}
