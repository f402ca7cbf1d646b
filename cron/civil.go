package cron

// Civil-date arithmetic on "days since 1970-01-01" so that the hot paths do
// not call time.Time methods (each of which repeats a zone lookup).

const secondsPerDay = 86400

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civilFromDays converts days since the epoch to a proleptic Gregorian date
// (H. Hinnant's algorithm).
func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	y = int(yoe + era*400)
	if m <= 2 {
		y++
	}
	return y, m, d
}

// weekdayOf returns 0 (Sunday) to 6; 1970-01-01 was a Thursday.
func weekdayOf(days int64) int {
	w := (days + 4) % 7
	if w < 0 {
		w += 7
	}
	return int(w)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

// daysIn returns the length of month m of year y.
func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// maxDaysIn is the longest month m can be in any year (February: 29).
func maxDaysIn(m int) int {
	if m == 2 {
		return 29
	}
	return daysIn(2001, m)
}
