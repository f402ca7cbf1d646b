package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// intervalTests cover the index of interval schedules' next fires:
// ScheduleIntervalDue finds the active ones of a partition due before a
// time, ScheduleIntervalAdvance moves one forward, a compare-and-set on
// its version that never moves it back.
var intervalTests = []namedTest{
	{"IntervalDueFindsActiveIntervalSchedules", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		interval := func(tenant, id string, partition int, first time.Time) *model.Schedule {
			s := newSchedule(tenant, id)
			s.Cron, s.Interval, s.StartAt, s.Partition = "", 10*time.Minute, ptr(first), partition
			return s
		}
		// a and b (sub-second first fire, another tenant) are in
		// partition 0; c in partition 1; p is paused; k is a cron schedule
		// and n an interval schedule without startAt, first due one
		// interval after its creation.
		createSchedule(t, d, interval("A", "a", 0, at(10*time.Minute)), nil)
		createSchedule(t, d, interval("B", "b", 0, at(30*time.Minute+500*time.Millisecond)), nil)
		createSchedule(t, d, interval("A", "c", 1, at(10*time.Minute)), nil)
		p := interval("A", "p", 0, at(0))
		p.State = model.SchedulePaused
		createSchedule(t, d, p, nil)
		createSchedule(t, d, newSchedule("A", "k"), nil)
		n := interval("A", "n", 0, at(0))
		n.StartAt, n.CreatedAt = nil, at(50*time.Minute)
		createSchedule(t, d, n, nil)

		due := func(partition int, before time.Time) []string {
			t.Helper()
			ss, err := d.ScheduleIntervalDue(ctx, &store.ScheduleIntervalDueParams{Partition: partition, Before: before, Limit: 100})
			requireNoError(t, err, "ScheduleIntervalDue")
			return scheduleIDs(ss)
		}
		requireIDs(t, due(0, at(10*time.Minute)), []string{}, "due before the first fire (exclusive)")
		requireIDs(t, due(0, at(10*time.Minute+time.Millisecond)), []string{"a"}, "due just after a's first fire")
		requireIDs(t, due(0, at(30*time.Minute+500*time.Millisecond)), []string{"a"}, "b is due half a second later")
		requireIDs(t, due(0, at(31*time.Minute)), []string{"a", "b"}, "due at 31m")
		requireIDs(t, due(1, at(31*time.Minute)), []string{"c"}, "partition 1")
		requireIDs(t, due(0, at(61*time.Minute)), []string{"a", "b", "n"}, "n one interval after its creation")

		// Pages of one.
		pp := &store.ScheduleIntervalDueParams{Partition: 0, Before: at(61 * time.Minute), Limit: 1}
		var paged []string
		for range 5 {
			ss, err := d.ScheduleIntervalDue(ctx, pp)
			requireNoError(t, err, "ScheduleIntervalDue page")
			if len(ss) == 0 {
				break
			}
			paged = append(paged, ss[0].ID)
			pp.After = store.ScheduleEnd{End: ss[0].IntervalNextFire(), ID: ss[0].ID}
		}
		requireIDs(t, paged, []string{"a", "b", "n"}, "paged")

		// Advance a: it leaves the windows before its next fire; the
		// version and the update time stay.
		advance := func(id string, version int64, next time.Time) {
			t.Helper()
			requireNoError(t, d.ScheduleIntervalAdvance(ctx, &store.ScheduleIntervalAdvanceParams{ID: id, Version: version, Next: next}), "advance "+id)
		}
		advance("a", 1, at(40*time.Minute))
		requireIDs(t, due(0, at(31*time.Minute)), []string{"b"}, "a advanced past 31m")
		got, err := d.ScheduleGet(ctx, "A", "a")
		requireNoError(t, err, "ScheduleGet a")
		requireEqual(t, got.Version, int64(1), "version after the advance")
		requireEqual(t, got.IntervalNextFire(), at(40*time.Minute), "next fire of a")
		requireEqual(t, got.UpdatedAt, base, "updatedAt after the advance")
		// Never back, never for another version, nothing for a schedule
		// that is gone or not an interval schedule.
		advance("a", 1, at(20*time.Minute))
		advance("a", 2, at(90*time.Minute))
		advance("gone", 1, at(90*time.Minute))
		advance("k", 1, at(90*time.Minute))
		advance("p", 1, at(90*time.Minute))
		got, err = d.ScheduleGet(ctx, "A", "a")
		requireNoError(t, err, "ScheduleGet a")
		requireEqual(t, got.IntervalNextFire(), at(40*time.Minute), "next fire of a after refused advances")
		requireIDs(t, due(0, at(41*time.Minute)), []string{"b", "a"}, "a due again at its next fire, after b")

		// A new version starts from its first fire again; a pause takes
		// b out, a resume puts it back; a delete takes n out.
		m := *got
		m.Version, m.IntervalNext = 2, nil
		requireNoError(t, d.ScheduleUpdate(ctx, &m, 1, []model.Child{}), "update a")
		requireIDs(t, due(0, at(31*time.Minute)), []string{"a", "b"}, "a at its first fire after an update")
		b, err := d.ScheduleGet(ctx, "B", "b")
		requireNoError(t, err, "ScheduleGet b")
		pb := *b
		pb.State, pb.Version = model.SchedulePaused, 2
		requireNoError(t, d.ScheduleUpdate(ctx, &pb, 1, nil), "pause b")
		requireIDs(t, due(0, at(31*time.Minute)), []string{"a"}, "b paused")
		rb := pb
		rb.State, rb.Version = model.ScheduleActive, 3
		requireNoError(t, d.ScheduleUpdate(ctx, &rb, 2, nil), "resume b")
		requireNoError(t, d.ScheduleDelete(ctx, "A", "n"), "delete n")
		requireIDs(t, due(0, at(61*time.Minute)), []string{"a", "b"}, "b resumed, n deleted")
	}},
	{"IntervalScheduleWithEndCompletes", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "e")
		s.Cron, s.Interval, s.StartAt, s.EndAt = "", 10*time.Minute, ptr(at(0)), ptr(at(30*time.Minute))
		createSchedule(t, d, s, nil)
		res, err := d.ScheduleComplete(ctx, &store.ScheduleCompleteParams{Now: at(time.Hour), MissedBefore: at(time.Hour), At: at(time.Hour), Limit: 10})
		requireNoError(t, err, "ScheduleComplete")
		requireEqual(t, res.Completed, 1, "completed")
		got, err := d.ScheduleGet(ctx, "A", "e")
		requireNoError(t, err, "ScheduleGet")
		requireEqual(t, got.State, model.ScheduleCompleted, "state")
		ss, err := d.ScheduleIntervalDue(ctx, &store.ScheduleIntervalDueParams{Partition: 0, Before: at(2 * time.Hour), Limit: 10})
		requireNoError(t, err, "ScheduleIntervalDue")
		requireIDs(t, scheduleIDs(ss), []string{}, "a completed schedule is not due")
	}},
}
