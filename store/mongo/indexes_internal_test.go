package mongo

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// TestTTLIndexReplaced checks how a full TTL index of an earlier version
// gives way to the partial one: the job that builds the new index names
// the old one, and the build drops it first (MongoDB 4.4 refuses two
// indexes on the same keys). FerretDB has no TTL indexes, so the old one is
// a plain index of the same name and the create that follows fails there.
func TestTTLIndexReplaced(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := open(ctx, mongotest.URI(t), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if !s.caps.ttl {
		if _, err := s.events.Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: fieldFinishedDate, Value: 1}}, Options: options.Index().SetName("finished_ttl"),
		}); err != nil {
			t.Fatal(err)
		}
		s.caps.ttl = true
	}
	jobs, err := s.missingIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var job *indexJob
	for i := range jobs {
		if jobs[i].String() == "events.finished_partial_ttl" {
			job = &jobs[i]
		}
	}
	if job == nil || job.replaces != "finished_ttl" {
		t.Fatalf("jobs %v: want events.finished_partial_ttl replacing finished_ttl", jobs)
	}
	_ = s.createIndex(ctx, *job) // FerretDB refuses the TTL index itself
	specs, err := s.events.Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if sp.Name == "finished_ttl" {
			t.Fatal("the full TTL index was not dropped before its partial successor was built")
		}
	}
}
