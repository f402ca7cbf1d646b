package app

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/mongo"
)

func mongoEnv(m map[string]string) func(string) string {
	base := map[string]string{
		"SCHEDULER_STORE": "mongo", "SCHEDULER_MONGO_URI": "mongodb://127.0.0.1:1/?connect=direct",
		"SCHEDULER_ADMIN_KEY": "sk_admin_0123456789abcdef", "SCHEDULER_SIGNING_SECRET": "0123456789abcdef0123",
		"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0",
	}
	for k, v := range m {
		base[k] = v
	}
	return func(k string) string { return base[k] }
}

// TestMongoFlags checks that the MongoDB flags reach mongo.Options, with
// their defaults, and that bad values are refused naming the flag.
func TestMongoFlags(t *testing.T) {
	t.Parallel()
	t.Run("Defaults", func(t *testing.T) {
		c, err := ParseConfig(nil, mongoEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		got := mongoOptions(c)
		want := mongo.Options{ServerSelectionTimeout: 30 * time.Second, OperationTimeout: 60 * time.Second,
			EventRetention: 24 * time.Hour, IdempotencyRetention: 24 * time.Hour, AuditRetention: 90 * 24 * time.Hour, Owner: c.InstanceID}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("mongo options %+v, want %+v", got, want)
		}
	})
	t.Run("Set", func(t *testing.T) {
		c, err := ParseConfig([]string{"-mongo-allow-weak-write-concern", "-mongo-server-selection-timeout", "5s",
			"-mongo-operation-timeout", "2m", "-retention", "72h", "-mongo-database", "d1", "-instance-id", "i1", "-audit-retention", "720h"},
			mongoEnv(map[string]string{"SCHEDULER_IDEMPOTENCY_RETENTION": "90m"}))
		if err != nil {
			t.Fatal(err)
		}
		got := mongoOptions(c)
		want := mongo.Options{Database: "d1", AllowWeakWriteConcern: true, ServerSelectionTimeout: 5 * time.Second,
			OperationTimeout: 2 * time.Minute, EventRetention: 72 * time.Hour, IdempotencyRetention: 90 * time.Minute, AuditRetention: 720 * time.Hour, Owner: "i1"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("mongo options %+v, want %+v", got, want)
		}
	})
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"RejectsBadBool":               {env: map[string]string{"SCHEDULER_MONGO_ALLOW_WEAK_WRITE_CONCERN": "maybe"}, want: "mongo-allow-weak-write-concern:"},
		"RejectsZeroSelectionTimeout":  {args: []string{"-mongo-server-selection-timeout", "0s"}, want: "mongo-server-selection-timeout:"},
		"RejectsBadOperationTimeout":   {args: []string{"-mongo-operation-timeout", "soon"}, want: "mongo-operation-timeout:"},
		"RejectsZeroOperationTimeout":  {args: []string{"-mongo-operation-timeout", "0"}, want: "mongo-operation-timeout:"},
		"RejectsSubSecondRetention":    {args: []string{"-retention", "500ms"}, want: "retention:"},
		"RejectsRetentionBeyondTTL":    {args: []string{"-retention", "700000h"}, want: "retention:"},
		"RejectsZeroIdempotencyRetain": {env: map[string]string{"SCHEDULER_IDEMPOTENCY_RETENTION": "0s"}, want: "idempotency-retention:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(tc.args, mongoEnv(tc.env))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want one starting with %q", err, tc.want)
			}
		})
	}
}

// TestMongoWeakWriteConcernAtStart refuses a URI with a weak write concern
// at start, naming the flag that accepts it; with the flag, the start goes
// on to connect (and finds no server).
func TestMongoWeakWriteConcernAtStart(t *testing.T) {
	t.Parallel()
	env := mongoEnv(map[string]string{"SCHEDULER_MONGO_URI": "mongodb://127.0.0.1:1/?connect=direct&w=1",
		"SCHEDULER_MONGO_SERVER_SELECTION_TIMEOUT": "200ms"})
	c, err := ParseConfig(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(t.Context(), c, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "-mongo-allow-weak-write-concern") || !strings.Contains(err.Error(), "mongo-uri:") {
		t.Fatalf("start with w=1: %v, want a refusal naming -mongo-allow-weak-write-concern", err)
	}
	c, err = ParseConfig([]string{"-mongo-allow-weak-write-concern=true"}, env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(t.Context(), c, zerolog.Nop())
	if !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("start with w=1 accepted: %v, want ErrUnavailable from the closed port", err)
	}
}

// TestLeaseTTLDefault checks the lease lifetime's default per store (30s
// on MongoDB, longer than an election) and that a set value is kept.
func TestLeaseTTLDefault(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		env  func(string) string
		want time.Duration
	}{
		"Mongo":       {env: mongoEnv(nil), want: 30 * time.Second},
		"MongoSet":    {args: []string{"-lease-ttl", "10s"}, env: mongoEnv(nil), want: 10 * time.Second},
		"MongoAuto":   {env: mongoEnv(map[string]string{"SCHEDULER_LEASE_TTL": "auto"}), want: 30 * time.Second},
		"Embedded":    {args: []string{"-data-dir", t.TempDir()}, env: func(string) string { return "" }, want: 15 * time.Second},
		"EmbeddedSet": {args: []string{"-data-dir", t.TempDir(), "-lease-ttl", "40s"}, env: func(string) string { return "" }, want: 40 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := ParseConfig(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.LeaseTTL != tc.want {
				t.Fatalf("LeaseTTL %s, want %s", c.LeaseTTL, tc.want)
			}
		})
	}
	if _, err := ParseConfig([]string{"-lease-ttl", "soon"}, mongoEnv(nil)); err == nil || !strings.Contains(err.Error(), "lease-ttl:") {
		t.Fatalf("a bad lease-ttl: %v, want an error naming it", err)
	}
}
