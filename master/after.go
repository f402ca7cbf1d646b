package master

import (
	"context"
	"errors"
	"strconv"

	"github.com/schedulerd/schedulerd/model"
)

// checkAfterKnown checks the dependency a of the schedule self ("" for a
// new one) of tenantID: it names an existing schedule of the tenant, not
// self, and the chain of dependencies from there neither comes back to
// self nor is longer than model.MaxAfterDepth. Problems go to fe under
// after.scheduleId; the error is the store's.
//
// Two saves at the same time can each make half of a cycle unseen by
// the other; the fires of such a cycle stop after model.MaxAfterDepth
// links (the finisher refuses deeper ones).
func (s *Server) checkAfterKnown(ctx context.Context, fe *fieldErrors, tenantID, self string, a *model.After) error {
	if a == nil || a.ScheduleID == "" {
		return nil
	}
	const field = "after.scheduleId"
	if a.ScheduleID == self {
		fe.add(field, "names the schedule itself")
		return nil
	}
	path := self
	if path == "" {
		path = "this schedule"
	}
	seen := map[string]bool{}
	cur := a.ScheduleID
	for depth := 1; ; depth++ {
		path += " -> " + cur
		up, err := s.store.ScheduleGet(ctx, tenantID, cur)
		if errors.Is(err, model.ErrNotFound) {
			if depth == 1 {
				fe.add(field, "unknown schedule")
			}
			return nil
		}
		if err != nil {
			return err
		}
		if up.After == nil {
			return nil
		}
		next := up.After.ScheduleID
		switch {
		case next == self && self != "":
			fe.add(field, "makes a cycle: "+path+" -> "+self)
			return nil
		case seen[next]:
			return nil // a cycle that does not pass here (made by a race)
		case depth >= model.MaxAfterDepth-1:
			fe.add(field, "the chain of schedules firing after one another is longer than "+strconv.Itoa(model.MaxAfterDepth))
			return nil
		}
		seen[cur] = true
		cur = next
	}
}
