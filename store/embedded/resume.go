package embedded

import (
	"context"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// ScheduleResumeDue walks the 'r' entries of bSchedEnds (whole seconds,
// then schedule keys) from p.After and returns the paused schedules whose
// resumeAt is not after p.Now (see store.ScheduleStore).
func (s *Store) ScheduleResumeDue(ctx context.Context, p *store.ScheduleResumeDueParams) ([]*model.Schedule, error) {
	var out []*model.Schedule
	err := s.view(ctx, "schedule resume due", func(tx *bolt.Tx) error {
		out = nil
		limit := clampLimit(p.Limit)
		from := []byte{endResume}
		if !p.After.End.IsZero() || p.After.ID != "" {
			from = append(appendSchedKey(appendUnit([]byte{endResume}, p.After.End, time.Second), p.After.ID), 0)
		}
		c := tx.Bucket(bSchedEnds).Cursor()
		for k, _ := c.Seek(from); k != nil && k[0] == endResume && len(out) < limit && unitNotAfter(k, p.Now, time.Second); k, _ = c.Next() {
			sc, err := getSchedule(s.dict(tx), []byte(schedKeyID(k[1+unitLen:])))
			if errors.Is(err, model.ErrNotFound) {
				continue // the entry and the row go in one transaction
			}
			if err != nil {
				return err
			}
			if sc.State == model.SchedulePaused && sc.ResumeAt != nil && !sc.ResumeAt.After(p.Now) {
				out = append(out, sc)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
