package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// PauseSchedule implements POST /v1/schedules/{id}/pause.
func (s *Server) PauseSchedule(c echo.Context, id api.ID) error {
	var in api.PauseRequest
	if raw, _ := c.Get(ctxRawBody).([]byte); len(raw) > 0 {
		if err := decodeBody(c, &in); err != nil {
			return err
		}
	}
	who := callerOf(c)
	m, err := s.store.ScheduleGet(c.Request().Context(), who.tenantID, id)
	if err != nil {
		return err
	}
	if m, err = s.Pause(c.Request().Context(), m, deref(in.Note, ""), in.Until, who.keyPrefix); err != nil {
		return err
	}
	return s.respondSchedule(c, http.StatusOK, m)
}

// Pause pauses m with note, the resume time until (nil: none) and by, the
// prefix of the API key that asked, and cancels the waiting events of its
// fires still ahead. A paused m stays as it is unless note or until is
// given: then they replace its note and resume time. It returns the
// schedule as stored. A completed m is a conflict; ErrConflict also when
// m's version moved meanwhile (nothing written).
func (s *Server) Pause(ctx context.Context, m *model.Schedule, note string, until *time.Time, by string) (*model.Schedule, error) {
	now := s.now().UTC()
	if err := schedule.CheckPause(note, until, now); err != nil {
		return nil, err
	}
	if m.State == model.ScheduleCompleted {
		return nil, conflict("the schedule is completed")
	}
	if m.State == model.ScheduleActive || note != "" || until != nil {
		pausedAt := now
		if m.State == model.SchedulePaused && m.PausedAt != nil {
			pausedAt = *m.PausedAt
		}
		var err error
		noteAudit(ctx, note) // the records' note is the pause's
		m, _, err = s.setState(ctx, m, model.SchedulePaused, func(n *model.Schedule) {
			n.PausedNote, n.PausedAt, n.PausedBy, n.ResumeAt = note, &pausedAt, by, nil
			if until != nil {
				n.ResumeAt = new(until.UTC())
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if err := s.cancelFutureFires(ctx, m.TenantID, m.ID); err != nil {
		return nil, err
	}
	return m, nil
}

// ResumeSchedule implements POST /v1/schedules/{id}/resume.
func (s *Server) ResumeSchedule(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	m, comp, err := s.Resume(ctx, m)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.scheduleOutCompiled(m, comp))
}

// Resume resumes m and returns it as stored, compiled. A paused m becomes
// active, its pause cleared, with a compare-and-set on its version
// (ErrConflict: another request or instance changed or resumed it), and
// its fires are emitted: when its resume time has passed, those since then
// follow its misfire policy (the emitter's Resumed), whoever resumes it.
// An active m has its fires emitted again (idempotently: a retried resume
// whose first attempt failed after the state change). A completed m is a
// conflict.
func (s *Server) Resume(ctx context.Context, m *model.Schedule) (*model.Schedule, *schedule.Compiled, error) {
	switch m.State {
	case model.ScheduleCompleted:
		return nil, nil, conflict("the schedule is completed")
	case model.ScheduleActive:
		comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
		if err != nil {
			return nil, nil, err
		}
		if err := s.saved(ctx, m, comp.Keys); err != nil {
			return nil, nil, err
		}
		return m, comp, nil
	}
	if err := s.checkFire(ctx, m); err != nil {
		return nil, nil, err
	}
	var since time.Time
	if m.ResumeAt != nil && !m.ResumeAt.After(s.now()) {
		since = *m.ResumeAt
	}
	n, comp, err := s.setState(ctx, m, model.ScheduleActive, func(n *model.Schedule) {
		n.PausedNote, n.PausedAt, n.PausedBy, n.ResumeAt = "", nil, "", nil
	})
	if err != nil {
		return nil, nil, err
	}
	if s.emitter != nil {
		if err := s.emitter.Resumed(context.WithoutCancel(ctx), n, comp.Keys, since); err != nil {
			s.log.Warn().Err(err).Str(logkey.Schedule, n.ID).Msg("emitting the fires of a resumed schedule failed")
			return nil, nil, fmt.Errorf("schedule %s resumed, its fires not emitted yet: %w", n.ID, err)
		}
	}
	return n, comp, nil
}

// resumeBatch is the number of schedules of one ScheduleResumeDue call.
const resumeBatch = 1000

// ResumeDue resumes the paused schedules whose resume time has come, found
// through the store's index of resume times. Every instance may run it:
// each resume is a compare-and-set on the version, so one instance
// resumes a schedule and the others find its version moved and leave it.
// A schedule that cannot resume now (the disk guard, a quota) stays paused
// and is tried again at the next run. It returns how many it resumed.
func (s *Server) ResumeDue(ctx context.Context) (int, error) {
	p := &store.ScheduleResumeDueParams{Now: s.now(), Limit: resumeBatch}
	resumed := 0
	for {
		ss, err := s.store.ScheduleResumeDue(ctx, p)
		if err != nil {
			return resumed, fmt.Errorf("resume due schedules: %w", err)
		}
		for _, m := range ss {
			p.After = store.ScheduleEnd{End: *m.ResumeAt, ID: m.ID}
			_, _, err := s.Resume(ctx, m)
			switch {
			case err == nil:
				resumed++
				s.log.Info().Str(logkey.Schedule, m.ID).Time("resumeAt", *m.ResumeAt).Msg("schedule resumed at its resume time")
			case errors.Is(err, model.ErrConflict):
				// Resumed or changed by another instance or a request.
			case ctx.Err() != nil:
				return resumed, ctx.Err()
			default:
				s.log.Warn().Err(err).Str(logkey.Schedule, m.ID).Msg("resuming a schedule at its resume time failed; tried again later")
			}
		}
		if len(ss) < resumeBatch {
			return resumed, nil
		}
	}
}

// Resumer runs ResumeDue every Interval on a gocron scheduler driven by
// the master's clock. Its lifecycle is startstop's.
type Resumer struct {
	startstop.Base
	srv      *Server
	clock    clockwork.Clock
	interval time.Duration
	log      zerolog.Logger
	sched    gocron.Scheduler
}

// DefaultResumeInterval is how often the Resumer looks for schedules due
// to resume: well within the emitter's window, so that a fire at the
// resume time is emitted on time rather than as a missed one.
const DefaultResumeInterval = 5 * time.Second

// NewResumer returns the Resumer of s; interval 0 takes
// DefaultResumeInterval.
func (s *Server) NewResumer(interval time.Duration) *Resumer {
	if interval <= 0 {
		interval = DefaultResumeInterval
	}
	return &Resumer{srv: s, clock: s.clock, interval: interval, log: s.log.With().Str(logkey.Component, "resumer").Logger()}
}

// Start runs ResumeDue at once and then every interval.
func (r *Resumer) Start(ctx context.Context) error {
	run, ok := r.StartInit(ctx, 5*time.Second)
	if !ok {
		return nil
	}
	sc, err := gocron.NewScheduler(gocron.WithClock(r.clock))
	if err == nil {
		_, err = sc.NewJob(gocron.DurationJob(r.interval),
			gocron.NewTask(func() { r.Do(func() { r.runLogged(run) }) }),
			gocron.WithName("resume-due"),
			gocron.WithStartAt(gocron.WithStartImmediately()),
			gocron.WithSingletonMode(gocron.LimitModeReschedule))
	}
	if err != nil {
		if sc != nil {
			_ = sc.Shutdown()
		}
		r.Base.Stop(nil)
		return fmt.Errorf("resumer: %w", err)
	}
	sc.Start()
	r.sched = sc
	r.Started()
	return nil
}

// Stop schedules no more runs and waits for one in progress. Safe twice
// and before Start.
func (r *Resumer) Stop() {
	sc := r.sched
	r.Base.Stop(func() {
		if sc != nil {
			r.Go(func() { _ = sc.Shutdown() })
		}
	})
}

func (r *Resumer) runLogged(ctx context.Context) {
	if _, err := r.srv.ResumeDue(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn().Err(err).Msg("resuming due schedules failed")
	}
}

// SkipSchedule implements POST /v1/schedules/{id}/skip.
func (s *Server) SkipSchedule(c echo.Context, id api.ID) error {
	var in api.SkipRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	if m.State == model.ScheduleCompleted {
		return conflict("the schedule is completed")
	}
	comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
	if err != nil {
		return err
	}
	now := s.now()
	until, err := comp.SkipUntil(in.Count, in.Until, now)
	if err != nil {
		return err
	}
	n, comp, err := s.setState(ctx, m, m.State, func(n *model.Schedule) { n.SkipUntil = &until })
	if err != nil {
		return err
	}
	// Fires emitted ahead of time for the old version: their waiting
	// events go, and the new version records them as skipped.
	if err := s.cancelFutureFires(ctx, n.TenantID, n.ID); err != nil {
		return err
	}
	if err := s.saved(ctx, n, comp.Keys); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.scheduleOutCompiled(n, comp))
}
