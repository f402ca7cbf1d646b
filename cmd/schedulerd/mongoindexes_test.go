package main

import (
	"bytes"
	"context"
	"github.com/schedulerd/schedulerd/app"
	"strings"
	"testing"

	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// TestMongoIndexesCommand runs `schedulerd mongo-indexes` with the
// instances' environment on a new database: it builds the indexes (the
// claim's among them), says so, and builds nothing the second time.
func TestMongoIndexesCommand(t *testing.T) {
	t.Parallel()
	uri := mongotest.URI(t)
	env := map[string]string{
		"SCHEDULER_STORE": "mongo", "SCHEDULER_MONGO_URI": uri,
		"SCHEDULER_ADMIN_KEY": "sk_admin_0123456789abcdef", "SCHEDULER_SIGNING_SECRET": "0123456789abcdef0123",
	}
	var out bytes.Buffer
	if err := runWithBanner(t.Context(), []string{"mongo-indexes"}, func(k string) string { return env[k] }, &out, &out, app.Hooks{}); err != nil {
		t.Fatalf("mongo-indexes: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "building index events.fire_finished") || !strings.Contains(out.String(), "indexes up to date") {
		t.Fatalf("mongo-indexes said:\n%s", out.String())
	}
	client, err := driver.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	db := uri[strings.LastIndex(uri, "/")+1:]
	specs, err := client.Database(db).Collection("events").Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sp := range specs {
		found = found || sp.Name == "fire_finished"
	}
	if !found {
		t.Fatalf("events has no fire_finished index after mongo-indexes: %v", specs)
	}
	out.Reset()
	if err := runWithBanner(t.Context(), []string{"mongo-indexes"}, func(k string) string { return env[k] }, &out, &out, app.Hooks{}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "indexes up to date (0 built)\n" {
		t.Fatalf("second mongo-indexes said %q, want nothing built", got)
	}
}
