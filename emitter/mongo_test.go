package emitter_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/lease"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// Two emitter instances, each with its own connection and lease balancer,
// share one MongoDB-protocol store (FerretDB unless SCHEDULER_TEST_MONGO_URI
// names a server). They split the partitions, never emit a fire or an event
// twice and never miss one; when one dies (it stops without releasing its
// leases), the other takes its partitions once the leases expire under the
// fake clock, early enough that no fire is late.
func TestTwoInstancesOnMongo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB")
	}
	ctx := context.Background()
	uri := mongotest.URI(t)
	opened := 0
	open := func() store.Driver {
		// Only the first connection creates the indexes: FerretDB v1.24
		// panics when an existing index is created again (see the report).
		st, err := mongo.Open(ctx, uri, mongo.Options{SkipIndexes: opened > 0})
		opened++
		if err != nil {
			t.Fatalf("mongo open: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	start := utc("2025-06-02T10:00:10Z")
	clk := newClock(start)

	type instance struct {
		name  string
		bal   *lease.Balancer
		em    *emitter.Emitter
		owned map[int]bool // partitions ever held
	}
	mk := func(name string) *instance {
		st := open()
		bal, err := lease.New(lease.Config{Group: "emitter", Units: partitions, Owner: name,
			TTL: 30 * time.Second, Interval: 10 * time.Second}, lease.Deps{Store: st, Clock: clk, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		em := newEmitter(t, st, clk, func(c *emitter.Config, d *emitter.Deps) {
			c.Owner = name
			d.Partitions = bal
		})
		return &instance{name: name, bal: bal, em: em, owned: map[int]bool{}}
	}
	a, b := mk("a"), mk("b")
	began := time.Now()

	// One every-minute schedule per partition.
	var ids []string
	setup := open()
	covered := map[int]bool{}
	for i := 0; len(covered) < partitions; i++ {
		s := sched(fmt.Sprintf("s%d", i), "* * * * *", "UTC", 2)
		if covered[s.Partition] {
			continue
		}
		covered[s.Partition] = true
		ids = append(ids, s.ID)
		create(t, setup, s)
	}

	// step ticks the live instances' leases one after the other, then runs
	// their passes concurrently.
	step := func(live ...*instance) {
		t.Helper()
		for _, in := range live {
			if err := in.bal.Tick(ctx); err != nil {
				t.Fatalf("%s tick: %v", in.name, err)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, len(live))
		for i, in := range live {
			for p := range in.bal.Held() {
				in.owned[p] = true
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ps, err := in.em.RunPass(ctx)
				if err == nil && ps.FiresLate > 0 {
					err = fmt.Errorf("%d late fires", ps.FiresLate)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s pass at %s: %v", live[i].name, clk.Now().Format(time.TimeOnly), err)
			}
		}
	}

	// Steps of 20s: the balancers' TTL is 30s, their interval 10s.
	for range 9 { // both alive for three minutes
		step(a, b)
		clk.Advance(20 * time.Second)
	}
	if ha, hb := len(a.bal.Held()), len(b.bal.Held()); ha != partitions/2 || hb != partitions/2 {
		t.Fatalf("shares: a holds %d, b holds %d", ha, hb)
	}
	aHeld := a.bal.Held()

	// a dies: it neither renews nor releases its leases.
	for range 9 {
		step(b)
		clk.Advance(20 * time.Second)
	}
	if hb := len(b.bal.Held()); hb != partitions {
		t.Fatalf("after a died b holds %d partitions", hb)
	}
	for p := range aHeld {
		if !b.owned[p] {
			t.Fatalf("partition %d of the dead instance was not taken over", p)
		}
	}

	t.Logf("stepping took %s", time.Since(began))
	end := clk.Now()
	want := minutes(utc("2025-06-02T10:00:00Z"), time.Minute, int(end.Sub(utc("2025-06-02T10:00:00Z"))/time.Minute)+1)
	for _, id := range ids {
		var got []time.Time
		for _, f := range firesOf(t, setup, id) {
			if f.Decision != model.FireEmitted {
				t.Fatalf("%s decision %s", f.ID, f.Decision)
			}
			if n := len(eventsOf(t, setup, f.ID)); n != 2 {
				t.Fatalf("%s has %d events, want 2", f.ID, n)
			}
			if f.FireTime.After(start) && f.CreatedAt.After(f.FireTime) {
				t.Fatalf("%s emitted at %s, after its fire time", f.ID, f.CreatedAt)
			}
			if f.FireTime.Before(end) {
				got = append(got, f.FireTime.UTC())
			}
		}
		if !equalTimes(got, want) {
			t.Fatalf("%s fires = %v\nwant %v", id, got, want)
		}
	}
}
