package emitter_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
)

// TestResumedGapFollowsTheMisfireOracle resumes schedules whose pause
// ended at resumeAt while nobody resumed them until now, on and around DST
// changes, in zones with whole-hour and half-hour shifts. The oracle walks
// the real minutes of [resumeAt, now) with time.Time alone: the schedule
// ("M1,M2 * * * *", every real minute whose wall minute matches) fires in
// the gap's minutes that lie in windows already over (before now's
// minute), not older than the catch-up limit, as its misfire policy says
// (fire_all: each, late; fire_once: the latest, late; skip: none); nothing
// before resumeAt fires; the first fire from now's window on is emitted on
// time.
func TestResumedGapFollowsTheMisfireOracle(t *testing.T) {
	seed := testseed.Get(t, "EMITTER_RESUME_SEED", 20261202)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	changes := []struct {
		tz string
		at string // a DST change, UTC
	}{
		{"Europe/Berlin", "2027-03-28T01:00:00Z"},
		{"Europe/Berlin", "2027-10-31T01:00:00Z"},
		{"America/New_York", "2027-03-14T07:00:00Z"},
		{"America/New_York", "2027-11-07T06:00:00Z"},
		{"Australia/Lord_Howe", "2027-04-03T15:00:00Z"},
		{"Australia/Lord_Howe", "2027-10-02T15:30:00Z"},
	}
	policies := []model.MisfirePolicy{model.MisfireFireOnce, model.MisfireFireAll, model.MisfireSkip}
	st := openEmbedded(t)
	clk := newClock(utc(changes[0].at))
	e := newEmitter(t, st, clk, nil)
	const catchUp = time.Hour // the default CatchUpLimit
	for i := range 60 {
		ch := changes[rng.IntN(len(changes))]
		loc, err := time.LoadLocation(ch.tz)
		if err != nil {
			t.Fatal(err)
		}
		var mins []int
		for range 1 + rng.IntN(3) {
			if m := rng.IntN(60); !slices.Contains(mins, m) {
				mins = append(mins, m)
			}
		}
		slices.Sort(mins)
		var fields []string
		for _, m := range mins {
			fields = append(fields, strconv.Itoa(m))
		}
		policy := policies[rng.IntN(len(policies))]
		resumeAt := utc(ch.at).Add(time.Duration(rng.IntN(180)-90)*time.Minute + time.Duration(rng.IntN(60))*time.Second)
		now := resumeAt.Add(time.Duration(rng.IntN(100*60)) * time.Second) // up to 100 minutes: past the catch-up limit too
		id := "resume-" + strconv.Itoa(i)
		s := sched(id, strings.Join(fields, ",")+" * * * *", ch.tz, 1, func(s *model.Schedule) {
			s.Misfire, s.Version = policy, 2
		})
		create(t, st, s)
		setClock(clk, now)
		if err := e.Resumed(context.Background(), s, keysOf(t, s), resumeAt); err != nil {
			t.Fatalf("case %d: Resumed: %v", i, err)
		}

		// The oracle.
		lateEnd := now.Truncate(time.Minute)
		var gap []time.Time
		var next time.Time
		for m := resumeAt.Truncate(time.Minute); next.IsZero(); m = m.Add(time.Minute) {
			if m.Before(resumeAt) || !slices.Contains(mins, m.In(loc).Minute()) {
				continue
			}
			if !m.Before(lateEnd) {
				next = m
			} else if !m.Before(now.Add(-catchUp)) {
				gap = append(gap, m)
			}
		}
		var wantLate []time.Time
		switch {
		case len(gap) == 0, policy == model.MisfireSkip:
		case policy == model.MisfireFireAll:
			wantLate = gap
		default:
			wantLate = gap[len(gap)-1:]
		}
		var gotLate []time.Time
		nextDecision := model.FireDecision("none")
		for _, f := range firesOf(t, st, id) {
			switch {
			case f.FireTime.Before(lateEnd) && f.Decision == model.FireLate:
				gotLate = append(gotLate, f.FireTime.UTC())
			case f.FireTime.Before(lateEnd):
				t.Errorf("case %d: fire at %s before now's window with decision %s", i, f.FireTime, f.Decision)
			case f.FireTime.Equal(next):
				nextDecision = f.Decision
			}
		}
		what := func() string {
			return "case " + strconv.Itoa(i) + " (" + ch.tz + " " + s.Cron + " " + string(policy) + ", resumeAt " +
				resumeAt.In(loc).Format(time.RFC3339) + ", now " + now.In(loc).Format(time.RFC3339) + ")"
		}
		if !slices.EqualFunc(gotLate, wantLate, time.Time.Equal) {
			t.Errorf("%s: late fires %v, want %v", what(), gotLate, wantLate)
		}
		if next.Before(now.Add(2*time.Minute)) && nextDecision != model.FireEmitted {
			t.Errorf("%s: the fire at %s is %s, want emitted", what(), next, nextDecision)
		}
	}
}
