package cron

// Children splits the schedule into child keys, one per (LaunchExpression,
// minute), classified by the most significant restricted field (see the
// package doc). With both day fields restricted it returns the children of
// both day classes (OR rule). The count is checked against limit (<= 0 means
// MaxChildren) before anything is built. Keys come in a deterministic order
// and are unique.
func (e *Expr) Children(limit int) ([]Key, error) {
	if limit <= 0 {
		limit = MaxChildren
	}
	n := e.childCount()
	if n > limit {
		return nil, &TooManyChildrenError{Count: n, Limit: limit}
	}
	out := make([]Key, 0, n)
	domR, dowR, monR := e.domRestricted(), e.dowRestricted(), e.monthRestricted()
	if domR {
		for m := 1; m <= 12; m++ {
			if monR && e.months&(1<<m) == 0 || !monR && m > 1 {
				continue
			}
			for d := 1; d <= dayLast; d++ {
				if d < dayLast && e.doms&(1<<d) == 0 || d == dayLast && !e.last {
					continue
				}
				k := Key{Class: ClassM, Day: int8(d)}
				if monR {
					if d != dayLast && d > maxDaysIn(m) {
						continue // e.g. 30 2: never fires, no child
					}
					k.Class, k.Month = ClassMM, int8(m)
				}
				out = e.appendTimes(out, k)
			}
		}
	}
	if dowR {
		for m := 1; m <= 12; m++ {
			if monR && e.months&(1<<m) == 0 || !monR && m > 1 {
				continue
			}
			for d := range 7 {
				for n := 0; n <= 5; n++ {
					if n == 0 && e.dows&(1<<d) == 0 || n > 0 && e.nth[d]&(1<<n) == 0 {
						continue
					}
					k := Key{Class: ClassW, Day: int8(d), Nth: int8(n)}
					if monR {
						k.Class, k.Month = ClassMW, int8(m)
					}
					out = e.appendTimes(out, k)
				}
			}
		}
	}
	if !domR && !dowR {
		if monR {
			for m := 1; m <= 12; m++ {
				if e.months&(1<<m) != 0 {
					out = e.appendTimes(out, Key{Class: ClassMO, Month: int8(m)})
				}
			}
		} else {
			out = e.appendTimes(out, Key{Class: ClassH})
		}
	}
	return out, nil
}

// appendTimes appends k for every (hour, minute) of the schedule; a full hour
// set becomes the single hour -1 ("every hour").
func (e *Expr) appendTimes(out []Key, k Key) []Key {
	for h := -1; h < 24; h++ {
		if h == -1 && !e.everyHour() || h >= 0 && (e.everyHour() || e.hours&(1<<h) == 0) {
			continue
		}
		k.Hour = int8(h)
		for mi := range 60 {
			if e.minutes&(1<<mi) != 0 {
				k.Minute = int8(mi)
				out = append(out, k)
			}
		}
	}
	return out
}

// childCount is len(Children(...)) computed from the bit sets alone.
func (e *Expr) childCount() int {
	hours := popcount(e.hours)
	if e.everyHour() {
		hours = 1
	}
	perDay := hours * popcount(e.minutes)
	domR, dowR, monR := e.domRestricted(), e.dowRestricted(), e.monthRestricted()
	days := 0
	if domR {
		if monR {
			for m := 1; m <= 12; m++ {
				if e.months&(1<<m) != 0 {
					days += popcount(e.doms & daysMask(maxDaysIn(m)))
					if e.last {
						days++
					}
				}
			}
		} else {
			days += popcount(e.doms)
			if e.last {
				days++
			}
		}
	}
	if dowR {
		wd := popcount(e.dows)
		for _, m := range e.nth {
			wd += popcount(m)
		}
		if monR {
			wd *= popcount(e.months)
		}
		days += wd
	}
	if !domR && !dowR {
		days = 1
		if monR {
			days = popcount(e.months)
		}
	}
	return days * perDay
}
