package master

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/startstop"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// DeadlineStore is what the deadline check reads and writes.
type DeadlineStore interface {
	FireDeadlineDue(ctx context.Context, before time.Time, limit int) ([]*model.Fire, error)
	FireDeadlineDone(ctx context.Context, id string, miss *model.DeadlineMiss) (bool, error)
	EventCountByFire(ctx context.Context, fireID string) (store.EventCounts, error)
	EventExpireWaiting(ctx context.Context, scheduleID, fireID string, at time.Time, reason string) (int, error)
	ScheduleGet(ctx context.Context, tenantID, id string) (*model.Schedule, error)
}

// DeadlineObserver hears of each missed deadline once, from the instance
// that recorded it: f carries DeadlineMissed; policyID is its schedule's
// policy ("" for none, or a schedule deleted since).
type DeadlineObserver interface {
	FireDeadlineMissed(f *model.Fire, policyID string)
}

// MissNotifier writes the fire.deadline_missed notifications of a fire;
// writing them again writes nothing more (finish.Finisher).
type MissNotifier interface {
	Notify(ctx context.Context, k model.NotifyKind, f *model.Fire) error
}

// ExpiredReason is the LastError of an event expired at its fire's
// deadline.
const ExpiredReason = "expired: the fire's deadline passed (onDeadline expire)"

// DeadlineChecker closes the deadlines of fires when they come: a fire
// with events unfinished (or expired) then gets DeadlineMissed, and under
// onDeadline expire its waiting events become expired. Every instance runs
// it: expiring is a conditional update of waiting events and the miss is
// recorded by compare-and-set, so one instance records it and tells the
// Observer; the open deadlines are stored, so a restart finds them again.
type DeadlineChecker struct {
	startstop.Base
	store    DeadlineStore
	observer DeadlineObserver
	notifier MissNotifier
	clock    clockwork.Clock
	interval time.Duration
	log      zerolog.Logger
	sched    gocron.Scheduler
}

// DefaultDeadlineInterval is how often the checker looks for deadlines
// that have come. Delivery does not wait for it: an event past its
// ExpireAt is never sent (the handler expires it instead).
const DefaultDeadlineInterval = time.Second

// NewDeadlineChecker returns a checker; interval 0 takes
// DefaultDeadlineInterval, a nil clock the real one, a nil observer none.
func NewDeadlineChecker(st DeadlineStore, obs DeadlineObserver, clock clockwork.Clock, log zerolog.Logger, interval time.Duration) *DeadlineChecker {
	if interval <= 0 {
		interval = DefaultDeadlineInterval
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &DeadlineChecker{store: st, observer: obs, clock: clock, interval: interval,
		log: log.With().Str(logkey.Component, "deadlines").Logger()}
}

// NotifyMisses has the checker write the notifications of each missed
// fire through n before it records the miss, so that a crash between the
// two writes them on the next pass rather than never.
func (d *DeadlineChecker) NotifyMisses(n MissNotifier) { d.notifier = n }

// deadlineBatch is the number of fires of one FireDeadlineDue call.
const deadlineBatch = 200

// CheckDue closes every deadline that has come; it returns how many
// misses this call recorded.
func (d *DeadlineChecker) CheckDue(ctx context.Context) (int, error) {
	now := d.clock.Now()
	missed := 0
	for {
		fs, err := d.store.FireDeadlineDue(ctx, now, deadlineBatch)
		if err != nil {
			return missed, fmt.Errorf("deadline check: %w", err)
		}
		for _, f := range fs {
			rec, err := d.close(ctx, f)
			if err != nil {
				return missed, err
			}
			if rec {
				missed++
			}
		}
		if len(fs) < deadlineBatch {
			return missed, nil
		}
	}
}

// close closes the deadline of f: expire first (idempotent), then count,
// then record, so that a crash in between repeats the same steps.
func (d *DeadlineChecker) close(ctx context.Context, f *model.Fire) (bool, error) {
	if f.OnDeadline == model.DeadlineExpire {
		if _, err := d.store.EventExpireWaiting(ctx, f.ScheduleID, f.ID, *f.Deadline, ExpiredReason); err != nil {
			return false, fmt.Errorf("deadline check: fire %s: %w", f.ID, err)
		}
	}
	counts, err := d.store.EventCountByFire(ctx, f.ID)
	if err != nil {
		return false, fmt.Errorf("deadline check: fire %s: %w", f.ID, err)
	}
	remaining := counts[model.EventExpired] + f.Remaining // events not even written yet
	for st, n := range counts {
		if !st.Finished() {
			remaining += n
		}
	}
	var miss *model.DeadlineMiss
	if remaining > 0 {
		miss = &model.DeadlineMiss{At: f.Deadline.UTC(), Remaining: remaining}
		if d.notifier != nil && f.DeadlineMissed == nil {
			missed := *f
			missed.DeadlineMissed = miss
			if err := d.notifier.Notify(ctx, model.NotifyDeadlineMissed, &missed); err != nil {
				return false, fmt.Errorf("deadline check: fire %s: notify: %w", f.ID, err)
			}
		}
	}
	rec, err := d.store.FireDeadlineDone(ctx, f.ID, miss)
	if err != nil {
		return false, fmt.Errorf("deadline check: fire %s: %w", f.ID, err)
	}
	if rec {
		f.DeadlineMissed = miss
		policy := ""
		if s, err := d.store.ScheduleGet(ctx, f.TenantID, f.ScheduleID); err == nil {
			policy = s.PolicyID
		}
		d.log.Info().Str(logkey.Schedule, f.ScheduleID).Str("fire", f.ID).Int("remaining", remaining).
			Time("deadline", *f.Deadline).Msg("fire missed its deadline")
		if d.observer != nil {
			d.observer.FireDeadlineMissed(f, policy)
		}
	}
	return rec, nil
}

// Start runs CheckDue at once and then every interval.
func (d *DeadlineChecker) Start(ctx context.Context) error {
	run, ok := d.StartInit(ctx, 5*time.Second)
	if !ok {
		return nil
	}
	sc, err := gocron.NewScheduler(gocron.WithClock(d.clock))
	if err == nil {
		_, err = sc.NewJob(gocron.DurationJob(d.interval),
			gocron.NewTask(func() { d.Do(func() { d.runLogged(run) }) }),
			gocron.WithName("deadline-check"),
			gocron.WithStartAt(gocron.WithStartImmediately()),
			gocron.WithSingletonMode(gocron.LimitModeReschedule))
	}
	if err != nil {
		if sc != nil {
			_ = sc.Shutdown()
		}
		d.Base.Stop(nil)
		return fmt.Errorf("deadline checker: %w", err)
	}
	sc.Start()
	d.sched = sc
	d.Started()
	return nil
}

// Stop schedules no more runs and waits for one in progress. Safe twice
// and before Start.
func (d *DeadlineChecker) Stop() {
	sc := d.sched
	d.Base.Stop(func() {
		if sc != nil {
			d.Go(func() { _ = sc.Shutdown() })
		}
	})
}

func (d *DeadlineChecker) runLogged(ctx context.Context) {
	if _, err := d.CheckDue(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn().Err(err).Msg("checking fire deadlines failed")
	}
}
