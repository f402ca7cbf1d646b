package handler

import (
	"context"
	"time"
)

// IdempotencyStore is what the idempotency clean-up needs from the store:
// the master records the first answer to every create that carried an
// Idempotency-Key, and nothing else deletes those records.
type IdempotencyStore interface {
	IdempotencyDeleteBefore(ctx context.Context, t time.Time) (int, error)
}

// PurgeIdempotency deletes idempotency records created more than
// IdempotencyRetention ago; a retry with their key after that creates a new
// object. Like Purge, only the owner of shard 0 does the work, every
// RetentionInterval. Without Deps.Idempotency it does nothing.
func (h *Handler) PurgeIdempotency(ctx context.Context) (int, error) {
	if h.deps.Idempotency == nil {
		return 0, nil
	}
	if _, ok := h.deps.Shards.Held()[0]; !ok {
		return 0, nil
	}
	before := h.deps.Clock.Now().Add(-h.cfg.IdempotencyRetention)
	n, err := h.deps.Idempotency.IdempotencyDeleteBefore(ctx, before)
	if n > 0 {
		h.log.Info().Int("records", n).Time("before", before).Msg("deleted idempotency records past retention")
	}
	return n, err
}
