package mongo

import (
	"testing"
	"time"
)

func TestUnixNano(t *testing.T) {
	t.Parallel()
	exact := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{"ZeroStaysZero", time.Time{}, time.Time{}},
		{"NanosecondsSurvive", exact, exact},
		{"FarFutureIsClamped", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), maxInstant},
		{"FarPastIsClamped", time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC), minInstant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := fromNano(unixNano(tc.in))
			if !got.Equal(tc.want) {
				t.Fatalf("round trip of %v: got %v, want %v", tc.in, got, tc.want)
			}
		})
	}
	if got := fromNanoPtr(unixNanoPtr(nil)); got != nil {
		t.Fatalf("nil pointer round trip: got %v", got)
	}
}
