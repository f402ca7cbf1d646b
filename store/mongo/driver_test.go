package mongo_test

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
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
	got, err := s.TenantGet(ctx, "t1")
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
