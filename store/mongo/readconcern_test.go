package mongo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// TestReconcileReadsMajority checks the read concern of the throttle
// reconciliation's reads (the policy, the token holders' count and ids):
// majority on MongoDB, so that an overwrite of InUse never rests on writes
// a partitioned primary rolls back; none on FerretDB, which has no other.
func TestReconcileReadsMajority(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	levels := map[string]string{} // command on collection → read concern level
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		switch e.CommandName {
		case "find", "aggregate", "count":
		default:
			return
		}
		coll, _ := e.Command.Lookup(e.CommandName).StringValueOK()
		level, _ := e.Command.Lookup("readConcern", "level").StringValueOK()
		mu.Lock()
		levels[e.CommandName+" "+coll] = level
		mu.Unlock()
	}}
	s, err := mongo.OpenMonitored(t.Context(), mongotest.URI(t), mongo.Options{}, mon)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	p := &model.Policy{ID: "p1", TenantID: "t1", Name: "p1", MaxInFlight: 5, TokenTimeout: time.Minute, Version: 1}
	if err := s.PolicyCreate(ctx, p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clear(levels)
	mu.Unlock()
	if _, err := s.PolicyGetByID(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventCountHoldingTokens(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventFindTokenExpired(ctx, "p1", time.Now(), 10); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "majority"
	if !s.RetentionByTTL() { // FerretDB
		want = ""
	}
	for _, cmd := range []string{"find policies", "aggregate events", "find events"} {
		if got, ok := levels[cmd]; !ok || got != want {
			t.Errorf("%s: read concern %q (sent %v), want %q; all: %v", cmd, got, ok, want, levels)
		}
	}
	if want == "" {
		t.Skipf("read concern majority needs a real MongoDB: set %s (FerretDB gets none, checked)", mongotest.EnvURI)
	}
}
