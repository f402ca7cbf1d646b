package mongotest

import (
	"context"
	"encoding/binary"
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

// opMsgOf builds an OP_MSG with body and one document sequence.
func opMsgOf(t *testing.T, body bson.D, seqID string, seq ...bson.D) []byte {
	t.Helper()
	raw := func(d bson.D) []byte {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	msg := make([]byte, 16, 256)
	binary.LittleEndian.PutUint32(msg[12:16], opMsg)
	msg = append(msg, 0, 0, 0, 0) // flags
	msg = append(msg, 0)
	msg = append(msg, raw(body)...)
	if seqID != "" {
		var docs []byte
		for _, d := range seq {
			docs = append(docs, raw(d)...)
		}
		size := 4 + len(seqID) + 1 + len(docs)
		msg = append(msg, 1)
		msg = binary.LittleEndian.AppendUint32(msg, uint32(size))
		msg = append(msg, seqID...)
		msg = append(msg, 0)
		msg = append(msg, docs...)
	}
	binary.LittleEndian.PutUint32(msg[0:4], uint32(len(msg)))
	return msg
}

func TestClassify(t *testing.T) {
	byID := opMsgOf(t, bson.D{{Key: "update", Value: "events"}, {Key: "ordered", Value: false}}, "updates",
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "e1"}, {Key: "status", Value: "scheduled"}}}},
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "e2"}}}})
	w, ok := classify(byID)
	if !ok || w.coll != "events" || len(w.ids) != 2 {
		t.Fatalf("update by _id: %+v %v, want events with 2 ids", w, ok)
	}
	many := opMsgOf(t, bson.D{{Key: "update", Value: "events"}, {Key: "updates", Value: bson.A{
		bson.D{{Key: "q", Value: bson.D{{Key: "status", Value: "pending"}}}}}}}, "")
	if w, ok := classify(many); !ok || w.ids != nil {
		t.Fatalf("update without _id: %+v %v, want the whole collection", w, ok)
	}
	in := opMsgOf(t, bson.D{{Key: "delete", Value: "events"}}, "deletes",
		bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}}}}})
	if w, ok := classify(in); !ok || w.ids != nil {
		t.Fatalf("delete with $in: %+v %v, want the whole collection", w, ok)
	}
	fam := opMsgOf(t, bson.D{{Key: "findAndModify", Value: "leases"}, {Key: "query", Value: bson.D{{Key: "_id", Value: "handler/unit/1"}}}}, "")
	if w, ok := classify(fam); !ok || w.coll != "leases" || len(w.ids) != 1 {
		t.Fatalf("findAndModify: %+v %v", w, ok)
	}
	for _, read := range [][]byte{
		opMsgOf(t, bson.D{{Key: "find", Value: "events"}}, ""),
		opMsgOf(t, bson.D{{Key: "insert", Value: "events"}}, "documents", bson.D{{Key: "_id", Value: "x"}}),
	} {
		if w, ok := classify(read); ok {
			t.Fatalf("classified %+v as a write to lock", w)
		}
	}
	if _, _, err := sections([]byte{0, 3, 0}); err == nil {
		t.Fatal("a truncated section parsed")
	}
}
