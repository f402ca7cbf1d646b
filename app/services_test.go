package app

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/finish"
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
	type noFinishStore struct{ finish.Store }
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
	fin, err := finish.New(finish.Config{}, finish.Deps{Store: noFinishStore{}})
	if err != nil {
		t.Fatal(err)
	}
	a := &App{emitter: em, partitions: bal("emitter"), shards: bal("handler"), finishing: finish.NewService(fin)}
	a.resumer = (&master.Server{}).NewResumer(0)
	a.deadlines = master.NewDeadlineChecker(nil, nil, nil, zerolog.Nop(), 0)
	got := a.services()
	if len(got) != 8 {
		t.Fatalf("%d services, want 8 (resumer, finisher, deadlines, emitter, handler, throttle, partitions, shards)", len(got))
	}
	if got[0].Service != a.resumer {
		t.Errorf("first to stop is %T, want the resumer", got[0].Service)
	}
	// The finisher emits dependents' fires through the emitter.
	if got[1].Service != a.finishing {
		t.Errorf("second to stop is %T, want the finisher", got[1].Service)
	}
	if got[2].Service != a.deadlines {
		t.Errorf("third to stop is %T, want the deadline checker", got[2].Service)
	}
	got = got[3:]
	if got[0].Service != em {
		t.Errorf("third to stop is %T, want the emitter", got[0].Service)
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
