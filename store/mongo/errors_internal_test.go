package mongo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/schedulerd/schedulerd/model"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	cmd := func(code int32, name string, labels ...string) error {
		return mongo.CommandError{Code: code, Name: name, Message: name, Labels: labels}
	}
	writeErr := func(code int) error {
		return mongo.WriteException{WriteErrors: []mongo.WriteError{{Index: 0, Code: code, Message: "write error"}}}
	}
	wcErr := func(code int, name string) error {
		return mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Name: name, Code: code, Message: name}}
	}
	bulkErr := func(code int) error {
		return mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Index: 3, Code: code, Message: "bulk write error"}}}}
	}
	bulkWC := func(code int, name string) error {
		return mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Name: name, Code: code, Message: name}}
	}

	type want int
	const (
		other want = iota
		notFound
		conflict
		unavailable // may have applied
		notApplied  // unavailable and certainly not applied
	)
	cases := []struct {
		name string
		err  error
		want want
	}{
		{"NoDocuments", mongo.ErrNoDocuments, notFound},
		{"DuplicateKeyCommand", cmd(11000, "DuplicateKey"), conflict},
		{"DuplicateKeyWrite", writeErr(11000), conflict},
		{"DuplicateKeyBulk", bulkErr(11000), conflict},
		{"ServerSelection", topology.ServerSelectionError{Wrapped: errors.New("no primary")}, notApplied},
		{"ClientDisconnected", mongo.ErrClientDisconnected, notApplied},
		{"DeadlineExceeded", fmt.Errorf("find: %w", context.DeadlineExceeded), unavailable},
		{"Canceled", context.Canceled, unavailable},
		{"NetworkErrorLabel", cmd(0, "", "NetworkError"), unavailable},
		{"NetTimeout", &net.OpError{Op: "read", Err: timeoutErr{}}, unavailable},
		{"RetryableWriteErrorLabel", cmd(1234, "Unknown", "RetryableWriteError"), unavailable},
		{"TransientTransactionErrorLabel", cmd(1234, "Unknown", "TransientTransactionError"), unavailable},
		{"WriteConcernFailed", wcErr(64, "WriteConcernFailed"), unavailable},
		{"WriteConcernFailedBulk", bulkWC(64, "WriteConcernFailed"), unavailable},
		{"WriteConcernFailedWithDuplicate", mongo.BulkWriteException{
			WriteErrors:       []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: 11000}}},
			WriteConcernError: &mongo.WriteConcernError{Name: "WriteConcernFailed", Code: 64},
		}, unavailable},
		{"Interrupted", cmd(11601, "Interrupted"), unavailable},
		{"InterruptedAtShutdown", cmd(11600, "InterruptedAtShutdown"), unavailable},
		{"InterruptedDueToReplStateChange", cmd(11602, "InterruptedDueToReplStateChange"), unavailable},
		{"InterruptedDueToReplStateChangeInWriteConcern", wcErr(11602, "InterruptedDueToReplStateChange"), unavailable},
		{"NotWritablePrimary", cmd(10107, "NotWritablePrimary"), unavailable},
		{"NotWritablePrimaryWrite", writeErr(10107), unavailable},
		{"NotWritablePrimaryBulk", bulkErr(10107), unavailable},
		{"NotPrimaryNoSecondaryOk", cmd(13435, "NotPrimaryNoSecondaryOk"), unavailable},
		{"NotPrimaryOrSecondary", cmd(13436, "NotPrimaryOrSecondary"), unavailable},
		{"PrimarySteppedDown", cmd(189, "PrimarySteppedDown"), unavailable},
		{"ShutdownInProgress", cmd(91, "ShutdownInProgress"), unavailable},
		{"ShutdownInProgressWriteConcern", bulkWC(91, "ShutdownInProgress"), unavailable},
		{"HostUnreachable", cmd(6, "HostUnreachable"), unavailable},
		{"HostNotFound", cmd(7, "HostNotFound"), unavailable},
		{"NetworkTimeout", cmd(89, "NetworkTimeout"), unavailable},
		{"SocketException", cmd(9001, "SocketException"), unavailable},
		{"ExceededTimeLimit", cmd(262, "ExceededTimeLimit"), unavailable},
		{"MaxTimeMSExpired", cmd(50, "MaxTimeMSExpired"), unavailable},
		{"CursorKilled", cmd(237, "CursorKilled"), unavailable},
		{"WrappedByCaller", fmt.Errorf("event claim: %w", cmd(189, "PrimarySteppedDown")), unavailable},
		{"CursorNotFound", cmd(43, "CursorNotFound"), unavailable},
		{"FailedToSatisfyReadPreference", cmd(133, "FailedToSatisfyReadPreference"), unavailable},
		{"ReadConcernMajorityNotAvailableYet", cmd(134, "ReadConcernMajorityNotAvailableYet"), unavailable},
		{"QueryPlanKilled", cmd(175, "QueryPlanKilled"), unavailable},
		{"LegacyNotPrimary", cmd(10058, "LegacyNotPrimary"), unavailable},
		{"SystemOverloadedErrorLabel", cmd(462, "IngressRequestRateLimitExceeded", "SystemOverloadedError", "RetryableError"), unavailable},
		{"RetryableErrorLabel", cmd(1234, "Unknown", "RetryableError"), unavailable},
		{"UnknownTransactionCommitResultLabel", cmd(1234, "Unknown", "UnknownTransactionCommitResult"), unavailable},
		// A transaction whose callback ran may have committed before a
		// retry of the commit failed to reach a server.
		{"ServerSelectionAfterCallbackRan", fmt.Errorf("%w: %w", errMayHaveApplied, topology.ServerSelectionError{Wrapped: errors.New("no primary")}), unavailable},
		{"DuplicateKeyAfterCallbackRan", fmt.Errorf("%w: %w", errMayHaveApplied, cmd(11000, "DuplicateKey")), conflict},
		{"BadValueIsABug", cmd(2, "BadValue"), other},
		{"DocumentValidationIsABug", writeErr(121), other},
		{"PlainError", errors.New("boom"), other},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := interpretError(tc.err)
			// The driver's error types hold slices, so errors.Is cannot
			// compare them: the message must survive for the logs.
			if !errors.Is(tc.err, mongo.ErrNoDocuments) && !strings.Contains(got.Error(), tc.err.Error()) {
				t.Errorf("interpretError(%v) = %v: the original error is not in the chain", tc.err, got)
			}
			var is want
			switch {
			case errors.Is(got, model.ErrNotApplied) && errors.Is(got, model.ErrUnavailable):
				is = notApplied
			case errors.Is(got, model.ErrUnavailable):
				is = unavailable
			case errors.Is(got, model.ErrConflict):
				is = conflict
			case errors.Is(got, model.ErrNotFound):
				is = notFound
			}
			if is != tc.want {
				t.Fatalf("interpretError(%v) = %v: got class %d, want %d", tc.err, got, is, tc.want)
			}
		})
	}
	if interpretError(nil) != nil {
		t.Fatal("interpretError(nil) is not nil")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClientOptions(t *testing.T) {
	t.Parallel()
	build := func(t *testing.T, uri string, o Options) (*connstring.ConnString, Options) {
		t.Helper()
		cs, err := connstring.ParseAndValidate(uri)
		if err != nil {
			t.Fatalf("parse %s: %v", uri, err)
		}
		o.setDefaults()
		return cs, o
	}

	t.Run("DefaultsAreDurable", func(t *testing.T) {
		t.Parallel()
		uri := "mongodb://127.0.0.1:27017/"
		cs, o := build(t, uri, Options{})
		if err := checkWriteConcern(cs, o); err != nil {
			t.Fatalf("checkWriteConcern: %v", err)
		}
		co := clientOptions(uri, cs, o)
		if co.WriteConcern == nil || co.WriteConcern.W != "majority" {
			t.Fatalf("write concern: got %+v, want w=majority", co.WriteConcern)
		}
		if co.ReadPreference == nil || co.ReadPreference.Mode() != readpref.PrimaryMode {
			t.Fatalf("read preference: got %v, want primary", co.ReadPreference)
		}
		// An election takes up to about 12 s with MongoDB's default
		// settings; the defaults must wait it out.
		if co.ServerSelectionTimeout == nil || *co.ServerSelectionTimeout < 30*time.Second {
			t.Fatalf("server selection timeout: got %v, want >= 30s", co.ServerSelectionTimeout)
		}
		if co.Timeout == nil || *co.Timeout < 30*time.Second {
			t.Fatalf("operation timeout: got %v, want >= 30s", co.Timeout)
		}
	})

	t.Run("ConfiguredTimeoutsWin", func(t *testing.T) {
		t.Parallel()
		uri := "mongodb://127.0.0.1:27017/"
		cs, o := build(t, uri, Options{ServerSelectionTimeout: 45 * time.Second, OperationTimeout: 90 * time.Second})
		co := clientOptions(uri, cs, o)
		if *co.ServerSelectionTimeout != 45*time.Second || *co.Timeout != 90*time.Second {
			t.Fatalf("timeouts: got %v and %v, want 45s and 90s", *co.ServerSelectionTimeout, *co.Timeout)
		}
	})

	t.Run("URIMajorityKept", func(t *testing.T) {
		t.Parallel()
		uri := "mongodb://127.0.0.1:27017/?w=majority&readPreference=primaryPreferred"
		cs, o := build(t, uri, Options{})
		if err := checkWriteConcern(cs, o); err != nil {
			t.Fatalf("checkWriteConcern: %v", err)
		}
		co := clientOptions(uri, cs, o)
		if co.WriteConcern == nil || co.WriteConcern.W != "majority" {
			t.Fatalf("write concern: got %+v, want w=majority", co.WriteConcern)
		}
		if co.ReadPreference == nil || co.ReadPreference.Mode() != readpref.PrimaryPreferredMode {
			t.Fatalf("read preference: got %v, want the URI's primaryPreferred", co.ReadPreference)
		}
	})

	for _, q := range []string{"w=0", "w=1", "w=2", "w=dc1", "journal=false"} {
		t.Run("Refuses_"+q, func(t *testing.T) {
			t.Parallel()
			uri := "mongodb://127.0.0.1:27017/?" + q
			cs, o := build(t, uri, Options{})
			if err := checkWriteConcern(cs, o); err == nil {
				t.Fatalf("checkWriteConcern(%s): got nil, want a refusal", q)
			}
			cs, o = build(t, uri, Options{AllowWeakWriteConcern: true})
			if err := checkWriteConcern(cs, o); err != nil {
				t.Fatalf("checkWriteConcern(%s) with AllowWeakWriteConcern: %v", q, err)
			}
			co := clientOptions(uri, cs, o)
			if co.WriteConcern == nil || (cs.JSet && (co.WriteConcern.Journal == nil || *co.WriteConcern.Journal)) ||
				(!cs.JSet && co.WriteConcern.W == "majority") {
				t.Fatalf("write concern with %s allowed: got %+v, want the URI's", q, co.WriteConcern)
			}
		})
	}
}
