package emitter_test

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// A fire gets its deadline from the schedule (its own deadline, else the
// window's end) with onDeadline; its events carry the deadline, and an
// expiry under expire or maxEventAge, whichever comes first.
func TestFiresGetTheirDeadline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		set         func(*model.Schedule)
		deadline    time.Duration // after the fire time; 0: none
		on          model.DeadlinePolicy
		expireAfter time.Duration // 0: none
	}{
		{"None", func(*model.Schedule) {}, 0, "", 0},
		{"WindowEnd", func(s *model.Schedule) { s.Window = time.Hour }, time.Hour, model.DeadlineRecord, 0},
		{"OwnDeadline", func(s *model.Schedule) { s.Window, s.Deadline = time.Hour, 90*time.Minute }, 90 * time.Minute, model.DeadlineRecord, 0},
		{"Expire", func(s *model.Schedule) { s.Deadline, s.OnDeadline = 45*time.Minute, model.DeadlineExpire }, 45 * time.Minute, model.DeadlineExpire, 45 * time.Minute},
		{"MaxEventAgeFirst", func(s *model.Schedule) {
			s.Deadline, s.OnDeadline, s.MaxEventAge = 45*time.Minute, model.DeadlineExpire, 30*time.Minute
		}, 45 * time.Minute, model.DeadlineExpire, 30 * time.Minute},
		{"MaxEventAgeAlone", func(s *model.Schedule) { s.MaxEventAge = 2 * time.Hour }, 0, "", 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openEmbedded(t)
			clk := newClock(utc("2025-06-02T10:00:30Z"))
			e := newEmitter(t, st, clk, nil)
			s := sched("dl", "*/5 * * * *", "UTC", 2, tc.set)
			create(t, st, s)
			runPass(t, e)
			fs := firesOf(t, st, s.ID)
			if len(fs) != 1 {
				t.Fatalf("fires = %v, want 1", fireTimes(fs))
			}
			f := fs[0]
			want := func(d time.Duration) *time.Time {
				if d == 0 {
					return nil
				}
				at := f.FireTime.Add(d)
				return &at
			}
			same := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
			if !same(f.Deadline, want(tc.deadline)) || f.OnDeadline != tc.on {
				t.Fatalf("fire deadline %v %q, want %v %q", f.Deadline, f.OnDeadline, want(tc.deadline), tc.on)
			}
			for _, ev := range eventsOf(t, st, f.ID) {
				if tc.deadline > 0 && !same(ev.Deadline, f.Deadline) {
					t.Errorf("event %s: deadline %v, want the fire's %v", ev.ID, ev.Deadline, f.Deadline)
				}
				if !same(ev.ExpireAt, want(tc.expireAfter)) {
					t.Errorf("event %s: expireAt %v, want %v", ev.ID, ev.ExpireAt, want(tc.expireAfter))
				}
			}
		})
	}
}
