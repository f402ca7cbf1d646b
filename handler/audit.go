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
	return h.purgeBefore(ctx, h.cfg.AuditRetention, "audit records", h.deps.Audit.AuditDeleteBefore)
}
