package cron

import (
	"strconv"
	"strings"
)

var (
	dayNames   = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames = []string{"", "January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
	ordinals = []string{"", "first", "second", "third", "fourth", "fifth"}
)

// Describe says in English when e fires, for example "at 09:00 on Monday
// through Friday" or "every 15 minutes on day 1 of the month in January".
// Days named by both day-of-month and day-of-week read "... or on ...",
// the classic cron rule.
func (e *Expr) Describe() string {
	var b strings.Builder
	b.WriteString(e.describeTime())
	days := e.describeDays()
	if days == "" {
		b.WriteString(" every day")
	} else {
		b.WriteString(" on ")
		b.WriteString(days)
	}
	if e.monthRestricted() {
		b.WriteString(" in ")
		b.WriteString(describeSet(uint64(e.months), 1, 12, func(v int) string { return monthNames[v] }))
	}
	return b.String()
}

// describeTime describes the minutes and hours.
func (e *Expr) describeTime() string {
	nm, nh := popcount(e.minutes), popcount(e.hours)
	if nm*nh <= 4 {
		// A few wall times: list them.
		var times []string
		for h := 0; h < 24; h++ {
			for m := 0; m < 60; m++ {
				if e.hours&(1<<h) != 0 && e.minutes&(1<<m) != 0 {
					times = append(times, twoDigits(h)+":"+twoDigits(m))
				}
			}
		}
		return "at " + joinList(times)
	}
	var mins string
	switch step, ok := stepOf(e.minutes, 0, 59); {
	case e.minutes == allMinutes:
		mins = "every minute"
	case ok:
		mins = "every " + strconv.Itoa(step) + " minutes"
	case nm == 1:
		mins = "at minute " + describeSet(e.minutes, 0, 59, strconv.Itoa)
	default:
		mins = "at minutes " + describeSet(e.minutes, 0, 59, strconv.Itoa)
	}
	if e.everyHour() {
		if e.minutes == allMinutes || strings.HasPrefix(mins, "every ") {
			return mins
		}
		return mins + " past every hour"
	}
	if step, ok := stepOf(uint64(e.hours), 0, 23); ok {
		return mins + " past every " + strconv.Itoa(step) + " hours"
	}
	var runs [][2]int
	forRuns(uint64(e.hours), 0, 23, func(lo, hi int) { runs = append(runs, [2]int{lo, hi}) })
	if len(runs) == 1 {
		return mins + " from " + twoDigits(runs[0][0]) + ":00 through " + twoDigits(runs[0][1]) + ":59"
	}
	return mins + " during hours " + describeSet(uint64(e.hours), 0, 23, strconv.Itoa)
}

// describeDays describes the day rules; "" when every day matches.
func (e *Expr) describeDays() string {
	var dom, dow string
	if e.domRestricted() {
		var parts []string
		if e.doms != 0 {
			word := "day "
			if popcount(e.doms) > 1 {
				word = "days "
			}
			parts = append(parts, word+describeSet(uint64(e.doms), 1, 31, strconv.Itoa))
		}
		if e.last {
			parts = append(parts, "the last day")
		}
		dom = strings.Join(parts, " and ") + " of the month"
	}
	if e.dowRestricted() {
		var parts []string
		if e.dows != 0 {
			parts = append(parts, describeSet(uint64(e.dows), 0, 6, func(v int) string { return dayNames[v] }))
		}
		for d, m := range e.nth {
			for n := 1; n <= 5; n++ {
				if m&(1<<n) != 0 {
					parts = append(parts, "the "+ordinals[n]+" "+dayNames[d]+" of the month")
				}
			}
		}
		dow = joinList(parts)
	}
	switch {
	case dom != "" && dow != "":
		return dom + " or on " + dow
	case dom != "":
		return dom
	}
	return dow
}

// stepOf reports whether set is every step-th value from lo, step > 1,
// and reaches past hi-step (such as */15 on minutes).
func stepOf(set uint64, lo, hi int) (int, bool) {
	if set&(1<<lo) == 0 || popcount(set) < 2 {
		return 0, false
	}
	step := 0
	for v := lo + 1; v <= hi; v++ {
		if set&(1<<v) != 0 {
			step = v - lo
			break
		}
	}
	if step < 2 {
		return 0, false
	}
	for v := lo; v <= hi; v++ {
		if (set&(1<<v) != 0) != ((v-lo)%step == 0) {
			return 0, false
		}
	}
	return step, true
}

// describeSet lists the values of set (bits lo..hi) by name, runs of
// three or more as "a through b".
func describeSet(set uint64, lo, hi int, name func(int) string) string {
	var parts []string
	forRuns(set, lo, hi, func(a, b int) {
		switch {
		case b-a >= 2:
			parts = append(parts, name(a)+" through "+name(b))
		case b-a == 1:
			parts = append(parts, name(a), name(b))
		default:
			parts = append(parts, name(a))
		}
	})
	return joinList(parts)
}

// forRuns calls fn with each run of consecutive values of set.
func forRuns(set uint64, lo, hi int, fn func(a, b int)) {
	for v := lo; v <= hi; v++ {
		if set&(1<<v) == 0 {
			continue
		}
		end := v
		for end+1 <= hi && set&(1<<(end+1)) != 0 {
			end++
		}
		fn(v, end)
		v = end
	}
}

// joinList joins "a", "a and b", "a, b and c".
func joinList(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func twoDigits(v int) string {
	if v < 10 {
		return "0" + strconv.Itoa(v)
	}
	return strconv.Itoa(v)
}
