package emitter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// planOne plans the create of s alone (PlanCreates of one): the fires to
// write with it (nil: none planned) and done for the write's error.
func planOne(ctx context.Context, e *emitter.Emitter, s *model.Schedule) ([]store.FireNew, func(context.Context, error) error, error) {
	fires, done, err := e.PlanCreates(ctx, []*model.Schedule{s}, [][]cron.Key{nil})
	if err != nil {
		return nil, nil, err
	}
	return fires[0], func(ctx context.Context, werr error) error {
		return done(ctx, []error{werr}, []*model.Schedule{nil})
	}, nil
}

// oneOff builds an active one-off schedule running at runAt.
func oneOff(id string, runAt time.Time, n int) *model.Schedule {
	return sched(id, "", "UTC", n, func(s *model.Schedule) {
		s.Cron, s.RunAt, s.Misfire = "", &runAt, model.MisfireFireAll
		s.Window, s.Spread = time.Minute, true
	})
}

// TestPlanCreatesMatchesSaved writes one-offs with the fires PlanCreates
// plans into one store, and the same one-offs followed by Saved into
// another: the fires and events must agree (ids, decisions, notes, launch
// times), so that a later Saved or pass finds the planned ones recorded.
func TestPlanCreatesMatchesSaved(t *testing.T) {
	now := utc("2025-06-02T10:00:30Z")
	for _, tc := range []struct {
		name  string
		runAt time.Time
		count int
		want  model.FireDecision
	}{
		{"Future", now.Add(90*time.Minute + 1500*time.Microsecond), 3, model.FireEmitted},
		{"Past", now.Add(-5 * time.Minute), 3, model.FireLate},
		{"FutureOneEvent", now.Add(90*time.Minute + 1500*time.Microsecond), 1, model.FireEmitted},
		{"PastOneEvent", now.Add(-5 * time.Minute), 1, model.FireLate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planned, saved := openEmbedded(t), openEmbedded(t)
			clk := newClock(now)
			ep, es := newEmitter(t, planned, clk, nil), newEmitter(t, saved, clk, nil)
			ctx := context.Background()

			s := oneOff("o1", tc.runAt, tc.count)
			s.Jitter = 10 * time.Minute
			fs, done, err := planOne(ctx, ep, s)
			if err != nil || len(fs) != 1 {
				t.Fatalf("PlanCreates: %d fires, err %v; want one fire planned", len(fs), err)
			}
			err = storetest.CreateSchedule(ctx, planned, s, nil, fs...)
			if derr := done(ctx, err); err != nil || derr != nil {
				t.Fatalf("create: %v, done: %v", err, derr)
			}
			s2 := oneOff("o1", tc.runAt, tc.count)
			s2.Jitter = s.Jitter
			create(t, saved, s2)
			if err := es.Saved(ctx, s2, nil); err != nil {
				t.Fatal(err)
			}

			pf, sf := firesOf(t, planned, "o1"), firesOf(t, saved, "o1")
			if len(pf) != 1 || len(sf) != 1 {
				t.Fatalf("%d planned fires, %d saved fires; want one each", len(pf), len(sf))
			}
			a, b := pf[0], sf[0]
			if a.ID != b.ID || !a.FireTime.Equal(b.FireTime) || a.LocalTime != b.LocalTime || a.Count != b.Count ||
				a.Decision != b.Decision || a.Note != b.Note || a.Remaining != b.Remaining || !a.CreatedAt.Equal(b.CreatedAt) ||
				a.Jitter != b.Jitter {
				t.Fatalf("planned fire %+v, saved fire %+v", a, b)
			}
			if want := model.JitterOffset("o1", a.FireTime, s.Jitter); a.Jitter != want || want == 0 {
				t.Fatalf("jitter %v, want %v (not 0)", a.Jitter, want)
			}
			if a.Decision != tc.want {
				t.Fatalf("decision %s, want %s", a.Decision, tc.want)
			}
			pe, se := eventsOf(t, planned, a.ID), eventsOf(t, saved, b.ID)
			if len(pe) != tc.count || len(se) != tc.count {
				t.Fatalf("%d planned events, %d saved events; want %d each", len(pe), len(se), tc.count)
			}
			for i := range pe {
				x, y := pe[i], se[i]
				if x.ID != y.ID || !x.LaunchAt.Equal(y.LaunchAt) || !x.Deadline.Equal(*y.Deadline) || x.Shard != y.Shard ||
					x.Index != y.Index || x.Status != y.Status || string(x.Payload) != string(y.Payload) {
					t.Fatalf("planned event %+v, saved event %+v", x, y)
				}
			}

			// Saved after the planned create adds nothing.
			if err := ep.Saved(ctx, s, nil); err != nil {
				t.Fatal(err)
			}
			if got := len(firesOf(t, planned, "o1")); got != 1 {
				t.Fatalf("%d fires after Saved, want 1", got)
			}
			if got := len(eventsOf(t, planned, a.ID)); got != tc.count {
				t.Fatalf("%d events after Saved, want %d", got, tc.count)
			}
		})
	}
}

// TestPlanCreatesQuota checks that a planned fire takes room in the
// tenant's per-minute quota, that a failed write gives it back, and that a
// fire the quota defers is left to Saved.
func TestPlanCreatesQuota(t *testing.T) {
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, openEmbedded(t), clk, func(_ *emitter.Config, d *emitter.Deps) { d.Quotas = fixedQuotas(5) })
	ctx := context.Background()
	runAt := clk.Now().Add(time.Hour)

	fs, done, err := planOne(ctx, e, oneOff("a", runAt, 3))
	if err != nil || fs == nil {
		t.Fatalf("first plan: %d fires, err %v", len(fs), err)
	}
	_ = done(ctx, errors.New("write failed"))

	fs, done, err = planOne(ctx, e, oneOff("b", runAt, 3))
	if err != nil || fs == nil {
		t.Fatalf("plan after a failed write: %d fires, err %v; want planned (room given back)", len(fs), err)
	}
	if err := done(ctx, nil); err != nil {
		t.Fatal(err)
	}

	fs, _, err = planOne(ctx, e, oneOff("c", runAt, 3))
	if err != nil || fs != nil {
		t.Fatalf("plan over the quota: %d fires, err %v; want left to Saved", len(fs), err)
	}
}

// TestPlanCreatesLeavesCronToSaved: a cron schedule's fires depend on the
// partition's watermark, so they are not planned.
func TestPlanCreatesLeavesCronToSaved(t *testing.T) {
	e := newEmitter(t, openEmbedded(t), newClock(utc("2025-06-02T10:00:30Z")), nil)
	fs, _, err := planOne(context.Background(), e, sched("c", "* * * * *", "UTC", 1))
	if err != nil || fs != nil {
		t.Fatalf("cron plan: %d fires, err %v; want none", len(fs), err)
	}
}

// TestPlanCreatesLocalTimes plans one-offs whose timezones and runAt
// alternate and repeat: each fire's local time is its own.
func TestPlanCreatesLocalTimes(t *testing.T) {
	now := utc("2025-06-02T10:00:30Z")
	e := newEmitter(t, openEmbedded(t), newClock(now), nil)
	t1, t2 := utc("2025-06-02T11:30:30Z"), utc("2025-06-02T11:30:30.5Z")
	for i, c := range []struct {
		tz   string
		at   time.Time
		want string
	}{
		{"UTC", t1, "2025-06-02T11:30:30Z"},
		{"UTC", t1, "2025-06-02T11:30:30Z"},
		{"Europe/Berlin", t1, "2025-06-02T13:30:30+02:00"},
		{"Europe/Berlin", t2, "2025-06-02T13:30:30.5+02:00"},
		{"America/New_York", t2, "2025-06-02T07:30:30.5-04:00"},
		{"UTC", t1, "2025-06-02T11:30:30Z"},
		{"UTC", t1.In(time.FixedZone("x", 3600)), "2025-06-02T11:30:30Z"},
	} {
		s := oneOff(fmt.Sprintf("o%d", i), c.at, 1)
		s.Timezone = c.tz
		fs, _, err := planOne(t.Context(), e, s)
		if err != nil || len(fs) != 1 {
			t.Fatalf("plan %d: %d fires, %v", i, len(fs), err)
		}
		if got := fs[0].Fire.LocalTime; got != c.want {
			t.Errorf("plan %d (%s at %s): local time %q, want %q", i, c.tz, c.at, got, c.want)
		}
	}
}

// TestPlanCreatesMadeWithSchedule checks the creation times of what
// PlanCreates plans: the fire and its events are written in the
// schedule's commit and are made when the schedule is; a schedule stamped
// after the clock's now (a clock set back) takes now.
func TestPlanCreatesMadeWithSchedule(t *testing.T) {
	now := utc("2025-06-02T10:00:30Z")
	for _, tc := range []struct {
		name    string
		created time.Time
		want    time.Time
	}{
		{"Before", now.Add(-3 * time.Millisecond), now.Add(-3 * time.Millisecond)},
		{"After", now.Add(time.Second), now},
		{"Unset", time.Time{}, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEmitter(t, openEmbedded(t), newClock(now), nil)
			s := oneOff("o1", now.Add(time.Hour), 2)
			s.CreatedAt = tc.created
			fs, _, err := planOne(context.Background(), e, s)
			if err != nil || len(fs) != 1 {
				t.Fatalf("PlanCreates: %d fires, err %v; want one fire planned", len(fs), err)
			}
			if got := fs[0].Fire.CreatedAt; !got.Equal(tc.want) {
				t.Errorf("fire made at %v, want %v", got, tc.want)
			}
			if len(fs[0].Events) != 2 {
				t.Fatalf("%d events, want 2", len(fs[0].Events))
			}
			for _, ev := range fs[0].Events {
				if !ev.CreatedAt.Equal(tc.want) || !ev.UpdatedAt.Equal(tc.want) {
					t.Errorf("event %s made at %v, updated %v; want %v", ev.ID, ev.CreatedAt, ev.UpdatedAt, tc.want)
				}
			}
		})
	}
}

// TestReleaseTokensOfTheStore checks Deps.ReleaseToken: every new event
// takes its token from it, and the store gives each back with its event;
// without it tokens are random (32 hex digits), never the store's.
func TestReleaseTokensOfTheStore(t *testing.T) {
	now := utc("2025-06-02T10:00:30Z")
	for _, derived := range []bool{true, false} {
		st := openEmbedded(t)
		tokens := st.(*embedded.Store).ReleaseToken
		e := newEmitter(t, st, newClock(now), func(_ *emitter.Config, d *emitter.Deps) {
			if derived {
				d.ReleaseToken = tokens
			}
		})
		ctx := context.Background()
		for _, n := range []int{1, 3} {
			s := oneOff(fmt.Sprintf("o%d", n), now.Add(time.Hour), n)
			fs, done, err := planOne(ctx, e, s)
			if err != nil || len(fs) != 1 {
				t.Fatalf("PlanCreates: %d fires, %v", len(fs), err)
			}
			err = storetest.CreateSchedule(ctx, st, s, nil, fs...)
			if derr := done(ctx, err); err != nil || derr != nil {
				t.Fatalf("create: %v, done: %v", err, derr)
			}
			got := eventsOf(t, st, fs[0].Fire.ID)
			if len(got) != n {
				t.Fatalf("%d events stored, want %d", len(got), n)
			}
			seen := map[string]bool{}
			for i, ev := range got {
				if ev.ReleaseToken != fs[0].Events[i].ReleaseToken || len(ev.ReleaseToken) != 32 || seen[ev.ReleaseToken] {
					t.Fatalf("event %s: token %q stored, %q planned (or repeated)", ev.ID, ev.ReleaseToken, fs[0].Events[i].ReleaseToken)
				}
				seen[ev.ReleaseToken] = true
				if (ev.ReleaseToken == tokens(ev.ID)) != derived {
					t.Errorf("derived %v: event %s has token %q, the store's is %q", derived, ev.ID, ev.ReleaseToken, tokens(ev.ID))
				}
			}
		}
	}
}
