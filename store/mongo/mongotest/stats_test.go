package mongotest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestShape(t *testing.T) {
	for _, c := range []struct {
		msg  []byte
		want string
	}{
		{opMsgOf(t, bson.D{{Key: "find", Value: "events"}, {Key: "filter", Value: bson.D{
			{Key: "status", Value: "scheduled"}, {Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a"}}}}}}}, ""),
			"find events {_id:$in,status}"},
		{opMsgOf(t, bson.D{{Key: "update", Value: "events"}}, "updates",
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "e1"}, {Key: "fence", Value: 3}}}},
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "e2"}}}}),
			"update events {_id,fence} x2-10"},
		{opMsgOf(t, bson.D{{Key: "count", Value: "events"}, {Key: "query", Value: bson.D{{Key: "policyId", Value: "p"}}}}, ""),
			"count events {policyId}"},
		{opMsgOf(t, bson.D{{Key: "aggregate", Value: "events"}, {Key: "pipeline", Value: bson.A{
			bson.D{{Key: "$match", Value: bson.D{{Key: "policyId", Value: "p"}}}}}}}, ""),
			"aggregate events {policyId}"},
		{opMsgOf(t, bson.D{{Key: "insert", Value: "events"}}, "documents", bson.D{{Key: "_id", Value: "x"}}),
			"insert events x1"},
		{opMsgOf(t, bson.D{{Key: "getMore", Value: int64(7)}, {Key: "collection", Value: "events"}}, ""),
			"getMore events"},
		{[]byte("0123456789abcdef"), "legacy"},
	} {
		if got := shape(c.msg); got != c.want {
			t.Errorf("shape = %q, want %q", got, c.want)
		}
	}
}

func TestStatsReport(t *testing.T) {
	var s cmdStats
	s.add("find events {status}", 30*time.Millisecond, 0)
	s.add("find events {status}", 10*time.Millisecond, 0)
	s.add("update policies {_id} x1", 50*time.Millisecond, 20*time.Millisecond)
	s.add("count events {policyId}", time.Millisecond, 0)
	var b strings.Builder
	s.report(&b, time.Second, 2)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "4 commands") {
		t.Fatalf("report:\n%s", b.String())
	}
	// Costliest first, the top two only: the update (50 ms), then the finds (40 ms, mean 20).
	if !strings.HasSuffix(lines[1], "update policies {_id} x1") || !strings.Contains(lines[1], "(max    20ms)") ||
		!strings.HasSuffix(lines[2], "find events {status}") || !strings.Contains(lines[2], "mean   20.0ms") {
		t.Fatalf("report:\n%s", b.String())
	}
	var again strings.Builder
	s.report(&again, time.Second, 2)
	if !strings.Contains(again.String(), " 0 commands") {
		t.Fatalf("a report does not start a new interval:\n%s", again.String())
	}
}

// reports collects the proxy's stats reports and signals each one.
type reports struct {
	mu  sync.Mutex
	all []string
	got chan struct{}
}

func (r *reports) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.all = append(r.all, string(p))
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
	return len(p), nil
}

// TestProxyStats runs commands through the proxy and waits for a report
// that names them by shape.
func TestProxyStats(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB")
	}
	ctx := t.Context()
	r := &reports{got: make(chan struct{}, 1)}
	uri, stop, err := StartConfig(ctx, Config{Dir: t.TempDir(), SerializeWrites: true, Stats: r, StatsEvery: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	coll := c.Database("stats").Collection("events")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "e1"}, {Key: "status", Value: "pending"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "e1"}, {Key: "status", Value: "pending"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "scheduled"}}}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"insert events x1", "update events {_id,status} x1"}
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		all := strings.Join(r.all, "")
		r.mu.Unlock()
		missing := 0
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("no report names %q after 30 s:\n%s", want, all)
		}
	}
}
