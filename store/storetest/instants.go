package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// instantTests check that instants keep their milliseconds: a one-off due
// at .479 must not come back as .000 (it would be delivered early), and
// launch instants a millisecond apart must stay apart and in order.
var instantTests = []namedTest{
	{"ScheduleKeepsMilliseconds", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		s := newSchedule("A", "s1")
		s.Cron, s.RunAt = "", ptr(at(time.Hour+479*time.Millisecond))
		c := newSchedule("A", "s2")
		c.StartAt, c.EndAt = ptr(at(time.Millisecond)), ptr(at(48*time.Hour+999*time.Millisecond))
		createSchedule(t, d, s, nil)
		createSchedule(t, d, c, nil)

		got, err := d.ScheduleGet(ctx, "A", "s1")
		requireNoError(t, err, "ScheduleGet s1")
		requireTimePtr(t, got.RunAt, s.RunAt, "RunAt")
		got, err = d.ScheduleGet(ctx, "A", "s2")
		requireNoError(t, err, "ScheduleGet s2")
		requireTimePtr(t, got.StartAt, c.StartAt, "StartAt")
		requireTimePtr(t, got.EndAt, c.EndAt, "EndAt")
	}},
	{"FireKeepsMilliseconds", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		var fires []*model.Fire
		for _, ms := range []time.Duration{1, 2, 479} {
			f := newFire("A", "s1", at(time.Hour+ms*time.Millisecond))
			ok, err := d.FireInsert(ctx, f)
			requireNoError(t, err, "FireInsert")
			requireEqual(t, ok, true, "FireInsert inserted")
			fires = append(fires, f)
		}
		for _, f := range fires {
			got, err := d.FireGet(ctx, "A", f.ID)
			requireNoError(t, err, "FireGet "+f.ID)
			requireTime(t, got.FireTime, f.FireTime, "FireTime of "+f.ID)
		}
		// Strictly before, at millisecond granularity: the emitter finds a
		// fire at t with FireLatestBefore(t+1ms).
		got, err := d.FireLatestBefore(ctx, "s1", fires[1].FireTime)
		requireNoError(t, err, "FireLatestBefore .002")
		requireEqual(t, got.ID, fires[0].ID, "FireLatestBefore .002")
		got, err = d.FireLatestBefore(ctx, "s1", fires[1].FireTime.Add(time.Millisecond))
		requireNoError(t, err, "FireLatestBefore .003")
		requireEqual(t, got.ID, fires[1].ID, "FireLatestBefore .003")
	}},
	{"LaunchAtKeepsMilliseconds", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		fire := at(time.Hour + 500*time.Millisecond)
		mk := func(i int, launch time.Duration) *model.Event {
			e := newEvent("A", "s1", fire, i)
			e.LaunchAt = fire.Add(launch)
			e.Deadline = ptr(fire.Add(2*time.Second + 1*time.Millisecond))
			return e
		}
		// Inserted out of launch order; a spread window's offsets.
		e0, e1, e2, e3 := mk(0, 999*time.Millisecond), mk(1, 0), mk(2, time.Millisecond), mk(3, 2*time.Millisecond)
		insertEvents(t, d, e0, e1, e2, e3)
		for _, e := range []*model.Event{e0, e1, e2, e3} {
			got := getEvent(t, d, e.ID)
			requireTime(t, got.LaunchAt, e.LaunchAt, "LaunchAt of "+e.ID)
			requireTime(t, got.FireTime, fire, "FireTime of "+e.ID)
			requireTimePtr(t, got.Deadline, e.Deadline, "Deadline of "+e.ID)
		}
		// Due strictly before .502: .500 and .501, earliest first; .502 is not.
		claimed, err := d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: e3.LaunchAt, Limit: 10})
		requireNoError(t, err, "EventClaimDue")
		requireIDs(t, eventIDs(claimed), []string{e1.ID, e2.ID}, "claimed before .502")
		for _, e := range claimed {
			want := e1.LaunchAt
			if e.ID == e2.ID {
				want = e2.LaunchAt
			}
			requireTime(t, e.LaunchAt, want, "claimed LaunchAt of "+e.ID)
		}
		claimed, err = d.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: e0.LaunchAt.Add(time.Millisecond), Limit: 10})
		requireNoError(t, err, "EventClaimDue rest")
		requireIDs(t, eventIDs(claimed), []string{e3.ID, e0.ID}, "claimed the rest, earliest first")
	}},
}
