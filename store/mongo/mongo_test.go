package mongo_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// newStore opens a driver on a fresh database of its own (see mongotest.URI):
// the embedded FerretDB, or the server SCHEDULER_TEST_MONGO_URI names.
func newStore(t testing.TB) *mongo.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// FerretDB on SQLite writes the documents of an update one by one, up
	// to ~200 ms each under the race detector on a busy machine: a claim of
	// 1,500 events outlasts the default operation timeout there.
	// The suite passes instants of a fixed date and compares them to the
	// nanosecond: expiries are judged by them, not by a server's clock.
	s, err := mongo.Open(ctx, mongotest.URI(t), mongo.Options{OperationTimeout: 10 * time.Minute, ClientClock: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Driver { return newStore(t) })
}
