package app

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/lease"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/throttle"
)

// The stop order matters: the emitter stops writing events before the
// handler drains, and the leases go back only after both.
func TestServicesStopOrder(t *testing.T) {
	type noLeaseStore struct{ lease.Store }
	type noEmitterStore struct{ emitter.Store }
	bal := func(group string) *lease.Balancer {
		b, err := lease.New(lease.Config{Group: group, Units: 1, Owner: "a"}, lease.Deps{Store: noLeaseStore{}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	em, err := emitter.New(emitter.Config{Owner: "a"}, emitter.Deps{Store: noEmitterStore{}})
	if err != nil {
		t.Fatal(err)
	}
	a := &App{emitter: em, partitions: bal("emitter"), shards: bal("handler")}
	a.resumer = (&master.Server{}).NewResumer(0)
	a.deadlines = master.NewDeadlineChecker(nil, nil, nil, zerolog.Nop(), 0)
	got := a.services()
	if len(got) != 7 {
		t.Fatalf("%d services, want 7 (resumer, deadlines, emitter, handler, throttle, partitions, shards)", len(got))
	}
	if got[0].Service != a.resumer {
		t.Errorf("first to stop is %T, want the resumer", got[0].Service)
	}
	if got[1].Service != a.deadlines {
		t.Errorf("second to stop is %T, want the deadline checker", got[1].Service)
	}
	got = got[2:]
	if got[0].Service != em {
		t.Errorf("second to stop is %T, want the emitter", got[0].Service)
	}
	if _, ok := got[1].Service.(*handler.Handler); !ok {
		t.Errorf("third to stop is %T, want the handler", got[1].Service)
	}
	if _, ok := got[2].Service.(*throttle.Throttle); !ok {
		t.Errorf("fourth to stop is %T, want the throttle", got[2].Service)
	}
	if got[3].Service != a.partitions || got[4].Service != a.shards {
		t.Errorf("the lease groups must stop last, partitions then shards")
	}
}
