package cron

import (
	"math/bits"
	"strconv"
	"strings"
)

// Expr is a parsed, validated cron expression held as bit sets, so matching
// and splitting never re-read the text. Expr values are immutable and
// comparable; equal expressions have equal String forms.
type Expr struct {
	minutes uint64   // bit i: minute i (0-59)
	hours   uint32   // bit i: hour i (0-23)
	doms    uint32   // bit i: day of month i (1-31)
	months  uint16   // bit i: month i (1-12)
	dows    uint8    // bit i: weekday i (0-6, 0 = Sunday)
	last    bool     // L: last day of the month
	nth     [7]uint8 // nth[d] bit n: the nth weekday d of the month (n 1-5)
}

const (
	allMinutes = uint64(1)<<60 - 1
	allHours   = uint32(1)<<24 - 1
	allDoms    = uint32(0xFFFFFFFE)
	allMonths  = uint16(0x1FFE)
	allDows    = uint8(0x7F)
)

// domRestricted reports whether day-of-month narrows the days (L counts).
func (e *Expr) domRestricted() bool { return e.doms != allDoms || e.last }

// dowRestricted reports whether day-of-week narrows the days (#n counts).
func (e *Expr) dowRestricted() bool { return e.dows != allDows || e.hasNth() }

func (e *Expr) monthRestricted() bool { return e.months != allMonths }

// everyHour reports whether the schedule fires in every hour, which makes its
// children "every hour" keys (Hour = -1) with different DST behaviour.
func (e *Expr) everyHour() bool { return e.hours == allHours }

func (e *Expr) hasNth() bool {
	for _, m := range e.nth {
		if m != 0 {
			return true
		}
	}
	return false
}

// dayMatches applies the day rules to a local date: the month must match,
// then day-of-month OR day-of-week when both are restricted, else the
// restricted one.
func (e *Expr) dayMatches(month, dom, wd int, isLast bool) bool {
	if e.months&(1<<month) == 0 {
		return false
	}
	domR, dowR := e.domRestricted(), e.dowRestricted()
	if !domR && !dowR {
		return true
	}
	domM := e.doms&(1<<dom) != 0 || (isLast && e.last)
	dowM := e.dows&(1<<wd) != 0 || e.nth[wd]&(1<<((dom-1)/7+1)) != 0
	switch {
	case domR && dowR:
		return domM || dowM
	case domR:
		return domM
	default:
		return dowM
	}
}

// String returns the canonical 5-field form: numbers only, ascending, runs of
// three or more as ranges, "*" for an unrestricted field, L and d#n last.
func (e *Expr) String() string {
	var b strings.Builder
	b.Grow(32)
	writeSet(&b, e.minutes, 0, 59, false)
	b.WriteByte(' ')
	writeSet(&b, uint64(e.hours), 0, 23, false)
	b.WriteByte(' ')
	writeSet(&b, uint64(e.doms), 1, 31, e.last)
	if e.last {
		if e.doms != 0 {
			b.WriteByte(',')
		}
		b.WriteByte('L')
	}
	b.WriteByte(' ')
	writeSet(&b, uint64(e.months), 1, 12, false)
	b.WriteByte(' ')
	hasNth := e.hasNth()
	writeSet(&b, uint64(e.dows), 0, 6, hasNth)
	if hasNth {
		first := e.dows == 0
		for d, m := range e.nth {
			for n := 1; n <= 5; n++ {
				if m&(1<<n) == 0 {
					continue
				}
				if !first {
					b.WriteByte(',')
				}
				first = false
				b.WriteString(strconv.Itoa(d))
				b.WriteByte('#')
				b.WriteString(strconv.Itoa(n))
			}
		}
	}
	return b.String()
}

// writeSet writes set (bits lo..hi) as "*" when full and not forced
// restricted, else as a list; an empty set writes nothing.
func writeSet(b *strings.Builder, set uint64, lo, hi int, restricted bool) {
	full := (uint64(1)<<(hi+1) - 1) &^ (uint64(1)<<lo - 1)
	if set == full && !restricted {
		b.WriteByte('*')
		return
	}
	first := true
	forRuns(set, lo, hi, func(v, end int) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Itoa(v))
		switch {
		case end-v >= 2:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(end))
		case end-v == 1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(end))
		}
	})
}

func popcount[T uint8 | uint16 | uint32 | uint64](x T) int { return bits.OnesCount64(uint64(x)) }

// HasWallTime reports whether e names the wall-clock time hour:minute
// (whatever the day): a fire at another wall time was moved there by DST.
func (e *Expr) HasWallTime(hour, minute int) bool {
	return hour >= 0 && hour < 24 && minute >= 0 && minute < 60 &&
		e.hours&(1<<hour) != 0 && e.minutes&(1<<minute) != 0
}
