package main

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

// eventKey names one event of a one-off schedule: its single fire's
// schedule and the event's index in it.
type eventKey struct {
	schedule string
	index    int
}

func (k eventKey) String() string { return fmt.Sprintf("%s[%d]", k.schedule, k.index) }

// expectation is what the benchmark asked for: each schedule's eventCount.
type expectation map[string]int

// verdict compares what the consumer accepted with what was asked for.
type verdict struct {
	missing    []string // asked for, never accepted, not dead; with its status in the store
	dead       []string // asked for, never accepted, dead in the store
	unexpected []string // accepted, not asked for (unknown schedule, index or count)
	duplicated []string // accepted more than once
}

// verify compares the set of accepted events with the expected one, event
// by event. status holds the store's status of the events it has.
func verify(want expectation, s chaoskit.Snapshot, status map[eventKey]string) verdict {
	var v verdict
	accepted := map[eventKey]bool{}
	for _, d := range s.Events {
		if d.Accepted == 0 {
			continue
		}
		k := eventKey{d.ScheduleID, d.Index}
		n, ok := want[d.ScheduleID]
		switch {
		case !ok:
			v.unexpected = append(v.unexpected, fmt.Sprintf("%s (%s): no schedule of this run", d.EventID, k))
			continue
		case d.Index < 0 || d.Index >= n:
			v.unexpected = append(v.unexpected, fmt.Sprintf("%s (%s): index outside the %d events asked for", d.EventID, k, n))
			continue
		case d.Count != n:
			v.unexpected = append(v.unexpected, fmt.Sprintf("%s (%s): a fire of %d events, %d asked for", d.EventID, k, d.Count, n))
		}
		if accepted[k] {
			v.unexpected = append(v.unexpected, fmt.Sprintf("%s (%s): a second event id for one event", d.EventID, k))
		}
		accepted[k] = true
		if d.Accepted > 1 {
			v.duplicated = append(v.duplicated, fmt.Sprintf("%s (%s): accepted %d times", d.EventID, k, d.Accepted))
		}
	}
	for id, n := range want {
		for i := range n {
			k := eventKey{id, i}
			switch st, ok := status[k]; {
			case accepted[k]:
			case st == "dead":
				v.dead = append(v.dead, k.String())
			case ok:
				v.missing = append(v.missing, fmt.Sprintf("%s (%s)", k, st))
			default:
				v.missing = append(v.missing, fmt.Sprintf("%s (not in the store)", k))
			}
		}
	}
	for _, l := range [][]string{v.missing, v.dead, v.unexpected, v.duplicated} {
		sort.Strings(l)
	}
	return v
}

// failures returns a FAIL line for each check the run did not pass: an
// expected event not delivered (and not dead), a delivery nobody asked for,
// a token reclaimed by timeout (the consumer releases long before
// tokenTimeout, so each one is a token the scheduler lost track of), a
// delivery over a policy's bound, and an event received before its launch
// time. Duplicates are reported, not failed:
// delivery is at least once.
func (r *result) failures() []string {
	var out []string
	if n := len(r.verdict.missing); n > 0 {
		out = append(out, fmt.Sprintf("FAIL lost: %d expected events not delivered and not dead (status in the store), e.g. %v", n, r.verdict.missing[:min(n, 10)]))
	}
	if n := len(r.verdict.unexpected); n > 0 {
		out = append(out, fmt.Sprintf("FAIL unexpected: %d deliveries not asked for, e.g. %v", n, r.verdict.unexpected[:min(n, 10)]))
	}
	if r.tokenTimeouts > 0 {
		out = append(out, fmt.Sprintf("FAIL noTokenTimeout: %d tokens reclaimed by timeout", r.tokenTimeouts))
	}
	if r.violations > 0 {
		out = append(out, fmt.Sprintf("FAIL throttle: %d deliveries over a policy's bound", r.violations))
	}
	if r.early > 0 {
		out = append(out, fmt.Sprintf("FAIL early: %d events received before their launch time", r.early))
	}
	return out
}

// countEarly counts the negative latenesses (sorted ascending).
func countEarly(sorted []time.Duration) int {
	n := 0
	for n < len(sorted) && sorted[n] < 0 {
		n++
	}
	return n
}

// launchAt is the launch time of event i of a fire of n events at fireTime:
// the fire time, or with spread i*window/n after it (the schedule's
// contract: the fire's events evenly over its window).
func launchAt(fireTime time.Time, i, n int, window time.Duration, spread bool) time.Time {
	if !spread || window <= 0 || n <= 1 {
		return fireTime
	}
	// i*window/n without overflowing int64 for large windows and n.
	step, rem := int64(window)/int64(n), int64(window)%int64(n)
	return fireTime.Add(time.Duration(step*int64(i) + rem*int64(i)/int64(n)))
}

// lateness returns, for every accepted event matching keep (nil: all), the
// receipt of its first accepted attempt minus its launch time, sorted.
func lateness(s chaoskit.Snapshot, o *options, keep func(chaoskit.Delivery) bool) []time.Duration {
	var out []time.Duration
	for _, d := range s.Events {
		if d.Accepted == 0 || (keep != nil && !keep(d)) {
			continue
		}
		out = append(out, d.First.Sub(launchAt(d.FireTime, d.Index, d.Count, o.window, o.spread)))
	}
	slices.Sort(out)
	return out
}

func windowString(w time.Duration) string {
	if w <= 0 {
		return ""
	}
	return w.String()
}
