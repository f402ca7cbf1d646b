package mongo_test

import (
	"context"
	"maps"
	"slices"
	"testing"
)

// TestLookupByIDs reads events by id both ways the driver can: $in queries
// of up to 1,000 ids (MongoDB) and one lookup an id (FerretDB), over more
// ids than one $in takes and with ids that do not exist.
func TestLookupByIDs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	const n = 1003
	insertBenchEvents(t, s, n, 500)
	var ids []string
	for i := range n {
		ids = append(ids, benchEvent(i).ID)
	}
	want := slices.Sorted(slices.Values(ids))
	asked := append(slices.Clone(ids), "evt_missing_1", "evt_missing_2")
	for _, serialise := range []bool{false, true} {
		s.SetSerialise(serialise)
		got, err := s.EventGetMany(ctx, asked)
		if err != nil {
			t.Fatalf("serialise %v: EventGetMany: %v", serialise, err)
		}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
			t.Fatalf("serialise %v: EventGetMany returned %d events, want the %d that exist", serialise, len(keys), len(want))
		}
		for id, e := range got {
			if e.ID != id || e.Payload == nil {
				t.Fatalf("serialise %v: event %s read as %+v", serialise, id, e)
			}
		}
		stamps, err := s.ReadStamps(ctx, asked)
		if err != nil {
			t.Fatalf("serialise %v: readStamps: %v", serialise, err)
		}
		if keys := slices.Sorted(maps.Keys(stamps)); !slices.Equal(keys, want) {
			t.Fatalf("serialise %v: readStamps returned %d stamps, want %d", serialise, len(keys), len(want))
		}
	}
}
