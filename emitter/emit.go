package emitter

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// emitOpts says how a due fire is to be recorded.
type emitOpts struct {
	decision model.FireDecision
	note     string
	// late marks a fire missed during downtime (decision late).
	late bool
	// onceSince, if set, is the start of the missed range of a fire_once
	// catch-up: if the schedule already has a late fire at or after it (an
	// earlier attempt at this catch-up, before a crash), nothing is emitted.
	onceSince time.Time
	// count and payload, if set, replace the schedule's eventCount and
	// payload for this fire (a trigger with overrides).
	count   int
	payload json.RawMessage
	// together holds the records of new fires (not large ones, nor the
	// fires of a cron schedule with overlap skip or cancel, which look at
	// the fire before them) and writes each batch of them with its events
	// in one FireInsertMany; with background, without events, which the
	// background writer then writes.
	together bool
	// calendars caches the calendars of the pass; nil: a cache of this
	// call's own.
	calendars *calendarCache
	// background leaves the events of new fires to the background workers
	// (a backfill's fires past the request's share, backfill.go).
	background bool
}

type outcome int

const (
	outInserted     outcome = iota + 1 // recorded now
	outExisting                        // recorded before; events ensured
	outOtherVersion                    // another version fired at this time
	outCaughtUp                        // fire_once already caught up
	outHeld                            // held in the batch, not written yet
)

// emitAll emits the fires with cfg.Workers concurrent workers, each with its
// own event batch. It returns when every fire and event is written.
func (e *Emitter) emitAll(ctx context.Context, due []dueFire, o emitOpts, now time.Time) (PassStats, error) {
	var st PassStats
	if len(due) == 0 {
		return st, nil
	}
	cals := o.calendars
	if cals == nil {
		cals = newCalendarCache()
	}
	due, err := e.applyCalendars(ctx, due, cals, now, &st)
	if err != nil {
		return st, err
	}
	// Fires of one schedule are emitted in time order by one worker: the
	// overlap policy compares each fire with the one before it.
	var groups [][]dueFire
	idx := map[string]int{}
	for _, d := range due {
		g, ok := idx[d.s.ID]
		if !ok {
			g = len(groups)
			idx[d.s.ID] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], d)
	}
	workers := min(e.cfg.Workers, len(groups))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	b := e.newBatch()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ws PassStats
			var err error
			for err == nil {
				i := int(next.Add(1) - 1)
				if i >= len(groups) {
					break
				}
				for _, d := range groups[i] {
					if err = ctx.Err(); err != nil {
						break
					}
					var f *model.Fire
					var out outcome
					f, out, err = e.emitFire(ctx, d.s, d.t, now, o, b)
					if err != nil {
						err = fmt.Errorf("fire %s at %s: %w", d.s.ID, d.t.Format(time.RFC3339), err)
						break
					}
					if out == outHeld {
						err = e.writeHeld(ctx, b, b.fullHeld(), now, &ws)
						if err != nil {
							break
						}
						continue
					}
					e.count(&ws, d, f, out)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			st.add(&ws)
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = e.writeHeld(ctx, b, b.allHeld(), now, &st)
	}
	if firstErr == nil {
		firstErr = b.flush(ctx)
	}
	st.Events += b.inserted
	e.m.EventsEmitted(b.inserted)
	if firstErr != nil {
		return st, firstErr
	}
	e.signal(ctx, b.recorded)
	return st, nil
}

// count updates stats, metrics and logs for one emitted due fire.
func (e *Emitter) count(ws *PassStats, d dueFire, f *model.Fire, out outcome) {
	switch out {
	case outInserted:
		ws.Fires++
		switch f.Decision {
		case model.FireLate:
			ws.FiresLate++
			e.log.Info().Str(logkey.Schedule, d.s.ID).Time("fireTime", d.t).Str(logkey.Fire, f.ID).
				Int("count", f.Count).Msg("missed fire emitted late")
		case model.FireSkippedManual:
			e.log.Info().Str(logkey.Schedule, d.s.ID).Time("fireTime", d.t).Str(logkey.Fire, f.ID).
				Msg("fire skipped (skip requested)")
		case model.FireSkippedOverlap:
			ws.FiresOverlapSkipped++
			e.log.Info().Str(logkey.Schedule, d.s.ID).Time("fireTime", d.t).Str(logkey.Fire, f.ID).
				Str("note", f.Note).Msg("fire skipped: previous fire not drained (overlap=skip)")
		}
		e.m.FiresRecorded(f.Decision, 1)
	case outExisting:
		ws.FiresExisting++
	case outOtherVersion:
		ws.skip(SkipOtherVersion, 1)
		e.m.FiresSkipped(SkipOtherVersion, 1)
		e.log.Info().Str(logkey.Schedule, d.s.ID).Time("fireTime", d.t).Str("firedAs", f.ID).
			Msg("fire skipped: another version of the schedule already fired at this time")
	case outCaughtUp:
		ws.skip(SkipCaughtUp, 1)
		e.m.FiresSkipped(SkipCaughtUp, 1)
		e.log.Info().Str(logkey.Schedule, d.s.ID).Time("fireTime", d.t).Str("caughtUpBy", f.ID).
			Msg("missed fire skipped: the schedule already caught up (misfire=fire_once)")
	}
}

func (e *Emitter) signal(ctx context.Context, fires []*model.Fire) {
	if e.deps.Emitted == nil {
		return
	}
	for _, f := range fires {
		select {
		case e.deps.Emitted <- f:
		case <-ctx.Done():
			return
		}
	}
}

// notePrefixSkipped starts the note of a skipped_overlap fire; the id of the
// fire that had not drained follows, so that the next fire checks that one
// rather than the skipped fire (which has no events).
const notePrefixSkipped = "overlap=skip: previous fire "

// emitFire records the fire of s at t and queues its events into b. It
// returns the fire that stands for (s, t) and what happened. See the package
// doc for idempotence and overlap.
func (e *Emitter) emitFire(ctx context.Context, s *model.Schedule, t, now time.Time, o emitOpts, b *batch) (*model.Fire, outcome, error) {
	st := e.deps.Store
	t = model.FireInstant(t)
	id := model.FireID(s.ID, s.Version, t)

	// Fire times are whole milliseconds (model.FireInstant), so +1ms finds
	// a fire at t and nothing after it.
	latest, err := st.FireLatestBefore(ctx, s.ID, t.Add(time.Millisecond))
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return nil, 0, fmt.Errorf("latest fire: %w", err)
	}
	if latest != nil && latest.FireTime.Equal(t) {
		if latest.ID == id {
			_, err := e.fireEvents(ctx, s, latest, now, b)
			return latest, outExisting, err
		}
		if o.decision == model.FireBackfill {
			return latest, outOtherVersion, nil // any fire at t stands
		}
		// Another version fired at t. Only if the master cancelled all its
		// events (an edit) does this version fire again.
		counts, err := st.EventCountByFire(ctx, latest.ID)
		if err != nil {
			return nil, 0, fmt.Errorf("count events of %s: %w", latest.ID, err)
		}
		for status, n := range counts {
			if n > 0 && status != model.EventCancelled {
				return latest, outOtherVersion, nil
			}
		}
		latest = nil // not the previous fire for overlap: look again below
	}
	if legacy := legacyOneOff(s, t, o, latest); legacy != nil {
		_, err := e.fireEvents(ctx, s, legacy, now, b)
		return legacy, outExisting, err
	}
	if latest != nil && !o.onceSince.IsZero() && latest.Decision == model.FireLate && !latest.FireTime.Before(o.onceSince) {
		return latest, outCaughtUp, nil
	}

	f := &model.Fire{
		ID:         id,
		ScheduleID: s.ID,
		TenantID:   s.TenantID,
		FireTime:   t,
		LocalTime:  e.localTime(s, t),
		Count:      max(cmp.Or(o.count, s.EventCount), 1),
		Decision:   o.decision,
		Note:       o.note,
		CreatedAt:  now.UTC(),
		Jitter:     jitterOf(s, t, o.decision),
		Payload:    o.payload,
		Watched:    e.watched(s),
	}
	if o.late {
		f.Note = "late by " + now.Sub(t).Truncate(time.Second).String()
	}
	if o.decision != model.FireTriggered && o.decision != model.FireBackfill && s.Skipped(t) {
		f.Decision, f.Note = model.FireSkippedManual, "skipped: fires before "+s.SkipUntil.UTC().Format(time.RFC3339Nano)+" are skipped"
	} else if o.decision != model.FireBackfill && (s.Overlap == model.OverlapSkip || s.Overlap == model.OverlapCancel) {
		// The previous fire's events may still be in this batch.
		if err := b.flush(ctx); err != nil {
			return nil, 0, err
		}
		if err := e.overlap(ctx, s, f, latest, now); err != nil {
			return nil, 0, err
		}
	}
	setDeadline(s, f)
	ctx, span := e.startFire(ctx, s, f)
	defer endFire(span, f)
	bg := o.background && hasEvents(f.Decision) // the background admits each chunk
	deferred := false
	if !bg {
		if deferred, err = e.admit(ctx, f, now); err != nil {
			return nil, 0, err
		}
	}
	if e.large(f) || deferred || bg {
		f.Remaining = f.Count // written in the background: see background.go
		traceFire(ctx, f)
	}
	if o.together && (bg || !e.large(f)) && (s.IsOneOff() || o.decision == model.FireBackfill || s.Overlap != model.OverlapSkip && s.Overlap != model.OverlapCancel) {
		h := heldFire{d: dueFire{s: s, t: t}, f: f}
		if hasEvents(f.Decision) && f.Remaining == 0 { // else the background writer writes them
			h.events = e.makeEvents(s, f, 0, f.Count, now)
			traceEvents(ctx, h.events)
		}
		b.hold(h)
		return f, outHeld, nil
	}

	inserted, err := st.FireInsert(ctx, f)
	if err != nil || !inserted {
		e.unadmit(f, deferred || bg, now)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("insert fire: %w", err)
	}
	if inserted && deferred {
		e.rate.enqueue(f.TenantID, f.ID, f.FireTime, now)
		e.m.FiresDeferred(deferReason(f.Note), 1)
	}
	out := outInserted
	if !inserted {
		// Recorded meanwhile (a concurrent save or another instance): keep
		// its decision.
		if f, err = st.FireGet(ctx, s.TenantID, id); err != nil {
			return nil, 0, fmt.Errorf("read fire %s: %w", id, err)
		}
		out = outExisting
	}
	complete, err := e.fireEvents(ctx, s, f, now, b)
	if err != nil {
		return f, out, err
	}
	if inserted && complete {
		b.record(f) // a background fire is signalled when it is complete
	}
	return f, out, nil
}

// writeHeld writes the held fires hs with their events in one
// FireInsertMany and counts them into ws. A fire recorded meanwhile (a
// concurrent save or another instance) keeps its decision, and its events
// are ensured as for any existing fire.
func (e *Emitter) writeHeld(ctx context.Context, b *batch, hs []heldFire, now time.Time, ws *PassStats) error {
	if len(hs) == 0 {
		return nil
	}
	fs := make([]store.FireNew, len(hs))
	for i, h := range hs {
		fs[i] = store.FireNew{Fire: h.f, Events: h.events}
	}
	inserted, n, err := e.deps.Store.FireInsertMany(ctx, fs)
	if err != nil {
		return fmt.Errorf("insert %d fires: %w", len(fs), err)
	}
	b.mu.Lock()
	b.inserted += n
	b.mu.Unlock()
	for i, h := range hs {
		f, out := h.f, outInserted
		if inserted[i] && h.events == nil && f.Remaining > 0 {
			// Recorded for the background writer: emitOpts.background, or
			// deferred (quota.go).
			if strings.Contains(f.Note, notePrefixDeferred) {
				e.rate.enqueue(f.TenantID, f.ID, f.FireTime, now)
				e.m.FiresDeferred(deferReason(f.Note), 1)
			}
			complete, err := e.fireEvents(ctx, h.d.s, f, now, b)
			if err != nil {
				return fmt.Errorf("fire %s at %s: %w", h.d.s.ID, h.d.t.Format(time.RFC3339), err)
			}
			if complete {
				b.record(f)
			}
		} else if inserted[i] {
			b.record(f)
		} else {
			if f, err = e.deps.Store.FireGet(ctx, h.d.s.TenantID, h.f.ID); err != nil {
				return fmt.Errorf("read fire %s: %w", h.f.ID, err)
			}
			out = outExisting
			if _, err := e.fireEvents(ctx, h.d.s, f, now, b); err != nil {
				return fmt.Errorf("fire %s at %s: %w", h.d.s.ID, h.d.t.Format(time.RFC3339), err)
			}
		}
		e.count(ws, h.d, f, out)
	}
	return nil
}

// legacyOneOff returns latest if it is the fire of one-off s (this version)
// that a release truncating runAt to the second recorded at runAt's second:
// it stands for the fire at t, which is not emitted again under a new id.
func legacyOneOff(s *model.Schedule, t time.Time, o emitOpts, latest *model.Fire) *model.Fire {
	if !s.IsOneOff() || latest == nil || o.decision == model.FireTriggered || latest.Decision == model.FireSkippedCalendar {
		// A one-off's fire a calendar skipped is not its fire: the one
		// it moved to is.
		return nil
	}
	sec := s.RunAt.UTC().Truncate(time.Second)
	if sec.Equal(t) || !latest.FireTime.Equal(sec) || latest.ID != model.FireID(s.ID, s.Version, sec) {
		return nil
	}
	return latest
}

// overlap applies s.Overlap to the new fire f given the latest fire before it
// (nil: look it up).
func (e *Emitter) overlap(ctx context.Context, s *model.Schedule, f, prev *model.Fire, now time.Time) error {
	st := e.deps.Store
	if prev == nil || !prev.FireTime.Before(f.FireTime) {
		var err error
		prev, err = st.FireLatestBefore(ctx, s.ID, f.FireTime)
		if errors.Is(err, model.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("previous fire: %w", err)
		}
	}
	running := prev.ID
	if prev.Decision == model.FireSkippedOverlap {
		// A skipped fire has no events; the one it yielded to may still run.
		rest, ok := strings.CutPrefix(prev.Note, notePrefixSkipped)
		if !ok {
			return nil
		}
		running, _, _ = strings.Cut(rest, " ")
	}
	counts, err := st.EventCountByFire(ctx, running)
	if err != nil {
		return fmt.Errorf("count events of %s: %w", running, err)
	}
	unfinished := 0
	for status, n := range counts {
		if !status.Finished() {
			unfinished += n
		}
	}
	if running == prev.ID {
		unfinished += prev.Remaining // still being written: not drained either
	}
	if unfinished == 0 {
		return nil
	}
	if s.Overlap == model.OverlapSkip {
		f.Decision = model.FireSkippedOverlap
		asked := f.Note // a trigger's note, kept after the reason
		f.Note = notePrefixSkipped + running + " has " + strconv.Itoa(unfinished) + " unfinished events"
		if asked != "" {
			f.Note += "; " + asked
		}
		return nil
	}
	n, err := st.EventCancelPending(ctx, s.ID, running, now)
	if err != nil {
		return fmt.Errorf("cancel events of %s: %w", running, err)
	}
	note := "overlap=cancel: fire " + f.ID + " cancelled " + strconv.Itoa(n) + " waiting events"
	if err := st.FireSetDecision(ctx, running, model.FireCancelledByNext, note); err != nil && !errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("mark %s cancelled: %w", running, err)
	}
	e.log.Info().Str(logkey.Schedule, s.ID).Str(logkey.Fire, f.ID).Str("cancelledFireId", running).
		Int("cancelledEvents", n).Int("unfinished", unfinished).Msg("previous fire cancelled (overlap=cancel)")
	if f.Note == "" {
		f.Note = "overlap=cancel: cancelled " + strconv.Itoa(n) + " waiting events of previous fire " + running
	} else {
		f.Note += "; overlap=cancel: cancelled " + strconv.Itoa(n) + " waiting events of previous fire " + running
	}
	return nil
}

func (e *Emitter) localTime(s *model.Schedule, t time.Time) string {
	loc, err := e.location(s.Timezone)
	if err != nil {
		loc = time.UTC
	}
	return t.In(loc).Format(localLayout)
}

// localLayout is RFC 3339 with the milliseconds of a fire that is not on a
// whole second (a one-off); whole seconds read as before.
const localLayout = "2006-01-02T15:04:05.999Z07:00"

// batch collects events into store writes of cfg.BatchSize; the workers of
// one emitAll share it, so that small fires from many workers still make
// full writes. Events are made on the fly: a fire of any size needs about
// one batch of memory per worker plus the shared buffer.
type batch struct {
	e        *Emitter
	mu       sync.Mutex
	buf      []*model.Event
	inserted int
	recorded []*model.Fire // fires inserted, signalled once flushed

	held       []heldFire // see emitOpts.together
	heldEvents int
}

// heldFire is a new fire, and its events, waiting in a batch.
type heldFire struct {
	d      dueFire
	f      *model.Fire
	events []*model.Event
}

// hold queues a new fire.
func (b *batch) hold(h heldFire) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = append(b.held, h)
	b.heldEvents += max(len(h.events), 1)
}

// fullHeld takes the held fires once they make a full write (BatchSize
// events, a fire without events counting as one), else returns nil.
func (b *batch) fullHeld() []heldFire {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.heldEvents < b.e.cfg.BatchSize {
		return nil
	}
	return b.takeHeldLocked()
}

// allHeld takes the held fires.
func (b *batch) allHeld() []heldFire {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeHeldLocked()
}

func (b *batch) takeHeldLocked() []heldFire {
	hs := b.held
	b.held, b.heldEvents = nil, 0
	return hs
}

func (e *Emitter) newBatch() *batch {
	return &batch{e: e}
}

// record notes a newly inserted fire for the Emitted hook.
func (b *batch) record(f *model.Fire) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recorded = append(b.recorded, f)
}

// addFire makes the events of fire f (none if its decision says so) and
// queues them.
func (b *batch) addFire(ctx context.Context, s *model.Schedule, f *model.Fire, now time.Time) error {
	if !hasEvents(f.Decision) {
		return nil
	}
	size := b.e.cfg.BatchSize
	for lo := 0; lo < f.Count; lo += size {
		evs := b.e.makeEvents(s, f, lo, min(lo+size, f.Count), now)
		traceEvents(ctx, evs)
		if err := b.put(ctx, evs); err != nil {
			return err
		}
	}
	return nil
}

// makeEvents makes the events lo..hi-1 of fire f of s.
func (e *Emitter) makeEvents(s *model.Schedule, f *model.Fire, lo, hi int, now time.Time) []*model.Event {
	k := hi - lo
	chunk := make([]model.Event, k)
	ptrs := make([]*model.Event, k)
	e.fillEvents(chunk, ptrs, s, f, lo, now)
	return ptrs
}

// fillEvents sets chunk to the events lo to lo+len(chunk)-1 of f, and ptrs
// (as long) to point at them: makeEvents in storage the caller gives.
func (e *Emitter) fillEvents(chunk []model.Event, ptrs []*model.Event, s *model.Schedule, f *model.Fire, lo int, now time.Time) {
	n := f.Count
	base := launchBase(s, f)
	var deadline *time.Time
	switch {
	case f.Deadline != nil:
		deadline = f.Deadline
	case s.Window > 0:
		d := base.Add(s.Window)
		deadline = &d
	}
	expire := expireAt(s, f, base)
	spread := s.Spread && s.Window > 0 && n > 1
	step, rem := int64(0), int64(0)
	if spread {
		step, rem = int64(s.Window)/int64(n), int64(s.Window)%int64(n)
	}
	created := now.UTC()
	payload := s.Payload
	if f.Payload != nil {
		payload = f.Payload
	}
	k := len(chunk)
	var tokens []byte
	if e.deps.ReleaseToken == nil {
		tokens = make([]byte, 16*k)
		_, _ = rand.Read(tokens) // never fails (crypto/rand)
	}
	for j := range chunk {
		i := lo + j
		ev := &chunk[j]
		launch := base
		if spread {
			// i*Window/n without overflow for large n and windows.
			launch = launch.Add(time.Duration(step*int64(i) + rem*int64(i)/int64(n)))
		}
		*ev = model.Event{
			ID:          model.EventID(f.ID, i),
			TenantID:    s.TenantID,
			ScheduleID:  s.ID,
			FireID:      f.ID,
			FireTime:    f.FireTime,
			Index:       i,
			Count:       n,
			LaunchAt:    launch,
			Deadline:    deadline,
			ExpireAt:    expire,
			Priority:    s.Priority,
			PolicyID:    s.PolicyID,
			Target:      s.Target,
			Payload:     payload,
			MaxAttempts: s.MaxAttempts,
			Status:      model.EventPending,
			CreatedAt:   created,
			UpdatedAt:   created,
			TraceParent: f.TraceParent, // a background fire's (traceEvents sets the others')
		}
		if tokens != nil {
			ev.ReleaseToken = hex.EncodeToString(tokens[16*j : 16*j+16])
		} else {
			ev.ReleaseToken = e.deps.ReleaseToken(ev.ID)
		}
		ev.Shard = model.ShardOf(ev, e.cfg.Shards)
		ptrs[j] = ev
	}
}

// put queues events, writing every full batch.
func (b *batch) put(ctx context.Context, evs []*model.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	size := b.e.cfg.BatchSize
	for len(evs) > 0 {
		k := min(size-len(b.buf), len(evs))
		b.buf = append(b.buf, evs[:k]...)
		evs = evs[k:]
		if len(b.buf) >= size {
			if err := b.flushLocked(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the queued events.
func (b *batch) flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked(ctx)
}

func (b *batch) flushLocked(ctx context.Context) error {
	if len(b.buf) == 0 {
		return nil
	}
	n, err := b.e.deps.Store.EventInsertMany(ctx, b.buf)
	if err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	b.inserted += n
	clear(b.buf)
	b.buf = b.buf[:0]
	return nil
}
