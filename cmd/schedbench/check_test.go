package main

import (
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// accepted is a recorded delivery of event id (schedule s, index i, of a
// fire of count events) accepted n times.
func accepted(id, s string, i, count, n int) chaoskit.Delivery {
	return chaoskit.Delivery{EventID: id, ScheduleID: s, Index: i, Count: count, Accepted: n, Seen: n}
}

func snapshot(ds ...chaoskit.Delivery) chaoskit.Snapshot {
	s := chaoskit.Snapshot{Events: map[string]chaoskit.Delivery{}}
	for _, d := range ds {
		s.Events[d.EventID] = d
	}
	return s
}

func TestVerify(t *testing.T) {
	want := expectation{"sch_a": 3, "sch_b": 2}
	complete := []chaoskit.Delivery{
		accepted("e_a0", "sch_a", 0, 3, 1), accepted("e_a1", "sch_a", 1, 3, 1), accepted("e_a2", "sch_a", 2, 3, 1),
		accepted("e_b0", "sch_b", 0, 2, 1), accepted("e_b1", "sch_b", 1, 2, 1),
	}
	t.Run("complete", func(t *testing.T) {
		v := verify(want, snapshot(complete...), nil)
		if len(v.missing)+len(v.dead)+len(v.unexpected)+len(v.duplicated) != 0 {
			t.Fatalf("a complete run reported %+v", v)
		}
	})
	// The counts of these runs match the expectation (5 distinct events
	// accepted); only the sets tell them apart.
	for _, tc := range []struct {
		name  string
		ds    []chaoskit.Delivery
		dead  map[eventKey]string
		check func(verdict) bool
		show  string
	}{
		{"missing", append(complete[1:], accepted("e_x", "sch_other", 0, 1, 1)),
			nil, func(v verdict) bool { return len(v.missing) == 1 && v.missing[0] == "sch_a[0] (not in the store)" }, "missing sch_a[0]"},
		{"missing, still retrying", complete[1:], map[eventKey]string{{"sch_a", 0}: "retrying", {"sch_a", 1}: "released"},
			func(v verdict) bool { return len(v.missing) == 1 && v.missing[0] == "sch_a[0] (retrying)" }, "missing sch_a[0] (retrying)"},
		{"dead is not lost", complete[1:], map[eventKey]string{{"sch_a", 0}: "dead"},
			func(v verdict) bool { return len(v.missing) == 0 && len(v.dead) == 1 && v.dead[0] == "sch_a[0]" }, "dead sch_a[0], nothing missing"},
		{"duplicate", append(complete[1:], accepted("e_a0", "sch_a", 0, 3, 2)),
			nil, func(v verdict) bool {
				return len(v.missing) == 0 && len(v.duplicated) == 1 && strings.HasPrefix(v.duplicated[0], "e_a0 (sch_a[0]): accepted 2")
			}, "duplicate e_a0"},
		{"unknown schedule", append(complete[:4:4], accepted("e_z", "sch_z", 0, 2, 1)),
			nil, func(v verdict) bool {
				return len(v.unexpected) == 1 && strings.HasPrefix(v.unexpected[0], "e_z ") && len(v.missing) == 1 && v.missing[0] == "sch_b[1] (not in the store)"
			}, "unexpected e_z and missing sch_b[1]"},
		{"index beyond the fire", append(complete[:4:4], accepted("e_b9", "sch_b", 9, 2, 1)),
			nil, func(v verdict) bool { return len(v.unexpected) == 1 && strings.HasPrefix(v.unexpected[0], "e_b9 ") }, "unexpected e_b9"},
		{"fire of another size", append(complete[:4:4], accepted("e_b1", "sch_b", 1, 5, 1)),
			nil, func(v verdict) bool {
				return len(v.unexpected) == 1 && strings.Contains(v.unexpected[0], "a fire of 5 events, 2 asked for") && len(v.missing) == 0
			}, "unexpected size of e_b1"},
		{"two ids for one event", append(complete, accepted("e_b1bis", "sch_b", 1, 2, 1)),
			nil, func(v verdict) bool {
				return len(v.unexpected) == 1 && strings.Contains(v.unexpected[0], "a second event id")
			}, "a second id for sch_b[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := verify(want, snapshot(tc.ds...), tc.dead); !tc.check(v) {
				t.Fatalf("want %s, got %+v", tc.show, v)
			}
		})
	}
}

func TestFailures(t *testing.T) {
	if f := (&result{}).failures(); len(f) != 0 {
		t.Fatalf("a clean run failed: %q", f)
	}
	r := &result{verdict: verdict{missing: []string{"sch_a[0]"}, unexpected: []string{"e_z"}, duplicated: []string{"e_a1"}},
		tokenTimeouts: 2, violations: 1}
	got := strings.Join(r.failures(), "\n")
	for _, want := range []string{"FAIL lost: 1 expected events not delivered and not dead (status in the store), e.g. [sch_a[0]]", "FAIL unexpected: 1", "FAIL noTokenTimeout: 2", "FAIL throttle: 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("failures %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "e_a1") {
		t.Errorf("a duplicate failed the run: %q", got)
	}
}
