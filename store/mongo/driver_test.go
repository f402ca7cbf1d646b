package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// The conformance suite covers the contract; these tests cover what only
// this driver has: opening, option checks and translating a lost server to
// model.ErrUnavailable.

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("UnreachableIsUnavailable", func(t *testing.T) {
		t.Parallel()
		addr := closedPort(t)
		_, err := mongo.Open(t.Context(), "mongodb://"+addr+"/?connect=direct", mongo.Options{
			ServerSelectionTimeout: 300 * time.Millisecond,
			ConnectTimeout:         300 * time.Millisecond,
		})
		if !errors.Is(err, model.ErrUnavailable) {
			t.Fatalf("Open of a closed port: got %v, want ErrUnavailable", err)
		}
	})

	t.Run("RejectsNegativeTimeout", func(t *testing.T) {
		t.Parallel()
		_, err := mongo.Open(t.Context(), "mongodb://127.0.0.1:1/", mongo.Options{OperationTimeout: -time.Second})
		if err == nil || !strings.Contains(err.Error(), "OperationTimeout") {
			t.Fatalf("Open with a negative timeout: got %v, want an error naming OperationTimeout", err)
		}
	})

	t.Run("RefusesWeakWriteConcern", func(t *testing.T) {
		t.Parallel()
		addr := closedPort(t)
		for _, q := range []string{"w=0", "w=1", "journal=false"} {
			_, err := mongo.Open(t.Context(), "mongodb://"+addr+"/?connect=direct&"+q, mongo.Options{})
			if err == nil || errors.Is(err, model.ErrUnavailable) || !strings.Contains(err.Error(), "AllowWeakWriteConcern") {
				t.Fatalf("Open with %s: got %v, want a refusal naming AllowWeakWriteConcern", q, err)
			}
		}
		// Allowed: Open goes on to connect (and finds nothing there).
		_, err := mongo.Open(t.Context(), "mongodb://"+addr+"/?connect=direct&w=1", mongo.Options{
			AllowWeakWriteConcern:  true,
			ServerSelectionTimeout: 300 * time.Millisecond,
			ConnectTimeout:         300 * time.Millisecond,
		})
		if !errors.Is(err, model.ErrUnavailable) {
			t.Fatalf("Open with w=1 allowed: got %v, want ErrUnavailable from the closed port", err)
		}
	})

	t.Run("RejectsBadURI", func(t *testing.T) {
		t.Parallel()
		if _, err := mongo.Open(t.Context(), "postgres://x", mongo.Options{}); err == nil {
			t.Fatal("Open of a non-mongodb URI: got nil error")
		}
	})

	t.Run("CloseTwice", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if err := s.Ping(t.Context()); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// TestServerRestart stops a private FerretDB under an open Store, checks
// that calls fail with ErrUnavailable, and restarts the server on the same
// address and directory: the Store reconnects by itself and the data is
// still there. This is the shape of the chaos tests' store outage.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()

	quiet := slog.New(slog.DiscardHandler)
	uri, stop, err := mongotest.StartConfig(ctx, mongotest.Config{Dir: dir, Logger: quiet})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(stop)
	addr := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")

	s, err := mongo.Open(ctx, uri, mongo.Options{
		Database:               "restart",
		ServerSelectionTimeout: 500 * time.Millisecond,
		ConnectTimeout:         500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.TenantCreate(ctx, &model.Tenant{ID: "t1", Name: "one", CreatedAt: time.Unix(1, 5).UTC()}); err != nil {
		t.Fatalf("TenantCreate: %v", err)
	}

	stop()
	if err := s.Ping(ctx); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("Ping with the server down: got %v, want ErrUnavailable", err)
	}
	if _, err := s.TenantGet(ctx, "t1"); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("TenantGet with the server down: got %v, want ErrUnavailable", err)
	}

	_, stop2, err := mongotest.StartConfig(ctx, mongotest.Config{Dir: dir, Addr: addr, Logger: quiet})
	if err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	t.Cleanup(stop2)
	// The driver finds the server again on its next heartbeat; the first
	// calls may still fail as unavailable (500 ms server selection), like a
	// caller's first retries would. Nothing signals the reconnect, so poll.
	var got *model.Tenant
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err = s.TenantGet(ctx, "t1")
		if err == nil || !errors.Is(err, model.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("TenantGet after restart: %v", err)
	}
	if got.Name != "one" || !got.CreatedAt.Equal(time.Unix(1, 5)) {
		t.Fatalf("TenantGet after restart: got %+v", got)
	}
}

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestClaimBacklog claims more due events at once than FerretDB v1 has
// backend connections (100 on SQLite, 50 on PostgreSQL). FerretDB takes one
// connection per statement of an update command until the command ends, so
// a claim sent as one bulk write of 150 statements waited for itself and
// wedged the server for every client; the driver sends it in chunks. A
// server of the test's own keeps a wedge from spreading to other tests.
func TestClaimBacklog(t *testing.T) {
	t.Parallel()
	const n = 150
	// FerretDB on SQLite takes up to ~150 ms per update under load (and
	// runs in this process, under the race detector in CI).
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var uri string
	if mongotest.IsRealMongo() {
		uri = mongotest.URI(t)
	} else {
		var stop func()
		var err error
		uri, stop, err = mongotest.StartConfig(ctx, mongotest.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(stop)
	}
	s, err := mongo.Open(ctx, uri, mongo.Options{Database: fmt.Sprintf("backlog_%d", time.Now().UnixNano())})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })

	now := time.Now().UTC().Truncate(time.Millisecond)
	evs := make([]*model.Event, n)
	for i := range evs {
		fire := model.FireID("backlog", 1, now)
		evs[i] = &model.Event{ID: model.EventID(fire, i), TenantID: "t1", ScheduleID: "backlog", FireID: fire,
			FireTime: now, Index: i, Count: n, LaunchAt: now.Add(-time.Minute), Shard: 0,
			Target: model.Target{Type: model.TargetHTTP, URL: "http://127.0.0.1:9/hook"}, MaxAttempts: 3,
			Status: model.EventPending, CreatedAt: now, UpdatedAt: now}
	}
	if _, err := s.EventInsertMany(ctx, evs); err != nil {
		t.Fatalf("EventInsertMany: %v", err)
	}
	got, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 0, Fence: 1, DueBefore: now, Limit: n})
	if err != nil {
		t.Fatalf("EventClaimDue of %d events: %v", n, err)
	}
	if len(got) != n {
		t.Fatalf("EventClaimDue claimed %d events, want %d", len(got), n)
	}
	// The server still answers other clients.
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the claim: %v", err)
	}
}
