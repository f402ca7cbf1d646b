package mongo

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestDecideCaps(t *testing.T) {
	t.Parallel()
	all := probes{partialIn: true, now: true}
	for _, tc := range []struct {
		name        string
		ferret      bool
		setName     string
		clientClock bool
		probed      probes
		want        serverCaps
	}{
		{"FerretDB", true, "", false, probes{}, serverCaps{ferret: true}},
		{"FerretDBNeverTransactions", true, "rs0", false, all, serverCaps{ferret: true}},
		{"ReplicaSet", false, "rs0", false, all, serverCaps{partialIndexes: true, ttl: true, serverClock: true, transactions: true}},
		{"Standalone", false, "", false, all, serverCaps{partialIndexes: true, ttl: true, serverClock: true}},
		{"ClientClockAsked", false, "rs0", true, all, serverCaps{partialIndexes: true, ttl: true, transactions: true}},
		// A MongoDB 6 at featureCompatibilityVersion 5.0 refuses $in.
		{"NoPartialIn", false, "rs0", false, probes{now: true}, serverCaps{ttl: true, serverClock: true, transactions: true}},
		// A service that reports 5.x but lacks $$NOW.
		{"NoNow", false, "rs0", false, probes{partialIn: true}, serverCaps{partialIndexes: true, ttl: true, transactions: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideCaps(tc.ferret, tc.setName, tc.clientClock, tc.probed); got != tc.want {
				t.Fatalf("decideCaps(ferret %v, set %q, client clock %v, %+v) = %+v, want %+v",
					tc.ferret, tc.setName, tc.clientClock, tc.probed, got, tc.want)
			}
		})
	}
}

func TestCheckVersion(t *testing.T) {
	t.Parallel()
	for version, ok := range map[string]bool{
		"4.4.0": true, "4.4.29": true, "5.0.3": true, "8.0.1": true, "10.0.0": true, "": true, "weird": true,
		"4.2.24": false, "4.0.28": false, "3.6.23": false,
	} {
		err := checkVersion(version)
		if (err == nil) != ok {
			t.Errorf("checkVersion(%q) = %v, want accepted %v", version, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrServerTooOld) || !strings.Contains(err.Error(), "4.4")) {
			t.Errorf("checkVersion(%q) = %v: does not name the oldest version", version, err)
		}
	}
	driverErr := errors.New("server at 127.0.0.1:27017 reports wire version 8, but this version of the Go driver requires at least 9 (MongoDB 4.4)")
	if !isWireVersionTooOld(driverErr) {
		t.Errorf("the driver's refusal of an old server is not recognised: %v", driverErr)
	}
}

func TestIsMemberLease(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"handler/member/host-1": true, "emitter/member/a/b": true,
		"handler/unit/3": false, "store/unit/orphan-children": false, "member/x": false, "shard/1": false,
	} {
		if got := isMemberLease(name); got != want {
			t.Errorf("isMemberLease(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestIsUnauthorized checks the error a collMod without the privilege
// gets (Unauthorized, code 13), which keeps the stored retention with a
// warning instead of failing the start.
func TestIsUnauthorized(t *testing.T) {
	t.Parallel()
	denied := mongo.CommandError{Code: 13, Name: "Unauthorized", Message: "not authorized on schedulerd to execute command { collMod: ... }"}
	if !isUnauthorized(fmt.Errorf("collMod: %w", denied)) {
		t.Errorf("isUnauthorized(%v) = false", denied)
	}
	if isUnauthorized(mongo.CommandError{Code: 26, Name: "NamespaceNotFound"}) {
		t.Error("isUnauthorized(NamespaceNotFound) = true")
	}
}
