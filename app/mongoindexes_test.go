package app

import (
	"errors"
	"testing"
)

type indexReport struct {
	building []string
	err      error
}

func (r indexReport) IndexStatus() ([]string, error) { return r.building, r.err }

// TestIndexCheck checks what /readyz says of the MongoDB store's index
// build, and that a store without one has no such check.
func TestIndexCheck(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		st   indexStatus
		want string
		ok   bool
	}{
		"NoBuild":  {st: nil},
		"Built":    {st: indexReport{}, want: "ok", ok: true},
		"Building": {st: indexReport{building: []string{"events.a", "fires.b"}}, want: "building events.a, fires.b", ok: true},
		"Failing": {st: indexReport{building: []string{"events.a"}, err: errors.New("stepped down")},
			want: "building events.a (last attempt failed: stepped down)", ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := indexCheck(tc.st)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("indexCheck = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
