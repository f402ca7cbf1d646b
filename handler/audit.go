package handler

import (
	"context"
	"time"
)

// AuditStore is what the audit retention needs from the store.
type AuditStore interface {
	AuditDeleteBefore(ctx context.Context, t time.Time, limit int) (int, error)
}

// PurgeAudit deletes the audit records made more than AuditRetention ago,
// a thousand a write. Like Purge, only the owner of shard 0 does the work,
// every RetentionInterval. Without Deps.Audit it does nothing.
func (h *Handler) PurgeAudit(ctx context.Context) (int, error) {
	if h.deps.Audit == nil {
		return 0, nil
	}
	if _, ok := h.deps.Shards.Held()[0]; !ok {
		return 0, nil
	}
	before := h.deps.Clock.Now().Add(-h.cfg.AuditRetention)
	total := 0
	for range 1000 {
		n, err := h.deps.Audit.AuditDeleteBefore(ctx, before, 1000)
		total += n
		if err != nil {
			return total, err
		}
		if n < 1000 {
			break
		}
	}
	if total > 0 {
		h.log.Info().Int("records", total).Time("before", before).Msg("deleted audit records past retention")
	}
	return total, nil
}
