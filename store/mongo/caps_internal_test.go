package mongo

import "testing"

func TestDecideCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		version     string
		ferret      bool
		setName     string
		clientClock bool
		want        serverCaps
	}{
		{"FerretDB", "7.0.42", true, "", false, serverCaps{ferret: true}},
		{"FerretDBNeverTransactions", "7.0.42", true, "rs0", false, serverCaps{ferret: true}},
		{"ReplicaSet7", "7.0.2", false, "rs0", false, serverCaps{partialIndexes: true, ttl: true, serverClock: true, transactions: true}},
		{"Standalone7", "7.0.2", false, "", false, serverCaps{partialIndexes: true, ttl: true, serverClock: true}},
		{"ClientClockAsked", "7.0.2", false, "rs0", true, serverCaps{partialIndexes: true, ttl: true, transactions: true}},
		{"ReplicaSet4.0", "4.0.28", false, "rs0", false, serverCaps{ttl: true, transactions: true}},
		{"ReplicaSet4.2", "4.2.1", false, "rs0", false, serverCaps{ttl: true, serverClock: true, transactions: true}},
		{"ReplicaSet3.6", "3.6.23", false, "rs0", false, serverCaps{ttl: true}},
		{"Unparsable", "", false, "rs0", false, serverCaps{ttl: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideCaps(tc.version, tc.ferret, tc.setName, tc.clientClock); got != tc.want {
				t.Fatalf("decideCaps(%q, ferret %v, set %q, client clock %v) = %+v, want %+v",
					tc.version, tc.ferret, tc.setName, tc.clientClock, got, tc.want)
			}
		})
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
