package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// resumeTests cover ScheduleResumeDue: the paused schedules whose resume
// time has come, found through the index the schedule's writes keep.
var resumeTests = []namedTest{
	{"FindsPausedSchedulesDue", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		paused := func(tenant, id string, resumeAt *time.Time) *model.Schedule {
			s := newSchedule(tenant, id)
			s.State, s.ResumeAt, s.PausedNote = model.SchedulePaused, resumeAt, "note of "+id
			return s
		}
		// p1, p2 (sub-second) and b1 (another tenant) are due at now;
		// p3 is due later; p4 is paused without a resume time; a1 is
		// active with a stray resume time, which does not count.
		now := at(time.Hour)
		createSchedule(t, d, paused("A", "p1", ptr(at(30*time.Minute))), nil)
		createSchedule(t, d, paused("A", "p2", ptr(now.Add(-time.Millisecond))), nil)
		createSchedule(t, d, paused("B", "b1", ptr(now)), nil)
		createSchedule(t, d, paused("A", "p3", ptr(now.Add(time.Millisecond))), nil)
		createSchedule(t, d, paused("A", "p4", nil), nil)
		a1 := newSchedule("A", "a1")
		a1.ResumeAt = ptr(at(0))
		createSchedule(t, d, a1, nil)

		due := func(p *store.ScheduleResumeDueParams) []string {
			t.Helper()
			ss, err := d.ScheduleResumeDue(ctx, p)
			requireNoError(t, err, "ScheduleResumeDue")
			for _, s := range ss {
				requireEqual(t, s.State, model.SchedulePaused, "state of "+s.ID)
				requireEqual(t, s.PausedNote, "note of "+s.ID, "note of "+s.ID)
			}
			return scheduleIDs(ss)
		}
		requireIDs(t, due(&store.ScheduleResumeDueParams{Now: now, Limit: 100}), []string{"p1", "p2", "b1"}, "due at now")
		requireIDs(t, due(&store.ScheduleResumeDueParams{Now: at(0), Limit: 100}), []string{}, "due before any")

		// Pages: two of one, then the rest.
		p := &store.ScheduleResumeDueParams{Now: now, Limit: 1}
		var paged []string
		for range 4 {
			ss, err := d.ScheduleResumeDue(ctx, p)
			requireNoError(t, err, "ScheduleResumeDue page")
			if len(ss) == 0 {
				break
			}
			paged = append(paged, ss[0].ID)
			p.After = store.ScheduleEnd{End: *ss[0].ResumeAt, ID: ss[0].ID}
		}
		requireIDs(t, paged, []string{"p1", "p2", "b1"}, "paged")

		// A resume (the update clears ResumeAt) takes p1 out; a new resume
		// time moves p3 in; a delete takes b1 out.
		p1, err := d.ScheduleGet(ctx, "A", "p1")
		requireNoError(t, err, "ScheduleGet p1")
		r := *p1
		r.State, r.ResumeAt, r.Version = model.ScheduleActive, nil, p1.Version+1
		requireNoError(t, d.ScheduleUpdate(ctx, &r, p1.Version, []model.Child{}), "ScheduleUpdate resume p1")
		// The compare-and-set of a second instance that read p1 too.
		requireIs(t, d.ScheduleUpdate(ctx, &r, p1.Version, []model.Child{}), model.ErrConflict, "second resume of p1")
		p3, err := d.ScheduleGet(ctx, "A", "p3")
		requireNoError(t, err, "ScheduleGet p3")
		m := *p3
		m.ResumeAt, m.Version = ptr(at(10*time.Minute)), p3.Version+1
		requireNoError(t, d.ScheduleUpdate(ctx, &m, p3.Version, nil), "ScheduleUpdate p3")
		requireNoError(t, d.ScheduleDelete(ctx, "B", "b1"), "ScheduleDelete b1")
		requireIDs(t, due(&store.ScheduleResumeDueParams{Now: now, Limit: 100}), []string{"p3", "p2"}, "due after the changes")
	}},
}
