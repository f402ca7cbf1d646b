// Package batchanswer writes the answer of a batch create (up to 1,000
// schedules) and the schedules of its idempotency records, byte for byte
// as encoding/json's Marshal writes them, without reflection.
// github.com/go-json-experiment/json writes the same bytes in three to
// four times the CPU (BenchmarkAppendBatchResult), about a tenth of the CPU
// of a created one-off through POST /v1/schedules/batch.
package batchanswer

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/internal/jsonappend"
)

// AppendBatchResult appends out to b as json.Marshal writes it. What it
// does not write itself (problems, strings that need escapes, unusual
// values) it has json.Marshal write, so the bytes are the same.
func AppendBatchResult(b []byte, out *api.ScheduleBatchResult) ([]byte, error) {
	b = append(b, `{"created":`...)
	b = strconv.AppendInt(b, int64(out.Created), 10)
	b = append(b, `,"failed":`...)
	b = strconv.AppendInt(b, int64(out.Failed), 10)
	b = append(b, `,"items":`...)
	if out.Items == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	var tm timeMemo
	for i := range out.Items {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendBatchItemResult(b, &out.Items[i], &tm); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

func appendBatchItemResult(b []byte, it *api.ScheduleBatchItemResult, tm *timeMemo) ([]byte, error) {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(it.Index), 10)
	if it.Problem != nil {
		p, err := json.Marshal(it.Problem)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"problem":`...), p...)
	}
	if it.Replayed != nil {
		b = append(b, `,"replayed":`...)
		b = strconv.AppendBool(b, *it.Replayed)
	}
	if it.Schedule != nil {
		b = append(b, `,"schedule":`...)
		var err error
		if b, err = appendSchedule(b, it.Schedule, tm); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(it.Status), 10)
	return append(b, '}'), nil
}

// timeMemo holds the last two times appended and their encodings: the
// schedules of a batch share their creation and update times, and often
// their runAt. nil remembers nothing.
type timeMemo struct {
	t    [2]time.Time
	enc  [2][]byte // nil: the slot is empty, or its time does not encode
	next int       // the slot to fill next
}

// time appends t as jsonappend.Time does. Times that are == (same instant,
// location and monotonic reading) encode alike; Equal ones need not, as the
// location is written.
func (m *timeMemo) time(b []byte, t time.Time, ok bool) ([]byte, bool) {
	if m == nil {
		return jsonappend.Time(b, t, ok)
	}
	for i := range m.t {
		if m.enc[i] != nil && m.t[i] == t {
			return append(b, m.enc[i]...), ok
		}
	}
	start := len(b)
	b, tok := jsonappend.Time(b, t, ok)
	if tok {
		i := m.next
		m.t[i], m.enc[i], m.next = t, append(m.enc[i][:0], b[start:]...), 1-i
	}
	return b, tok
}

// AppendSchedule appends s as json.Marshal writes it.
func AppendSchedule(b []byte, s *api.Schedule) ([]byte, error) { return appendSchedule(b, s, nil) }

// appendSchedule appends s as json.Marshal writes it: its members in the
// order of the struct's fields; tm (nil: none) remembers times.
func appendSchedule(b []byte, s *api.Schedule, tm *timeMemo) ([]byte, error) {
	if s.Payload != nil && len(*s.Payload) == 0 || s.ExcludeCalendars != nil || s.OnExcluded != nil || s.Interval != nil || s.Crons != nil ||
		s.Notify != nil || s.After != nil || s.Warnings != nil ||
		s.Deadline != nil || s.OnDeadline != nil || s.MaxEventAge != nil {
		// json.Marshal's error: an empty raw value; or a schedule that
		// names calendars, has an interval, several crons, warnings, a deadline, receivers of
		// notifications or a dependency, which is rarer.
		return appendMarshal(b, s)
	}
	start := len(b)
	ok := true
	b = append(b, `{"children":`...)
	b = strconv.AppendInt(b, int64(s.Children), 10)
	b = append(b, `,"createdAt":`...)
	b, ok = tm.time(b, s.CreatedAt, ok)
	if s.Cron != nil {
		b = append(b, `,"cron":`...)
		b = jsonappend.String(b, *s.Cron)
	}
	if s.EndAt != nil {
		b = append(b, `,"endAt":`...)
		b, ok = tm.time(b, *s.EndAt, ok)
	}
	b = append(b, `,"eventCount":`...)
	b = strconv.AppendInt(b, int64(s.EventCount), 10)
	b = append(b, `,"id":`...)
	b = jsonappend.String(b, s.Id)
	if s.Jitter != nil {
		b = append(b, `,"jitter":`...)
		b = jsonappend.String(b, *s.Jitter)
	}
	if s.Labels != nil {
		b = append(b, `,"labels":`...)
		b = appendLabels(b, *s.Labels)
	}
	b = append(b, `,"maxAttempts":`...)
	b = strconv.AppendInt(b, int64(s.MaxAttempts), 10)
	b = append(b, `,"misfire":`...)
	b = jsonappend.String(b, string(s.Misfire))
	b = append(b, `,"name":`...)
	b = jsonappend.String(b, s.Name)
	b = append(b, `,"nextFireTimes":`...)
	if s.NextFireTimes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, t := range s.NextFireTimes {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = tm.time(b, t, ok)
		}
		b = append(b, ']')
	}
	b = append(b, `,"overlap":`...)
	b = jsonappend.String(b, string(s.Overlap))
	if s.PausedAt != nil {
		b = append(b, `,"pausedAt":`...)
		b, ok = tm.time(b, *s.PausedAt, ok)
	}
	if s.PausedBy != nil {
		b = append(b, `,"pausedBy":`...)
		b = jsonappend.String(b, *s.PausedBy)
	}
	if s.PausedNote != nil {
		b = append(b, `,"pausedNote":`...)
		b = jsonappend.String(b, *s.PausedNote)
	}
	if s.Payload != nil {
		b = append(b, `,"payload":`...)
		b, ok = jsonappend.Raw(b, *s.Payload, ok)
	}
	if s.PolicyId != nil {
		b = append(b, `,"policyId":`...)
		b = jsonappend.String(b, *s.PolicyId)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(s.Priority), 10)
	if s.ResumeAt != nil {
		b = append(b, `,"resumeAt":`...)
		b, ok = tm.time(b, *s.ResumeAt, ok)
	}
	if s.RunAt != nil {
		b = append(b, `,"runAt":`...)
		b, ok = tm.time(b, *s.RunAt, ok)
	}
	if s.SkipUntil != nil {
		b = append(b, `,"skipUntil":`...)
		b, ok = tm.time(b, *s.SkipUntil, ok)
	}
	b = append(b, `,"spread":`...)
	b = strconv.AppendBool(b, s.Spread)
	if s.StartAt != nil {
		b = append(b, `,"startAt":`...)
		b, ok = tm.time(b, *s.StartAt, ok)
	}
	b = append(b, `,"state":`...)
	b = jsonappend.String(b, string(s.State))
	b = append(b, `,"target":{`...)
	if s.Target.QueueUrl != nil {
		b = append(b, `"queueUrl":`...)
		b = jsonappend.String(b, *s.Target.QueueUrl)
		b = append(b, ',')
	}
	b = append(b, `"type":`...)
	b = jsonappend.String(b, string(s.Target.Type))
	if s.Target.Url != nil {
		b = append(b, `,"url":`...)
		b = jsonappend.String(b, *s.Target.Url)
	}
	b = append(b, `},"timezone":`...)
	b = jsonappend.String(b, s.Timezone)
	b = append(b, `,"updatedAt":`...)
	b, ok = tm.time(b, s.UpdatedAt, ok)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, s.Version, 10)
	if s.Window != nil {
		b = append(b, `,"window":`...)
		b = jsonappend.String(b, *s.Window)
	}
	b = append(b, '}')
	if !ok {
		// A value jsonappend.Time or jsonappend.Raw left to json.Marshal.
		return appendMarshal(b[:start], s)
	}
	return b, nil
}

// appendLabels appends l as json.Marshal writes a map: keys sorted.
func appendLabels(b []byte, l api.Labels) []byte {
	if l == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(l)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonappend.String(b, k)
		b = append(b, ':')
		b = jsonappend.String(b, l[k])
	}
	return append(b, '}')
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	m, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, m...), nil
}
