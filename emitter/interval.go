package emitter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schedulerd/schedulerd/store"
)

// intervalPage is the number of interval schedules of one
// ScheduleIntervalDue call.
const intervalPage = 1000

// scanIntervals finds the fires in [w0, w1) of the active interval
// schedules of partition p that the store's index of next fires says are
// due before w1: only those are read, as only the children of eligible
// keys are. A schedule's fires before w0 (before its creation, of windows
// skipped beyond the catch-up limit, of a pause) are not emitted here; each
// schedule read gets an advance to its first fire at or after w1, which
// the caller makes (advanceIntervals) once the window's fires are written,
// so that a crash before it only makes the next pass find the same fires,
// by the same ids, again.
func (e *Emitter) scanIntervals(ctx context.Context, p int, w0, w1 time.Time, st *PassStats) ([]dueFire, []store.ScheduleIntervalAdvanceParams, int, error) {
	var (
		due  []dueFire
		advs []store.ScheduleIntervalAdvanceParams
		read int
	)
	q := &store.ScheduleIntervalDueParams{Partition: p, Before: w1, Limit: intervalPage}
	for {
		ss, err := e.deps.Store.ScheduleIntervalDue(ctx, q)
		if err != nil {
			return nil, nil, read, fmt.Errorf("interval schedules: %w", err)
		}
		read += len(ss)
		for _, s := range ss {
			from := s.IntervalNextFire()
			if from.Before(w0) {
				from = w0
			}
			for _, t := range s.IntervalTimes(nil, from, w1) {
				if inRange(s, t) {
					due = append(due, dueFire{s: s, t: t})
				} else {
					st.skip(SkipOutOfRange, 1)
					e.m.FiresSkipped(SkipOutOfRange, 1)
				}
			}
			advs = append(advs, store.ScheduleIntervalAdvanceParams{ID: s.ID, Version: s.Version, Next: s.IntervalFirstAtOrAfter(w1)})
		}
		if len(ss) < intervalPage {
			break
		}
		last := ss[len(ss)-1]
		q.After = store.ScheduleEnd{End: last.IntervalNextFire(), ID: last.ID}
	}
	st.ChildrenRead += read
	return due, advs, read, nil
}

// advanceIntervals records in the index that the interval schedules of a
// window are emitted up to their next fires.
func (e *Emitter) advanceIntervals(ctx context.Context, advs []store.ScheduleIntervalAdvanceParams) error {
	for i := range advs {
		if err := e.deps.Store.ScheduleIntervalAdvance(ctx, &advs[i]); err != nil {
			return fmt.Errorf("advance interval schedule %s: %w", advs[i].ID, err)
		}
	}
	return nil
}

// scanAll is scanWindow and scanIntervals: every fire of partition p in
// [w0, w1), ordered by (time, schedule id), the number of children and
// interval schedules read, and the interval advances to make once the
// fires are written.
func (e *Emitter) scanAll(ctx context.Context, p int, w0, w1 time.Time, tzs []string, st *PassStats) ([]dueFire, int, []store.ScheduleIntervalAdvanceParams, error) {
	due, read, err := e.scanWindow(ctx, p, w0, w1, tzs, st)
	if err != nil {
		return nil, read, nil, err
	}
	ivDue, advs, ivRead, err := e.scanIntervals(ctx, p, w0, w1, st)
	read += ivRead
	if err != nil {
		return nil, read, nil, err
	}
	if len(ivDue) > 0 {
		due = append(due, ivDue...)
		slices.SortFunc(due, compareDue)
	}
	return due, read, advs, nil
}
