package cron

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// genExpr is a random expression: its text and the value sets it means,
// computed while generating the text (never by parsing it).
type genExpr struct {
	text    string
	minute  [60]bool
	hour    [24]bool
	dom     [32]bool
	last    bool
	month   [13]bool
	dow     [7]bool
	nth     [7][6]bool
	minutes []int // listed values of minute and hour, for iteration
	hours   []int
	dr, wr  bool // day-of-month / day-of-week restricted
}

type exprGen struct{ r *rand.Rand }

var (
	genMonthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	genDowNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

// genField describes one column for the generator.
type genField struct {
	lo, hi   int // value range (day of week: 0-7)
	starHi   int // top of "*" and "a/s" (day of week: 6)
	names    []string
	nameBase int
	starP    float64 // chance of "*"
	items    int     // max list items
	maxWidth int     // max range width
	minStep  int
}

func (g *exprGen) value(f genField, v int) string {
	if f.names != nil && v-f.nameBase < len(f.names) && g.r.IntN(3) == 0 {
		n := f.names[v-f.nameBase]
		switch g.r.IntN(3) {
		case 0:
			n = strings.ToUpper(n)
		case 1:
			n = strings.ToUpper(n[:1]) + n[1:]
		}
		return n
	}
	return strconv.Itoa(v)
}

// field renders a column and calls mark for each value it selects.
func (g *exprGen) field(f genField, mark func(int), extra func() (string, bool)) string {
	if g.r.Float64() < f.starP {
		for v := f.lo; v <= f.starHi; v++ {
			mark(v)
		}
		return "*"
	}
	n := 1 + g.r.IntN(f.items)
	var items []string
	for range n {
		if extra != nil {
			if s, ok := extra(); ok {
				items = append(items, s)
				continue
			}
		}
		items = append(items, g.item(f, mark))
	}
	return strings.Join(items, ",")
}

func (g *exprGen) item(f genField, mark func(int)) string {
	step := func() int { return f.minStep + g.r.IntN(f.starHi-f.lo+1-f.minStep+1) }
	switch g.r.IntN(12) {
	case 0: // */s
		s := step()
		for v := f.lo; v <= f.starHi; v += s {
			mark(v)
		}
		return "*/" + strconv.Itoa(s)
	case 1, 2: // a-b
		a := f.lo + g.r.IntN(f.hi-f.lo+1)
		b := min(f.hi, a+g.r.IntN(f.maxWidth+1))
		for v := a; v <= b; v++ {
			mark(v)
		}
		return g.value(f, a) + "-" + g.value(f, b)
	case 3: // a-b/s
		a := f.lo + g.r.IntN(f.hi-f.lo+1)
		b := min(f.hi, a+g.r.IntN(3*f.maxWidth+1))
		s := step()
		for v := a; v <= b; v += s {
			mark(v)
		}
		return g.value(f, a) + "-" + g.value(f, b) + "/" + strconv.Itoa(s)
	case 4: // a/s
		a := f.lo + g.r.IntN(f.starHi-f.lo+1)
		s := step()
		for v := a; v <= f.starHi; v += s {
			mark(v)
		}
		return g.value(f, a) + "/" + strconv.Itoa(s)
	default:
		v := f.lo + g.r.IntN(f.hi-f.lo+1)
		mark(v)
		return g.value(f, v)
	}
}

func (g *exprGen) next() *genExpr {
	x := &genExpr{}
	r := g.r
	var cols [5]string
	cols[0] = g.field(genField{lo: 0, hi: 59, starHi: 59, starP: 0.02, items: 3, maxWidth: 4, minStep: 5},
		func(v int) { x.minute[v] = true }, nil)
	// Hours favour 1-3 and 23, where DST transitions happen.
	cols[1] = g.field(genField{lo: 0, hi: 23, starHi: 23, starP: 0.2, items: 3, maxWidth: 4, minStep: 1},
		func(v int) { x.hour[v] = true }, func() (string, bool) {
			switch r.IntN(6) {
			case 0:
				h := []int{1, 2, 3, 23, 0}[r.IntN(5)]
				x.hour[h] = true
				return strconv.Itoa(h), true
			case 1:
				for h := 1; h <= 3; h++ {
					x.hour[h] = true
				}
				return "1-3", true
			}
			return "", false
		})
	cols[2] = g.field(genField{lo: 1, hi: 31, starHi: 31, starP: 0.5, items: 3, maxWidth: 6, minStep: 1},
		func(v int) { x.dom[v] = true }, func() (string, bool) {
			if r.IntN(6) == 0 {
				x.last = true
				return []string{"L", "l"}[r.IntN(2)], true
			}
			return "", false
		})
	cols[3] = g.field(genField{lo: 1, hi: 12, starHi: 12, names: genMonthNames, nameBase: 1, starP: 0.6, items: 3, maxWidth: 3, minStep: 1},
		func(v int) { x.month[v] = true }, nil)
	cols[4] = g.field(genField{lo: 0, hi: 7, starHi: 6, names: genDowNames, starP: 0.5, items: 3, maxWidth: 3, minStep: 1},
		func(v int) { x.dow[v%7] = true }, func() (string, bool) {
			if r.IntN(3) == 0 {
				d, n := r.IntN(8), 1+r.IntN(5)
				x.nth[d%7][n] = true
				return g.value(genField{names: genDowNames}, d) + "#" + strconv.Itoa(n), true
			}
			return "", false
		})
	x.text = strings.Join(cols[:], " ")
	for v, ok := range x.minute {
		if ok {
			x.minutes = append(x.minutes, v)
		}
	}
	for v, ok := range x.hour {
		if ok {
			x.hours = append(x.hours, v)
		}
	}
	x.dr, x.wr = x.domRestricted(), x.dowRestricted()
	return x
}

func (x *genExpr) allHours() bool { return len(x.hours) == 24 }

func (x *genExpr) domRestricted() bool {
	if x.last {
		return true
	}
	for d := 1; d <= 31; d++ {
		if !x.dom[d] {
			return true
		}
	}
	return false
}

func (x *genExpr) dowRestricted() bool {
	for d := range 7 {
		if !x.dow[d] {
			return true
		}
		for n := 1; n <= 5; n++ {
			if x.nth[d][n] {
				return true
			}
		}
	}
	return false
}

// neverFires is the generator's own view of "can never fire": only a
// day-of-month (without L, day-of-week unrestricted) that no chosen month has.
func (x *genExpr) neverFires() bool {
	if !x.domRestricted() || x.dowRestricted() || x.last {
		return false
	}
	monthLen := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		for d := 1; d <= monthLen[m]; d++ {
			if x.month[m] && x.dom[d] {
				return false
			}
		}
	}
	return true
}

// dayOK is the oracle's day rule, from the DESIGN text: both day fields
// restricted means either may match.
func (x *genExpr) dayOK(month, dom int, wd int, last bool) bool {
	if !x.month[month] {
		return false
	}
	domM := x.dom[dom] || (x.last && last)
	dowM := x.dow[wd] || x.nth[wd][(dom+6)/7]
	dr, wr := x.dr, x.wr
	switch {
	case dr && wr:
		return domM || dowM
	case dr:
		return domM
	case wr:
		return dowM
	}
	return true
}
