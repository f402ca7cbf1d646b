package app

import (
	"context"
	"testing"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/lease"
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
	got := a.services(context.Background())
	if len(got) != 4 {
		t.Fatalf("%d services, want 4 (emitter, handler, partitions, shards)", len(got))
	}
	if got[0] != em {
		t.Errorf("first to stop is %T, want the emitter", got[0])
	}
	if _, ok := got[1].(ctxStop); !ok {
		t.Errorf("second to stop is %T, want the handler", got[1])
	}
	if got[2] != a.partitions || got[3] != a.shards {
		t.Errorf("the lease groups must stop last, partitions then shards")
	}
}
