package chaoskit

import (
	"fmt"
	"sort"
	"time"
)

// Disruption is a span in which an instance could not record the outcome of
// deliveries it had sent: from the moment it was killed to the moment its
// replacement was up, or, with Instance "", a store outage (every
// instance's writes fail and its leases lapse) from its start until the
// instances were ready again.
type Disruption struct {
	Instance   string // base URL of the instance, as in its release URLs; "": every instance
	Start, End time.Time
}

// DuplicateCheck says which duplicates a run can explain.
type DuplicateCheck struct {
	Disruptions []Disruption
	// Superseded accepts a duplicate whose earlier copy's release was
	// answered 409: the scheduler had given that attempt up (its delivery
	// timeout passed before the consumer's answer reached it) and sent the
	// event again, which at-least-once delivery allows without a crash.
	Superseded bool
}

// UnexplainedDuplicates returns a line for each accepted copy of an event
// beyond its first that at-least-once delivery does not explain. Delivery is
// at least once because an instance that dies, or loses its store, after
// the consumer accepted an event and before the outcome is recorded leaves
// the event to be sent again. So a later copy is explained only by a
// disruption of the instance that sent the earlier copy (or of the store)
// that
//   - ended after the earlier copy was accepted (that copy was in flight
//     when its sender went away),
//   - began before the later copy was accepted, and
//   - began before the earlier copy's release was acknowledged (once the
//     store holds the acknowledgement, no new owner may send the event),
//
// or, with c.Superseded, by a 409 to the earlier copy's release.
func UnexplainedDuplicates(s Snapshot, c DuplicateCheck) []string {
	var out []string
	for _, d := range s.Events {
		for i := 1; i < len(d.AcceptedAt); i++ {
			if !explained(d, i, c) {
				out = append(out, fmt.Sprintf("%s: copy %d (attempt %d, accepted %s) after copy %d (attempt %d from %q, accepted %s, release %q at %s) with no disruption of its sender in between",
					d.EventID, i+1, at(d.AcceptedAttempt, i), d.AcceptedAt[i].Format(timeFmt),
					i, at(d.AcceptedAttempt, i-1), at(d.AcceptedFrom, i-1), d.AcceptedAt[i-1].Format(timeFmt),
					at(d.ReleaseOutcome, i-1), clock(at(d.ReleasedAt, i-1))))
			}
		}
	}
	sort.Strings(out)
	return out
}

const timeFmt = "15:04:05.000"

// clock formats t for a report line; "-" for no time.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(timeFmt)
}

// explained reports whether accepted copy i of d (i >= 1) is explained.
func explained(d Delivery, i int, c DuplicateCheck) bool {
	prev := d.AcceptedAt[i-1]
	from := at(d.AcceptedFrom, i-1)
	acked := at(d.ReleasedAt, i-1)
	if c.Superseded && at(d.ReleaseOutcome, i-1) == "conflict" {
		return true
	}
	for _, ds := range c.Disruptions {
		if ds.Instance != "" && ds.Instance != from {
			continue
		}
		if prev.Before(ds.End) && ds.Start.Before(d.AcceptedAt[i]) && (acked.IsZero() || !acked.Before(ds.Start)) {
			return true
		}
	}
	return false
}

// at returns xs[i], or the zero value when xs is shorter.
func at[T any](xs []T, i int) T {
	var zero T
	if i < len(xs) {
		return xs[i]
	}
	return zero
}

// DuplicatedEvents returns the number of distinct events accepted more
// than once.
func (s Snapshot) DuplicatedEvents() int {
	n := 0
	for _, d := range s.Events {
		if d.Accepted > 1 {
			n++
		}
	}
	return n
}
