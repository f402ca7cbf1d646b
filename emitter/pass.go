package emitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var loadLocation = cron.LoadLocation

// dueFire is a fire a window produced: schedule s fires at t.
type dueFire struct {
	s *model.Schedule
	t time.Time
}

// RunPass does one pass synchronously over the partitions held now: every
// window from the partition's watermark up to now+Lead is scanned, its fires
// emitted and the watermark advanced. Errors of one partition do not stop the
// others; they are joined in the returned error. A partition whose watermark
// advance conflicts (lease lost) is left without error.
func (e *Emitter) RunPass(ctx context.Context) (_ PassStats, err error) {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	began := time.Now() // durations in stats and metrics measure work: real time, not the clock
	var st PassStats
	held := e.deps.Partitions.Held()
	if len(held) == 0 {
		return st, nil
	}
	tzs, err := e.deps.Store.ChildTimezones(ctx)
	if err != nil {
		return st, fmt.Errorf("emitter: child timezones: %w", err)
	}
	slices.Sort(tzs)
	ctx, span := e.startPass(ctx, len(held))
	defer func() { endPass(span, &st, err) }()
	now := e.deps.Clock.Now()
	cals := newCalendarCache()
	// Partitions are independent: they run concurrently, so that their
	// store writes share commits (the embedded store batches concurrent
	// writes) and round trips overlap (MongoDB).
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, p := range sortedPartitions(held) {
		if p < 0 || p >= e.cfg.Partitions {
			continue
		}
		st.Partitions++
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ps PassStats
			err := e.runPartition(ctx, p, held[p], now, tzs, cals, &ps)
			mu.Lock()
			defer mu.Unlock()
			st.add(&ps)
			if err != nil {
				errs = append(errs, fmt.Errorf("emitter: partition %d: %w", p, err))
			}
		}()
	}
	wg.Wait()
	st.Duration = time.Since(began)
	return st, errors.Join(errs...)
}

// errLost stops work on a partition whose lease moved elsewhere.
var errLost = errors.New("partition lost")

func (e *Emitter) runPartition(ctx context.Context, p int, fence int64, now time.Time, tzs []string, cals *calendarCache, st *PassStats) error {
	w := e.cfg.Window
	wm, err := e.deps.Store.WatermarkGet(ctx, p)
	if err != nil {
		return fmt.Errorf("watermark: %w", err)
	}
	from := wm.Until
	if from.IsZero() {
		from = now.Truncate(w)
	}
	horizon := now.Add(e.cfg.Lead)
	if !from.Before(horizon) {
		return nil
	}
	advance := func(until time.Time) error {
		err := e.deps.Store.WatermarkAdvance(ctx, model.Watermark{Partition: p, Until: until, Fence: fence})
		if errors.Is(err, model.ErrConflict) {
			e.log.Info().Int(logkey.Partition, p).Int64(logkey.Fence, fence).Msg("watermark conflict: partition lost, leaving it")
			e.m.PartitionLost(p)
			return errLost
		}
		if err != nil {
			return fmt.Errorf("advance watermark: %w", err)
		}
		return nil
	}
	ignoreLost := func(err error) error {
		if errors.Is(err, errLost) {
			return nil
		}
		return err
	}

	// Beyond the catch-up limit: jump, never scan window by window.
	limit := now.Add(-e.cfg.CatchUpLimit)
	if to := limit.Truncate(w); from.Before(to) {
		n := int((to.Sub(from) + w - 1) / w)
		e.log.Info().Int(logkey.Partition, p).Time("from", from).Time("to", to).Int("windows", n).
			Msg("watermark older than the catch-up limit: skipping windows")
		st.WindowsSkipped += n
		e.m.WindowsSkipped(p, n)
		if err := advance(to); err != nil {
			return ignoreLost(err)
		}
		from = to
	}

	// Windows missed during downtime: misfire policies.
	lateEnd := from
	for !lateEnd.Add(w).After(now) {
		lateEnd = lateEnd.Add(w)
	}
	if lateEnd.After(from) {
		if err := e.catchUp(ctx, p, from, lateEnd, now, tzs, cals, st); err != nil {
			return err
		}
		if err := advance(lateEnd); err != nil {
			return ignoreLost(err)
		}
		from = lateEnd
	}

	for w0 := from; w0.Before(horizon); w0 = w0.Add(w) {
		w1 := w0.Add(w)
		began := time.Now()
		due, read, advs, err := e.scanAll(ctx, p, w0, w1, tzs, st)
		if err != nil {
			return err
		}
		ws, err := e.emitAll(ctx, due, emitOpts{decision: model.FireEmitted, calendars: cals}, now)
		st.add(&ws)
		if err == nil {
			err = e.advanceIntervals(ctx, advs)
		}
		if err != nil {
			return err
		}
		if err := advance(w1); err != nil {
			return ignoreLost(err)
		}
		d := time.Since(began)
		e.m.WindowScanned(p, read, d)
		e.log.Debug().Int(logkey.Partition, p).Time("window", w0).Int("childrenRead", read).
			Int("due", len(due)).Int("fires", ws.Fires).Int("events", ws.Events).Dur("took", d).
			Msg("window emitted")
	}
	return nil
}

// catchUp handles the missed windows [from, lateEnd) of partition p.
func (e *Emitter) catchUp(ctx context.Context, p int, from, lateEnd, now time.Time, tzs []string, cals *calendarCache, st *PassStats) error {
	w := e.cfg.Window
	m := e.newMisfires(now, st, p)
	var lateAdvs []store.ScheduleIntervalAdvanceParams
	for w0 := from; w0.Before(lateEnd); w0 = w0.Add(w) {
		began := time.Now()
		due, read, advs, err := e.scanAll(ctx, p, w0, w0.Add(w), tzs, st)
		if err != nil {
			return err
		}
		var all []dueFire
		for _, d := range due {
			if m.add(d) {
				all = append(all, d)
			}
		}
		ws, err := e.emitAll(ctx, all, emitOpts{decision: model.FireLate, late: true, calendars: cals}, now)
		st.add(&ws)
		if err != nil {
			return err
		}
		// The fire_once fires of these windows are emitted after the
		// loop; an advance made before them and a crash would lose them.
		lateAdvs = append(lateAdvs, advs...)
		e.m.WindowScanned(p, read, time.Since(began))
		e.log.Debug().Int(logkey.Partition, p).Time("window", w0).Int("childrenRead", read).
			Int("due", len(due)).Int("fires", ws.Fires).Int("events", ws.Events).Bool("late", true).
			Msg("missed window scanned")
	}
	ws, err := e.emitAll(ctx, m.once(), emitOpts{decision: model.FireLate, late: true, onceSince: from, calendars: cals}, now)
	st.add(&ws)
	if err != nil {
		return err
	}
	return e.advanceIntervals(ctx, lateAdvs)
}

// misfires applies the schedules' misfire policies to missed fires: those
// of windows missed during downtime (catchUp) and those of a pause that
// ended while no instance resumed the schedule (Resumed). Fires older than
// now-CatchUpLimit never fire; skip fires none; fire_all fires each at
// once; fire_once fires only the latest of each schedule (once).
type misfires struct {
	limit  time.Time
	skip   func(d dueFire, r SkipReason, msg string)
	latest map[string]dueFire // fire_once: the latest missed fire per schedule
	order  []string
}

// newMisfires counts and logs what it skips into st (and partition p, -1
// for none).
func (e *Emitter) newMisfires(now time.Time, st *PassStats, p int) *misfires {
	return &misfires{
		limit: now.Add(-e.cfg.CatchUpLimit),
		skip: func(d dueFire, r SkipReason, msg string) {
			st.skip(r, 1)
			e.m.FiresSkipped(r, 1)
			e.log.Info().Int(logkey.Partition, p).Str(logkey.Schedule, d.s.ID).Time("fireTime", d.t).
				Str("reason", string(r)).Msg(msg)
		},
		latest: map[string]dueFire{},
	}
}

// add takes the missed fire d, in time order per schedule, and reports
// whether it fires at once (fire_all).
func (m *misfires) add(d dueFire) bool {
	if d.t.Before(m.limit) {
		m.skip(d, SkipTooOld, "missed fire older than the catch-up limit: not fired")
		return false
	}
	switch d.s.Misfire {
	case model.MisfireSkip:
		m.skip(d, SkipMisfire, "missed fire skipped (misfire=skip)")
	case model.MisfireFireAll:
		return true
	default:
		if prev, ok := m.latest[d.s.ID]; ok {
			if !d.t.After(prev.t) {
				return false
			}
			m.skip(prev, SkipSuperseded, "missed fire superseded by a later missed fire (misfire=fire_once)")
		} else {
			m.order = append(m.order, d.s.ID)
		}
		m.latest[d.s.ID] = d
	}
	return false
}

// once returns the fire_once fires: the latest missed fire of each
// schedule, by time and schedule id.
func (m *misfires) once() []dueFire {
	once := make([]dueFire, 0, len(m.order))
	for _, id := range m.order {
		once = append(once, m.latest[id])
	}
	slices.SortFunc(once, compareDue)
	return once
}

// scanWindow finds the fires of partition p in [w0, w1): for each timezone it
// enumerates the eligible keys, reads only their children, loads their
// schedules and keeps the fires of active, current schedules. It returns the
// fires ordered by (time, schedule id) and the number of children read.
func (e *Emitter) scanWindow(ctx context.Context, p int, w0, w1 time.Time, tzs []string, st *PassStats) ([]dueFire, int, error) {
	type cand struct {
		id  string
		ver int64
		t   int64
	}
	began := time.Now()
	defer func() { st.ScanTime += time.Since(began) }()
	seen := map[cand]struct{}{}
	var cands []cand
	read := 0
	var slots []cron.Slot
	for _, tz := range tzs {
		loc, err := e.location(tz)
		if err != nil {
			e.log.Warn().Err(err).Str("timezone", tz).Msg("children with an unknown timezone are ignored")
			continue
		}
		slots = cron.AppendEligible(slots[:0], loc, w0, w1)
		if len(slots) == 0 {
			continue
		}
		at := make(map[model.ChildKey][]time.Time, len(slots))
		keys := make([]model.ChildKey, 0, len(slots))
		for _, s := range slots {
			k := model.ChildKey{LaunchExpression: s.Key.LaunchExpression(), Minute: int(s.Key.Minute)}
			ts, ok := at[k]
			if !ok {
				keys = append(keys, k)
			}
			at[k] = append(ts, s.At)
		}
		children, err := e.deps.Store.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: p, Timezone: tz, Keys: keys})
		if err != nil {
			return nil, read, fmt.Errorf("children %s: %w", tz, err)
		}
		read += len(children)
		for _, c := range children {
			for _, t := range at[model.ChildKey{LaunchExpression: c.LaunchExpression, Minute: c.Minute}] {
				k := cand{c.ScheduleID, c.ScheduleVersion, t.Unix()}
				if _, dup := seen[k]; !dup {
					seen[k] = struct{}{}
					cands = append(cands, k)
				}
			}
		}
		if ev := e.log.Debug(); ev.Enabled() {
			names := make([]string, len(keys))
			for i, k := range keys {
				names[i] = fmt.Sprintf("%s@%02d", k.LaunchExpression, k.Minute)
			}
			ev.Int(logkey.Partition, p).Str("timezone", tz).Time("window", w0).Strs("keys", names).
				Int("eligibleKeys", len(keys)).Int("childrenRead", len(children)).Msg("timezone scanned")
		}
	}
	st.ChildrenRead += read
	st.Windows++
	if len(cands) == 0 {
		return nil, read, nil
	}

	ids := make([]string, 0, len(cands))
	for _, c := range cands {
		ids = append(ids, c.id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	scheds := make(map[string]*model.Schedule, len(ids))
	for chunk := range slices.Chunk(ids, e.cfg.BatchSize) {
		got, err := e.deps.Store.ScheduleGetMany(ctx, chunk)
		if err != nil {
			return nil, read, fmt.Errorf("schedules: %w", err)
		}
		for _, s := range got {
			scheds[s.ID] = s
		}
	}

	due := make([]dueFire, 0, len(cands))
	oneOff := map[string]bool{}
	for _, c := range cands {
		s := scheds[c.id]
		t := time.Unix(c.t, 0).UTC()
		var r SkipReason
		switch {
		case s == nil:
			r = SkipMissing
		case s.State != model.ScheduleActive && s.State != "":
			r = SkipInactive
		case s.Version != c.ver:
			r = SkipStaleChild
		case s.IsOneOff():
			// A one-off normally has no children (Saved emits it); if it has,
			// the window containing RunAt emits its single fire.
			// The child is for RunAt's minute, so the window is matched
			// against RunAt itself, not its fire instant.
			ra := s.RunAt.UTC()
			if ra.Before(w0) || !ra.Before(w1) || oneOff[s.ID] {
				r = SkipOutOfRange
				break
			}
			oneOff[s.ID] = true
			t = model.FireInstant(ra)
		case !inRange(s, t):
			r = SkipOutOfRange
		}
		if r != "" {
			st.skip(r, 1)
			e.m.FiresSkipped(r, 1)
			e.log.Debug().Int(logkey.Partition, p).Str(logkey.Schedule, c.id).Int64("childVersion", c.ver).
				Time("fireTime", t).Str("reason", string(r)).Msg("child ignored")
			continue
		}
		due = append(due, dueFire{s: s, t: t})
	}
	slices.SortFunc(due, compareDue)
	return due, read, nil
}

// compareDue orders due fires by (time, schedule id).
func compareDue(a, b dueFire) int {
	return cmp.Or(a.t.Compare(b.t), cmp.Compare(a.s.ID, b.s.ID))
}

// inRange reports whether t is within the schedule's [StartAt, EndAt]
// (both inclusive, either open).
func inRange(s *model.Schedule, t time.Time) bool {
	if s.StartAt != nil && t.Before(*s.StartAt) {
		return false
	}
	if s.EndAt != nil && t.After(*s.EndAt) {
		return false
	}
	return true
}
