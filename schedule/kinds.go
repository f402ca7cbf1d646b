package schedule

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/model"
)

// MaxCrons is the most expressions one schedule's crons may hold.
const MaxCrons = 16

// MinInterval is the shortest interval.
const MinInterval = time.Minute

// exclusiveField names the field reported when more than one way of
// saying when the schedule fires is set: the newer kinds first.
func exclusiveField(sp Spec) string {
	switch {
	case sp.Crons != nil:
		return "crons"
	case sp.Interval != nil:
		return "interval"
	case sp.After != nil:
		return "after"
	}
	return "cron"
}

// compileCrons parses each expression of crons into out.Exprs, keeps
// their canonical text in the schedule and sets out.Keys to the union of
// their children keys, each once, at most maxChildren of them.
func compileCrons(fe *Errors, out *Compiled, crons []string, maxChildren int) {
	switch {
	case len(crons) == 0:
		fe.Add("crons", "must hold at least one expression")
		return
	case len(crons) > MaxCrons:
		fe.Add("crons", "holds "+strconv.Itoa(len(crons))+" expressions; at most "+strconv.Itoa(MaxCrons))
		return
	}
	if maxChildren <= 0 {
		maxChildren = cron.MaxChildren
	}
	texts := make([]string, len(crons))
	seen := map[cron.Key]struct{}{}
	ok := true
	for i, text := range crons {
		field := "crons[" + strconv.Itoa(i) + "]"
		e, err := cron.Parse(text)
		if err != nil {
			fe.Add(field, reasonOf(err, "cron"))
			ok = false
			continue
		}
		texts[i] = e.String()
		if j := slices.Index(texts[:i], texts[i]); j >= 0 {
			fe.Add(field, "the same expression as crons["+strconv.Itoa(j)+"]")
			ok = false
			continue
		}
		keys, err := e.Children(maxChildren)
		if err != nil {
			fe.Add(field, reasonOf(err, "cron"))
			ok = false
			continue
		}
		out.Exprs = append(out.Exprs, e)
		for _, k := range keys {
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				out.Keys = append(out.Keys, k)
			}
		}
	}
	if ok && len(out.Keys) > maxChildren {
		fe.Add("crons", "together need "+strconv.Itoa(len(out.Keys))+" children; at most "+strconv.Itoa(maxChildren))
	}
	out.Schedule.Crons = texts
}

// checkInterval parses an interval: at least MinInterval, whole seconds.
func checkInterval(fe *Errors, text string) time.Duration {
	d, err := time.ParseDuration(text)
	switch {
	case err != nil:
		fe.Add("interval", "not a duration such as \"90m\" or \"6h\"")
		return 0
	case d < MinInterval:
		fe.Add("interval", "must be at least "+MinInterval.String())
		return 0
	case d%time.Second != 0:
		fe.Add("interval", "must be a whole number of seconds")
		return 0
	}
	return d
}

// unionMinGap is cron.MinGap of the union of exprs: the shortest time
// between two consecutive distinct fires in (from, to] and the earlier
// fire of that pair. It stops at the first gap not longer than stop (the
// caller only asks whether some gap is that short), and does not walk the
// merged fires for a stop under a minute, which no gap is.
func unionMinGap(exprs []*cron.Expr, loc *time.Location, from, to time.Time, stop time.Duration) (time.Duration, time.Time) {
	var best time.Duration
	var bestAt time.Time
	consider := func(g time.Duration, at time.Time) {
		if g > 0 && (best == 0 || g < best || g == best && at.Before(bestAt)) {
			best, bestAt = g, at
		}
	}
	// Adding fires only shortens gaps: each expression's own smallest gap
	// bounds the union's.
	for _, e := range exprs {
		consider(cron.MinGap(e, loc, from, to))
	}
	// Fires are at whole minutes: distinct ones are a minute apart at
	// least, so a jitter under a minute needs no walk.
	if len(exprs) < 2 || (best > 0 && best <= stop) || stop < time.Minute {
		return best, bestAt
	}
	var prev time.Time
	it := newUnionIter(exprs, loc, from)
	for t, ok := it.next(); ok && !t.After(to); t, ok = it.next() {
		if !prev.IsZero() {
			consider(t.Sub(prev), prev)
			if best <= stop {
				break
			}
		}
		prev = t
	}
	return best, bestAt
}

// unionIter walks the fires after a time of several expressions in
// order, each distinct instant once.
type unionIter struct {
	exprs []*cron.Expr
	loc   *time.Location
	bufs  [][]time.Time
	last  time.Time
}

func newUnionIter(exprs []*cron.Expr, loc *time.Location, after time.Time) *unionIter {
	it := &unionIter{exprs: exprs, loc: loc, bufs: make([][]time.Time, len(exprs))}
	for i, e := range exprs {
		it.bufs[i] = cron.NextFireTimes(e, loc, after, unionChunk)
	}
	return it
}

const unionChunk = 512

func (it *unionIter) next() (time.Time, bool) {
	for {
		pick := -1
		for i, b := range it.bufs {
			if len(b) == 0 {
				continue
			}
			if pick < 0 || b[0].Before(it.bufs[pick][0]) {
				pick = i
			}
		}
		if pick < 0 {
			return time.Time{}, false
		}
		t := it.bufs[pick][0]
		it.bufs[pick] = it.bufs[pick][1:]
		if len(it.bufs[pick]) == 0 {
			it.bufs[pick] = cron.NextFireTimes(it.exprs[pick], it.loc, t, unionChunk)
		}
		if !it.last.IsZero() && !t.After(it.last) {
			continue // the same instant from another expression
		}
		it.last = t
		return t, true
	}
}

// describeInterval says an interval schedule's rule in words.
func describeInterval(m *model.Schedule, loc *time.Location) string {
	d := m.Interval
	var every string
	switch {
	case d%(24*time.Hour) == 0:
		every = plural(int(d/(24*time.Hour)), "day")
	case d%time.Hour == 0:
		every = plural(int(d/time.Hour), "hour")
	case d%time.Minute == 0:
		every = plural(int(d/time.Minute), "minute")
	default:
		every = d.String()
	}
	switch {
	case m.StartAt != nil:
		return "every " + every + " from " + m.StartAt.In(loc).Format(time.RFC3339)
	case m.CreatedAt.IsZero():
		return "every " + every + " from its creation"
	}
	return "every " + every + " from " + m.CreatedAt.In(loc).Format(time.RFC3339)
}

func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// describeCrons says each expression of a crons schedule in words.
func describeCrons(exprs []*cron.Expr) string {
	parts := make([]string, len(exprs))
	for i, e := range exprs {
		parts[i] = e.Describe()
	}
	return strings.Join(parts, "; and ")
}
