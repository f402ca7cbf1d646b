package throttle

import (
	"context"
	"errors"
	"fmt"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Reclaim runs the periodic token-timeout pass over the policies whose shard
// this instance owns: tokens whose TokenExpiresAt has passed are taken back
// and counted in Policy.TimedOut. An event that was delivered goes to
// released (TokenTimedOut set); one still in delivering (its deliverer died
// or is slower than the timeout) goes to retrying so that it is not lost.
// It also makes sure every owned policy has a bucket, whose owner reconciles
// the persisted InUse with the events that hold tokens.
func (t *Throttle) Reclaim(ctx context.Context) error {
	policies, err := t.deps.Store.PolicyListAll(ctx)
	if err != nil {
		return fmt.Errorf("list policies: %w", err)
	}
	held := t.deps.Shards.Held()
	var errs []error
	for _, p := range policies {
		shard := model.ShardOf(&model.Event{PolicyID: p.ID}, t.cfg.Shards)
		fence, ok := held[shard]
		if !ok {
			continue
		}
		t.deps.Metrics.TokensInUse(p.ID, p.InUse)
		t.mu.Lock()
		var b *bucket
		if t.ctx != nil && !t.stopped {
			b = t.bucketLocked(p.ID, shard, fence)
		}
		t.mu.Unlock()
		if b != nil {
			b.setPolicy(p)
		}
		if err := t.reclaimPolicy(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", p.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (t *Throttle) reclaimPolicy(ctx context.Context, p *model.Policy) error {
	for {
		now := t.deps.Clock.Now()
		evs, err := t.deps.Store.EventFindTokenExpired(ctx, p.ID, now, t.cfg.ReclaimBatch)
		if err != nil || len(evs) == 0 {
			return err
		}
		// An event whose release is being written in this process is left
		// alone (it is released, or reclaimed at the next pass).
		mine := evs[:0]
		for _, e := range evs {
			if t.slots.tryAcquire(e.ID) {
				mine = append(mine, e)
			}
		}
		full := len(evs) == t.cfg.ReclaimBatch
		evs = mine
		ts := make([]store.EventTransition, 0, len(evs))
		dead := 0
		for _, e := range evs {
			// A token renewed since this read (extended by its consumer, or
			// by the handler before a late send) stays.
			ts = append(ts, store.ReclaimToken(e, t.maxAttempts(e), now))
		}
		res, err := t.deps.Store.EventTransition(ctx, ts)
		for _, e := range evs {
			t.slots.release(e.ID)
		}
		if err != nil {
			return err
		}
		won := make([]*model.Event, 0, len(evs))
		deadBy, retriedBy := map[string]int{}, map[string]int{}
		for i, e := range evs {
			if res[i] == nil {
				won = append(won, e)
				switch ts[i].To {
				case model.EventDead:
					dead++
					deadBy[model.PriorityClass(e.Priority)]++
				case model.EventRetrying:
					retriedBy[model.PriorityClass(e.Priority)]++
				}
			}
		}
		if len(won) > 0 {
			if t.deps.Reclaimed != nil {
				t.deps.Reclaimed(won)
			}
			if err := returnTokens(ctx, t.deps.Store, p.ID, len(won), len(won)); err != nil {
				return fmt.Errorf("return %d timed-out tokens: %w", len(won), err)
			}
			t.deps.Metrics.TokenTimeouts(p.ID, len(won))
			for c, n := range deadBy {
				t.deps.Metrics.Dead(c, n)
			}
			for c, n := range retriedBy {
				t.deps.Metrics.Retried(c, n)
			}
			t.log.Info().Str(logkey.Policy, p.ID).Int("tokens", len(won)).Msg("reclaimed timed-out tokens")
			t.Released(p.ID)
		}
		if !full || len(evs) == 0 {
			return nil
		}
	}
}

func (t *Throttle) maxAttempts(e *model.Event) int {
	if e.MaxAttempts > 0 {
		return e.MaxAttempts
	}
	return t.cfg.DefaultMaxAttempts
}
