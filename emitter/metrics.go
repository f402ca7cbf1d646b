package emitter

import (
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// SkipReason says why a due fire was not emitted.
type SkipReason string

const (
	// SkipMisfire: a missed fire of a schedule whose misfire policy is skip.
	SkipMisfire SkipReason = "misfire_skip"
	// SkipSuperseded: a missed fire of a fire_once schedule that has a later
	// missed fire (only the latest fires).
	SkipSuperseded SkipReason = "misfire_superseded"
	// SkipTooOld: a missed fire older than the catch-up limit.
	SkipTooOld SkipReason = "too_old"
	// SkipCaughtUp: a fire_once schedule already fired its catch-up fire
	// (seen when a catch-up is retried later).
	SkipCaughtUp SkipReason = "caught_up"
	// SkipOtherVersion: another version of the schedule already fired at
	// this time and its events were not cancelled.
	SkipOtherVersion SkipReason = "other_version"
	// SkipMissing: the child's schedule does not exist (orphan child).
	SkipMissing SkipReason = "missing"
	// SkipInactive: the schedule is paused or completed.
	SkipInactive SkipReason = "inactive"
	// SkipStaleChild: the child was made for another version of the schedule.
	SkipStaleChild SkipReason = "stale_child"
	// SkipOutOfRange: the fire time is before StartAt or after EndAt (or not
	// the RunAt of a one-off schedule).
	SkipOutOfRange SkipReason = "out_of_range"
)

// Metrics receives the emitter's counters. Implementations must be safe for
// concurrent use; the runtime wires them to Prometheus.
type Metrics interface {
	// WindowScanned is called after each window of a partition with the
	// number of children read and the time taken to scan and emit it.
	WindowScanned(partition int, childrenRead int, d time.Duration)
	// FiresRecorded counts fires recorded for the first time, by decision
	// (emitted, late, skipped_overlap, triggered).
	FiresRecorded(decision model.FireDecision, n int)
	// EventsEmitted counts events inserted for the first time.
	EventsEmitted(n int)
	// FiresSkipped counts due fires that were not emitted.
	FiresSkipped(reason SkipReason, n int)
	// WindowsSkipped counts windows jumped over because they were older than
	// the catch-up limit.
	WindowsSkipped(partition int, n int)
	// PartitionLost counts partitions given up because the watermark
	// advance lost its compare-and-set (another instance holds it now).
	PartitionLost(partition int)
	// FiresDeferred counts fires whose events were held back for a later
	// minute, once per fire, by reason (quota.go).
	FiresDeferred(reason DeferReason, n int)
}

// DeferReason says why a fire's events were held back.
type DeferReason string

const (
	// DeferQuota: the tenant's maxEventsPerMinute.
	DeferQuota DeferReason = "quota"
	// DeferDisk: the disk guard.
	DeferDisk DeferReason = "disk"
)

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) WindowScanned(int, int, time.Duration) {}
func (NopMetrics) FiresRecorded(model.FireDecision, int) {}
func (NopMetrics) EventsEmitted(int)                     {}
func (NopMetrics) FiresSkipped(SkipReason, int)          {}
func (NopMetrics) WindowsSkipped(int, int)               {}
func (NopMetrics) PartitionLost(int)                     {}
func (NopMetrics) FiresDeferred(DeferReason, int)        {}

// PassStats summarises one pass (RunPass).
type PassStats struct {
	// Partitions worked on.
	Partitions int
	// Windows scanned (summed over partitions).
	Windows int
	// WindowsSkipped: windows jumped over (older than the catch-up limit).
	WindowsSkipped int
	// ChildrenRead: children returned by ChildrenFind. Follows the number
	// of due children, not the number of schedules (invariant 4).
	ChildrenRead int
	// Fires recorded for the first time, any decision.
	Fires int
	// FiresLate: of Fires, those with decision late.
	FiresLate int
	// FiresOverlapSkipped: of Fires, those with decision skipped_overlap.
	FiresOverlapSkipped int
	// FiresCalendarSkipped: of Fires, those with decision
	// skipped_calendar; FiresMoved: those of them that moved to the next
	// included instant (onExcluded next_included).
	FiresCalendarSkipped, FiresMoved int
	// CalendarsRead: calendars read from the store (once per pass each).
	CalendarsRead int
	// FiresExisting: due fires found already recorded (a rescan); their
	// events were re-inserted idempotently.
	FiresExisting int
	// Events inserted for the first time.
	Events int
	// Skipped counts due fires not emitted, by reason.
	Skipped map[SkipReason]int
	// ScanTime is the part of Duration spent finding due fires (eligible
	// keys, ChildrenFind, ScheduleGetMany, filtering), as opposed to writing
	// fires and events.
	ScanTime time.Duration
	// Duration of the pass (wall time).
	Duration time.Duration
}

func (s *PassStats) skip(r SkipReason, n int) {
	if s.Skipped == nil {
		s.Skipped = map[SkipReason]int{}
	}
	s.Skipped[r] += n
}

func (s *PassStats) add(o *PassStats) {
	s.Windows += o.Windows
	s.WindowsSkipped += o.WindowsSkipped
	s.ChildrenRead += o.ChildrenRead
	s.Fires += o.Fires
	s.FiresLate += o.FiresLate
	s.FiresOverlapSkipped += o.FiresOverlapSkipped
	s.FiresCalendarSkipped += o.FiresCalendarSkipped
	s.FiresMoved += o.FiresMoved
	s.CalendarsRead += o.CalendarsRead
	s.FiresExisting += o.FiresExisting
	s.Events += o.Events
	s.ScanTime += o.ScanTime
	for r, n := range o.Skipped {
		s.skip(r, n)
	}
}
