package master

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
)

// writeBatchResult answers a batch with out, the bytes c.JSON would write
// (encoding/json, then a newline), written by appendBatchResult without
// reflection: a batch's answer holds up to a thousand schedules. A pretty
// printed answer is left to c.JSON.
func writeBatchResult(c echo.Context, out *api.ScheduleBatchResult) error {
	if _, pretty := c.QueryParams()["pretty"]; pretty || c.Echo().Debug {
		return c.JSON(http.StatusOK, out)
	}
	b, err := appendBatchResult(make([]byte, 0, 512*len(out.Items)+64), out)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, append(b, '\n'))
}

// appendBatchResult appends out to b as json.Marshal writes it. What it
// does not write itself (problems, strings that need escapes, unusual
// values) it has json.Marshal write, so the bytes are the same.
func appendBatchResult(b []byte, out *api.ScheduleBatchResult) ([]byte, error) {
	b = append(b, `{"created":`...)
	b = strconv.AppendInt(b, int64(out.Created), 10)
	b = append(b, `,"failed":`...)
	b = strconv.AppendInt(b, int64(out.Failed), 10)
	b = append(b, `,"items":`...)
	if out.Items == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	for i := range out.Items {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendBatchItemResult(b, &out.Items[i]); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

func appendBatchItemResult(b []byte, it *api.ScheduleBatchItemResult) ([]byte, error) {
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
		if b, err = appendSchedule(b, it.Schedule); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(it.Status), 10)
	return append(b, '}'), nil
}

// appendSchedule appends s as json.Marshal writes it: its members in the
// order of the struct's fields.
func appendSchedule(b []byte, s *api.Schedule) ([]byte, error) {
	if s.Payload != nil && len(*s.Payload) == 0 {
		// json.Marshal's error: an empty raw value.
		return appendMarshal(b, s)
	}
	start := len(b)
	ok := true
	b = append(b, `{"children":`...)
	b = strconv.AppendInt(b, int64(s.Children), 10)
	b = append(b, `,"createdAt":`...)
	b, ok = appendTime(b, s.CreatedAt, ok)
	if s.Cron != nil {
		b = append(b, `,"cron":`...)
		b = appendString(b, *s.Cron)
	}
	if s.EndAt != nil {
		b = append(b, `,"endAt":`...)
		b, ok = appendTime(b, *s.EndAt, ok)
	}
	b = append(b, `,"eventCount":`...)
	b = strconv.AppendInt(b, int64(s.EventCount), 10)
	b = append(b, `,"id":`...)
	b = appendString(b, s.Id)
	b = append(b, `,"maxAttempts":`...)
	b = strconv.AppendInt(b, int64(s.MaxAttempts), 10)
	b = append(b, `,"misfire":`...)
	b = appendString(b, string(s.Misfire))
	b = append(b, `,"name":`...)
	b = appendString(b, s.Name)
	b = append(b, `,"nextFireTimes":`...)
	if s.NextFireTimes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, t := range s.NextFireTimes {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendTime(b, t, ok)
		}
		b = append(b, ']')
	}
	b = append(b, `,"overlap":`...)
	b = appendString(b, string(s.Overlap))
	if s.Payload != nil {
		b = append(b, `,"payload":`...)
		b, ok = appendRaw(b, *s.Payload, ok)
	}
	if s.PolicyId != nil {
		b = append(b, `,"policyId":`...)
		b = appendString(b, *s.PolicyId)
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(s.Priority), 10)
	if s.RunAt != nil {
		b = append(b, `,"runAt":`...)
		b, ok = appendTime(b, *s.RunAt, ok)
	}
	b = append(b, `,"spread":`...)
	b = strconv.AppendBool(b, s.Spread)
	if s.StartAt != nil {
		b = append(b, `,"startAt":`...)
		b, ok = appendTime(b, *s.StartAt, ok)
	}
	b = append(b, `,"state":`...)
	b = appendString(b, string(s.State))
	b = append(b, `,"target":{`...)
	if s.Target.QueueUrl != nil {
		b = append(b, `"queueUrl":`...)
		b = appendString(b, *s.Target.QueueUrl)
		b = append(b, ',')
	}
	b = append(b, `"type":`...)
	b = appendString(b, string(s.Target.Type))
	if s.Target.Url != nil {
		b = append(b, `,"url":`...)
		b = appendString(b, *s.Target.Url)
	}
	b = append(b, `},"timezone":`...)
	b = appendString(b, s.Timezone)
	b = append(b, `,"updatedAt":`...)
	b, ok = appendTime(b, s.UpdatedAt, ok)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, s.Version, 10)
	if s.Window != nil {
		b = append(b, `,"window":`...)
		b = appendString(b, *s.Window)
	}
	b = append(b, '}')
	if !ok {
		// A value appendTime or appendRaw left to json.Marshal.
		return appendMarshal(b[:start], s)
	}
	return b, nil
}

func appendMarshal(b []byte, v any) ([]byte, error) {
	m, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, m...), nil
}

// appendString appends s quoted as json.Marshal quotes it: as it is when
// every byte is printable ASCII that needs no escape (json.Marshal escapes
// <, > and & too); otherwise by json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			m, _ := json.Marshal(s) // a string always marshals
			return append(b, m...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTime appends t as time.Time's MarshalJSON writes it (RFC 3339 with
// nanoseconds) when ok and t is within what MarshalJSON writes (a year of
// four digits, an offset under a day); otherwise it reports false, for
// the caller to have json.Marshal write the value (and give its error).
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	if !ok {
		return b, false
	}
	_, off := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || off <= -24*60*60 || off >= 24*60*60 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendRaw appends the raw JSON value v as json.Marshal writes a
// json.RawMessage (compacted, with <, >, & and U+2028, U+2029 escaped)
// when v has none of them nor white space, and so is written as it is;
// otherwise it reports false.
func appendRaw(b []byte, v []byte, ok bool) ([]byte, bool) {
	if !ok {
		return b, false
	}
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xe2: // 0xe2 leads U+2028 and U+2029
			return b, false
		}
	}
	if !json.Valid(v) {
		return b, false
	}
	return append(b, v...), true
}
