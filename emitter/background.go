package emitter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// Large fires (more than BackgroundThreshold events) are not written by the
// call that records them. The fire is inserted with Remaining = Count and the
// call returns; background workers then write its events in chunks of
// BackgroundChunk, lowering Remaining after each chunk. Remaining is the
// durable watermark: a worker that stops (crash, Stop, lost store) leaves it
// where the last finished chunk put it, and whichever instance holds the
// schedule's partition continues from there (FireListEmitting, at Start and
// after every pass). A chunk written again after a crash is harmless: event
// ids are deterministic and inserts idempotent.

// large reports whether f's events are written in the background.
func (e *Emitter) large(f *model.Fire) bool {
	return f.Count > e.cfg.BackgroundThreshold && hasEvents(f.Decision)
}

func hasEvents(d model.FireDecision) bool {
	return d != model.FireSkippedOverlap && d != model.FireCancelledByNext && d != model.FireSkippedManual && d != model.FireSkippedCalendar
}

// fireEvents ensures the events of fire f of s: a small fire's go into b; a
// large one that is not complete is handed to the background (or, when the
// emitter is not started, written here and now). It reports whether the
// events of f are all written when it returns.
func (e *Emitter) fireEvents(ctx context.Context, s *model.Schedule, f *model.Fire, now time.Time, b *batch) (bool, error) {
	if f.Remaining == 0 {
		if f.Count <= e.cfg.BackgroundThreshold {
			return true, b.addFire(ctx, s, f, now)
		}
		return true, nil // complete: the background lowers Remaining only after writing
	}
	// Large, or small and deferred (quota.go).
	e.bgMu.Lock()
	on := e.bgOn
	if on {
		e.bgLocal[f.ID] = true
	}
	e.bgMu.Unlock()
	if on {
		e.wake()
		return false, nil
	}
	// Not started (tests, tools): the same chunked writer, in this call.
	done, err := e.emitRest(ctx, f, nil)
	if errors.Is(err, errDeferred) {
		return false, nil
	}
	if err == nil && done {
		f.Remaining = 0
		e.rate.done(f.TenantID, f.ID)
	}
	return done, err
}

// wake asks the dispatcher to look for fires to emit.
func (e *Emitter) wake() {
	select {
	case e.bgWake <- struct{}{}:
	default:
	}
}

// dispatch starts a worker for each fire still being emitted that this
// instance should emit (recorded here, or its schedule's partition held)
// while fewer than BackgroundWorkers run. It runs on every wake until
// Stopping.
func (e *Emitter) dispatch(run context.Context) {
	stopping := e.Stopping()
	for {
		select {
		case <-stopping:
			return
		case <-e.bgWake:
		}
		if err := e.dispatchOnce(run, stopping); err != nil && run.Err() == nil {
			e.log.Warn().Err(err).Msg("listing fires still being emitted failed")
		}
	}
}

func (e *Emitter) dispatchOnce(run context.Context, stopping <-chan struct{}) error {
	e.bgMu.Lock()
	full := len(e.bgRunning) >= e.cfg.BackgroundWorkers
	e.bgMu.Unlock()
	if full {
		return nil
	}
	fires, err := e.deps.Store.FireListEmitting(run, 1000)
	if err != nil {
		return err
	}
	held := e.deps.Partitions.Held()
	now := e.deps.Clock.Now()
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	for _, f := range fires {
		if len(e.bgRunning) >= e.cfg.BackgroundWorkers {
			break
		}
		if e.bgRunning[f.ID] {
			continue
		}
		if t, ok := e.bgRetry[f.ID]; ok && now.Before(t) {
			continue
		}
		if _, ok := held[model.PartitionOf(f.ScheduleID, e.cfg.Partitions)]; !ok && !e.bgLocal[f.ID] {
			e.rate.done(f.TenantID, f.ID) // another instance's now: it must not hold the queue here
			continue
		}
		e.bgRunning[f.ID] = true
		e.Go(func() { e.work(run, stopping, f) })
	}
	return nil
}

// work emits what is left of f and wakes the dispatcher for the next fire.
func (e *Emitter) work(run context.Context, stopping <-chan struct{}, f *model.Fire) {
	done, err := e.emitRest(run, f, stopping)
	deferred := errors.Is(err, errDeferred)
	if deferred {
		err = nil
	}
	e.bgMu.Lock()
	delete(e.bgRunning, f.ID)
	switch {
	case deferred:
		e.bgRetry[f.ID] = deferredUntil(e.deps.Clock.Now())
	case err != nil:
		// Retried by a pass after a window: a store that fails stays
		// unharmed by a loop.
		e.bgRetry[f.ID] = e.deps.Clock.Now().Add(e.cfg.Window)
	case done:
		delete(e.bgLocal, f.ID)
		delete(e.bgRetry, f.ID)
	}
	e.bgMu.Unlock()
	if done {
		if next := e.rate.done(f.TenantID, f.ID); next != "" {
			// It may have been refused only for not being the head.
			e.bgMu.Lock()
			delete(e.bgRetry, next)
			e.bgMu.Unlock()
		}
	}
	if deferred {
		e.wakeAt(deferredUntil(e.deps.Clock.Now()))
		if e.deps.Deferred != nil {
			if got, err := e.deps.Store.FireGet(run, f.TenantID, f.ID); err == nil {
				select {
				case e.deps.Deferred <- got:
				case <-run.Done():
				}
			}
		}
	}
	if err != nil && run.Err() == nil {
		e.log.Warn().Err(err).Str(logkey.Schedule, f.ScheduleID).Str(logkey.Fire, f.ID).
			Msg("background emission failed; it resumes later")
	}
	if done {
		if got, err := e.deps.Store.FireGet(run, f.TenantID, f.ID); err == nil {
			e.signal(run, []*model.Fire{got})
		}
	}
	select {
	case <-stopping:
	default:
		e.wake()
	}
}

// emitRest writes the events of f from its watermark on, one chunk per
// store write, each followed by the lowered Remaining. Before each chunk it
// reads the fire and the schedule again: a fire cancelled by the next one,
// or whose schedule was deleted or changed version (edit, pause), is not
// emitted further. It returns done=false without error when stopping closed
// between chunks.
func (e *Emitter) emitRest(ctx context.Context, f *model.Fire, stopping <-chan struct{}) (done bool, err error) {
	st := e.deps.Store
	for {
		cur, err := st.FireGet(ctx, f.TenantID, f.ID)
		if errors.Is(err, model.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read fire %s: %w", f.ID, err)
		}
		if cur.Remaining <= 0 {
			return true, nil
		}
		got, err := st.ScheduleGetMany(ctx, []string{cur.ScheduleID})
		if err != nil {
			return false, fmt.Errorf("read schedule %s: %w", cur.ScheduleID, err)
		}
		var s *model.Schedule
		if len(got) == 1 && got[0].ID == cur.ScheduleID {
			s = got[0]
		}
		now := e.deps.Clock.Now()
		if s == nil || !ownFire(s, cur) || !hasEvents(cur.Decision) {
			return true, e.abandon(ctx, cur, s, now)
		}
		select {
		case <-stopping:
			return false, nil
		default:
		}
		size, q, err := e.chunkSize(ctx, cur)
		if err != nil {
			return false, err
		}
		lo := cur.Count - cur.Remaining
		hi := min(lo+size, cur.Count)
		if err := e.admitChunk(ctx, cur, hi-lo, q, now); err != nil {
			return false, err
		}
		n, err := st.EventInsertMany(ctx, e.makeEvents(s, cur, lo, hi, now))
		if err != nil {
			if q > 0 {
				e.rate.give(cur.TenantID, hi-lo, now)
			}
			return false, fmt.Errorf("insert events %d..%d of fire %s: %w", lo, hi-1, cur.ID, err)
		}
		e.m.EventsEmitted(n)
		if err := st.FireSetRemaining(ctx, cur.ID, cur.Count-hi); err != nil {
			return false, fmt.Errorf("fire %s progress: %w", cur.ID, err)
		}
		if hi == cur.Count {
			e.log.Info().Str(logkey.Schedule, cur.ScheduleID).Str(logkey.Fire, cur.ID).Int("count", cur.Count).
				Msg("background emission finished")
			return true, nil
		}
	}
}

// abandon ends the emission of f, whose schedule s (nil: deleted) no longer
// wants it. Waiting events of f are cancelled when the master would have
// cancelled them had they existed: the schedule is gone, the fire is still
// ahead, or the next fire cancelled it. The note says how far it got.
func (e *Emitter) abandon(ctx context.Context, f *model.Fire, s *model.Schedule, now time.Time) error {
	st := e.deps.Store
	why := "the schedule changed"
	switch {
	case s == nil:
		why = "the schedule was deleted"
	case !hasEvents(f.Decision):
		why = "the fire was " + string(f.Decision)
	}
	if s == nil || f.FireTime.After(now) || !hasEvents(f.Decision) {
		if _, err := st.EventCancelPending(ctx, f.ScheduleID, f.ID, now); err != nil {
			return fmt.Errorf("cancel events of fire %s: %w", f.ID, err)
		}
	}
	note := "emission stopped after " + strconv.Itoa(f.Count-f.Remaining) + " of " + strconv.Itoa(f.Count) + " events: " + why
	if f.Note != "" {
		note = f.Note + "; " + note
	}
	if err := st.FireSetDecision(ctx, f.ID, f.Decision, note); err != nil && !errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("note on fire %s: %w", f.ID, err)
	}
	if err := st.FireSetRemaining(ctx, f.ID, 0); err != nil && !errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("fire %s progress: %w", f.ID, err)
	}
	e.log.Info().Str(logkey.Schedule, f.ScheduleID).Str(logkey.Fire, f.ID).Int("written", f.Count-f.Remaining).
		Int("count", f.Count).Str("reason", why).Msg("background emission stopped")
	return nil
}
