package delivery

import (
	"encoding/json"
	"strconv"

	"github.com/schedulerd/schedulerd/internal/jsonappend"
	"github.com/schedulerd/schedulerd/model"
)

// AppendMessage appends the JSON of NewMessage(e, releaseBaseURL) to dst,
// byte for byte what json.Marshal of it writes, without its reflection and
// allocations. A string that encoding/json would escape, a time it would
// refuse or format otherwise, or a payload that needs compacting or HTML
// escaping is left to json.Marshal. The error is json.Marshal's (a payload
// that is not JSON).
func AppendMessage(dst []byte, e *model.Event, releaseBaseURL string) ([]byte, error) {
	start := len(dst)
	dst, ok := appendMessage(dst, e, releaseBaseURL)
	if ok {
		return dst, nil
	}
	body, err := json.Marshal(NewMessage(e, releaseBaseURL))
	if err != nil {
		return dst[:start], err
	}
	return append(dst[:start], body...), nil
}

// appendMessage is AppendMessage's own encoder; false when it cannot write
// what json.Marshal would.
func appendMessage(b []byte, e *model.Event, base string) ([]byte, bool) {
	ok := true
	str := func(s string) { b = jsonappend.String(b, s) }
	b = append(b, `{"eventId":`...)
	str(e.ID)
	b = append(b, `,"scheduleId":`...)
	str(e.ScheduleID)
	b = append(b, `,"fireId":`...)
	str(e.FireID)
	b = append(b, `,"fireTime":`...)
	b, ok = jsonappend.Time(b, e.FireTime.UTC(), ok)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(e.Index), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(e.Count), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempts+1), 10)
	if e.Deadline != nil {
		b = append(b, `,"deadline":`...)
		b, ok = jsonappend.Time(b, *e.Deadline, ok)
	}
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":`...)
		if b, ok = jsonappend.Raw(b, e.Payload, ok); !ok {
			return b, false
		}
	}
	b = append(b, `,"release":{"url":`...)
	b = append(b, '"')
	for _, s := range [...]string{base, "/v1/events/", e.ID, "/release"} {
		if !jsonappend.Plain(s) {
			ok = false
		}
		b = append(b, s...)
	}
	b = append(b, `","token":`...)
	str(model.DeliveryToken(e))
	if e.PolicyID != "" && e.TokenExpiresAt != nil && !e.TokenExpiresAt.IsZero() {
		b = append(b, `,"expiresAt":`...)
		b, ok = jsonappend.Time(b, e.TokenExpiresAt.UTC(), ok)
	}
	b = append(b, "}}"...)
	return b, ok
}
