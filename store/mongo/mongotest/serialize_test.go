package mongotest

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// casRace runs compare-and-set increments of one counter from several
// clients at once (each its own connection pool, as separate processes
// would have) and returns the counter and how many CAS writes succeeded.
// With atomic conditional writes the two are equal.
func casRace(t *testing.T, uri string) (counter, wins int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const clients, perClient = 6, 30
	colls := make([]*mongo.Collection, clients)
	for i := range colls {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
		colls[i] = c.Database("casrace").Collection("counters")
	}
	if _, err := colls[0].InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "v", Value: int64(0)}}); err != nil {
		t.Fatal(err)
	}
	var won atomic.Int64
	var wg sync.WaitGroup
	for _, coll := range colls {
		wg.Go(func() {
			for range perClient {
				var d struct {
					V int64 `bson:"v"`
				}
				if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&d); err != nil {
					t.Error(err)
					return
				}
				res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "v", Value: d.V}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: d.V + 1}}}})
				if err != nil {
					t.Error(err)
					return
				}
				won.Add(res.ModifiedCount)
			}
		})
	}
	wg.Wait()
	var d struct {
		V int64 `bson:"v"`
	}
	if err := colls[0].FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d.V, won.Load()
}

// TestSerializeWrites: through the proxy, every successful compare-and-set
// is one increment (none lost), as on MongoDB. FerretDB alone loses some:
// two clients both read v, both match {v: n} and both write n+1.
func TestSerializeWrites(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.DiscardHandler)
	uri, stop, err := StartConfig(t.Context(), Config{Dir: t.TempDir(), Logger: quiet, SerializeWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	counter, wins := casRace(t, uri)
	if counter != wins {
		t.Fatalf("through the proxy: counter %d after %d successful compare-and-sets: updates were lost", counter, wins)
	}
	t.Logf("through the proxy: %d successful compare-and-sets, counter %d", wins, counter)

	// The same race on FerretDB without the proxy, for the record (how
	// many are lost depends on timing, so it is not asserted).
	direct, stop2, err := StartConfig(t.Context(), Config{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop2)
	c2, w2 := casRace(t, direct)
	t.Logf("FerretDB alone: %d successful compare-and-sets, counter %d (%d lost)", w2, c2, w2-c2)
}
