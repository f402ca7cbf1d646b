package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// TestChaosKillDuplicates measures the duplicates that SIGKILLs leave at
// throughput: one instance on the embedded store delivers 20,000 events of
// one policy (maxInFlight 50) to a consumer that works on each for about
// 20 ms and releases it, and is killed (and restarted at once) 5 times
// while it does. Every duplicate must be explained by a kill, and at most
// 0.1% of the events may be delivered more than once. It runs with
// CHAOS_LONG=1 only: the fires take a minute or more on two cores.
func TestChaosKillDuplicates(t *testing.T) {
	skipShort(t)
	if !long() {
		t.Skip("CHAOS_LONG=1 runs it")
	}
	const fires, perFire, kills = 4, 5000, 5
	rng := rand.New(rand.NewPCG(seed(t), 3))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	in := startInstance(t, instanceOpts{id: "solo", dataDir: filepath.Join(t.TempDir(), "data")})
	d := newDeployment(t, ctx, []*instance{in}, chaoskit.RecorderConfig{Latency: 20 * time.Millisecond, Seed: rng.Uint64()})
	p := d.policy(ctx, "p", 50, 45*time.Second)
	t0 := time.Now().Add(5 * time.Second)
	for i := range fires {
		if err := d.oneOff(ctx, fmt.Sprintf("burst-%d", i), t0, perFire, p, 25); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("created %d one-off schedules, %d events, due at %s", fires, d.expectedCount(), t0.Format("15:04:05.000"))
	time.Sleep(time.Until(t0))
	for k := range kills {
		// Each kill lands while events are being delivered: after a share
		// of them (and a random few more) reached the consumer.
		next := (k+1)*fires*perFire/(kills+1) + rng.IntN(500)
		for d.rec.Counter("accepted") < next {
			time.Sleep(20 * time.Millisecond) // polling the consumer's count
		}
		killedAt := time.Now()
		in.kill()
		down := 200*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond)))
		t.Logf("kill %d/%d after %d accepted, down for %v", k+1, kills, d.rec.Counter("accepted"), down.Round(time.Millisecond))
		time.Sleep(down)
		in.start()
		d.disrupted(in.base, killedAt, time.Now())
	}
	r := d.drain(ctx, 5*time.Minute)
	d.assert(r, checks{dupGoal: true})
}
