package schedule_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// TestJitterNeverReorders compiles random cron schedules with a random
// jitter over a few weeks (endAt), around DST changes half of the time,
// and checks Compile against an oracle: it accepts the jitter exactly when
// every gap between neighbouring fires (listed one by one) is longer, and
// then every fire's launch is in [fire, fire+jitter) and before the next
// fire's, for any schedule id.
func TestJitterNeverReorders(t *testing.T) {
	s := testseed.Get(t, "SCHEDULE_JITTER_SEED", 20261202)
	r := rand.New(rand.NewPCG(s, 7))
	lim := testLimits()
	lim.MaxChildren = 1 << 20
	jitters := []time.Duration{time.Second, 59 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute,
		time.Hour, 90 * time.Minute, 23 * time.Hour, 24 * time.Hour}
	n := 300
	if testing.Short() {
		n = 60
	}
	accepted := 0
	for i := range n {
		sp := randomSpec(r)
		if sp.Cron == nil && sp.Fields == nil || sp.RunAt != nil {
			continue
		}
		now := randomWindowStart(r)
		sp.Name, sp.EventCount, sp.Window, sp.Spread, sp.Priority = "j", 1, "", false, 0
		sp.StartAt, sp.EndAt = nil, ptr(now.Add(time.Duration(1+r.IntN(40*24))*time.Hour))
		base, err := schedule.Compile(sp, lim, now)
		if err != nil {
			continue // broken in another field
		}
		j := jitters[r.IntN(len(jitters))]
		sp.Jitter = j.String()
		c, err := schedule.Compile(sp, lim, now)

		fires := cron.NextFireTimes(base.Expr, base.Loc, now, 1_000_000)
		for len(fires) > 0 && fires[len(fires)-1].After(*sp.EndAt) {
			fires = fires[:len(fires)-1]
		}
		var gap time.Duration
		for k := 1; k < len(fires); k++ {
			if d := fires[k].Sub(fires[k-1]); gap == 0 || d < gap {
				gap = d
			}
		}
		desc := fmt.Sprintf("seed %d case %d: %s in %s from %v to %v, jitter %v (oracle gap %v)",
			s, i, base.Schedule.Cron, sp.Timezone, now, *sp.EndAt, j, gap)
		if wantOK := gap == 0 || j < gap; wantOK != (err == nil) {
			t.Fatalf("%s: Compile says %v", desc, err)
		}
		if err != nil {
			continue
		}
		accepted++
		id := fmt.Sprintf("sch_%d", r.Uint64())
		for k, f := range fires {
			off := model.JitterOffset(id, f, c.Schedule.Jitter)
			if off < 0 || off >= j {
				t.Fatalf("%s: offset %v of %v out of [0, %v)", desc, off, f, j)
			}
			if k+1 < len(fires) && !f.Add(off).Before(fires[k+1]) {
				t.Fatalf("%s: fire %v launches at %v, not before the next fire %v", desc, f, f.Add(off), fires[k+1])
			}
		}
	}
	t.Logf("%d schedules accepted with jitter", accepted)
	if accepted < n/10 {
		t.Fatalf("only %d schedules accepted: the test checks too little", accepted)
	}
}
