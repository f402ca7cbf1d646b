package chaoskit

import (
	"strings"
	"testing"
	"time"
)

// Each case is one event accepted twice; the check must refuse every
// duplicate that no disruption of its sender explains, and accept the
// ones that one does.
func TestUnexplainedDuplicates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	const a, b = "http://a", "http://b"
	twice := func(from string, acc1, acc2 float64, outcome string, acked float64) Snapshot {
		d := Delivery{EventID: "evt_1", Accepted: 2,
			AcceptedAt:      []time.Time{sec(acc1), sec(acc2)},
			AcceptedAttempt: []int{1, 1},
			AcceptedFrom:    []string{from, b},
			ReleaseOutcome:  []string{outcome, "ok"},
			ReleasedAt:      []time.Time{{}, sec(acc2 + 0.1)},
		}
		if outcome == "ok" {
			d.ReleasedAt[0] = sec(acked)
		}
		return Snapshot{Events: map[string]Delivery{d.EventID: d}}
	}
	killA := []Disruption{{Instance: a, Start: sec(10), End: sec(13)}}
	for _, tc := range []struct {
		name string
		s    Snapshot
		c    DuplicateCheck
		want bool // unexplained
	}{
		{"no disruption at all", twice(a, 1, 8, "ok", 1.2), DuplicateCheck{}, true},
		{"sender killed while the copy was unacknowledged", twice(a, 9, 18, "gave_up", 0), DuplicateCheck{Disruptions: killA}, false},
		{"acknowledged before the kill", twice(a, 9, 18, "ok", 9.5), DuplicateCheck{Disruptions: killA}, true},
		{"acknowledged after the kill began", twice(a, 9.9, 16, "ok", 10.5), DuplicateCheck{Disruptions: killA}, false},
		{"another instance was killed", twice(b, 9, 18, "conflict", 0), DuplicateCheck{Disruptions: killA}, true},
		{"kill over before the first copy", twice(a, 14, 20, "conflict", 0), DuplicateCheck{Disruptions: killA}, true},
		{"second copy before the kill", twice(a, 5, 9, "conflict", 0), DuplicateCheck{Disruptions: killA}, true},
		{"store outage covers every instance", twice(b, 9, 18, "conflict", 0), DuplicateCheck{Disruptions: []Disruption{{Start: sec(10), End: sec(20)}}}, false},
		{"superseded copy, allowed", twice(a, 1, 3, "conflict", 0), DuplicateCheck{Superseded: true}, false},
		{"superseded allowance does not cover an acknowledged copy", twice(a, 1, 3, "ok", 1.2), DuplicateCheck{Superseded: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := UnexplainedDuplicates(tc.s, tc.c)
			if (len(got) > 0) != tc.want {
				t.Fatalf("unexplained = %q, want unexplained %v", got, tc.want)
			}
			if tc.want && !strings.Contains(got[0], "evt_1: copy 2") {
				t.Errorf("report %q does not name the event and copy", got[0])
			}
		})
	}
}

func TestDuplicatedEvents(t *testing.T) {
	s := Snapshot{Events: map[string]Delivery{
		"a": {Accepted: 3}, "b": {Accepted: 1}, "c": {Accepted: 2}, "d": {Accepted: 0},
	}}
	if got := s.DuplicatedEvents(); got != 2 {
		t.Errorf("DuplicatedEvents = %d, want 2", got)
	}
	if got := s.Duplicates(); got != 3 {
		t.Errorf("Duplicates = %d, want 3", got)
	}
}
