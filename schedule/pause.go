package schedule

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxPauseNoteLen is the most characters a pause note may have.
const MaxPauseNoteLen = 1000

// MaxSkipCount is the most fires one skip by count may skip.
const MaxSkipCount = 1000

// CheckPause checks the note and the resume time until (nil: none) of a
// pause at now; the error names the field.
func CheckPause(note string, until *time.Time, now time.Time) error {
	var fe Errors
	if utf8.RuneCountInString(note) > MaxPauseNoteLen {
		fe.Add("note", "longer than "+strconv.Itoa(MaxPauseNoteLen)+" characters")
	}
	if until != nil && !until.After(now) {
		fe.Add("until", "must be in the future")
	}
	return fe.Err()
}

// SkipUntil checks a skip of the next count fires or of every fire before
// until (exactly one of them set) at now and returns the instant before
// which c's fires are skipped: until, or for a count the time of the
// first fire after the count skipped ones (a millisecond after the last
// fire when there are no more: every fire is skipped). The error names
// the field.
func (c *Compiled) SkipUntil(count *int, until *time.Time, now time.Time) (time.Time, error) {
	var fe Errors
	switch {
	case count == nil && until == nil:
		fe.Add("count", "one of count and until is required")
	case count != nil && until != nil:
		fe.Add("until", "give either count or until, not both")
	case until != nil && !until.After(now):
		fe.Add("until", "must be in the future")
	case count != nil && (*count < 1 || *count > MaxSkipCount):
		fe.Add("count", "must be 1.."+strconv.Itoa(MaxSkipCount))
	}
	if err := fe.Err(); err != nil {
		return time.Time{}, err
	}
	if until != nil {
		return until.UTC(), nil
	}
	times := c.NextFireTimes(now, *count+1)
	if c.Schedule.RunAt != nil && !times[0].After(now) {
		times = nil // a one-off's fire in the past is not ahead
	}
	switch {
	case len(times) > *count:
		return times[*count], nil
	case len(times) > 0:
		return times[len(times)-1].Add(time.Millisecond), nil
	}
	return now.UTC(), nil
}
