package delivery

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

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
	str := func(s string) {
		if !plain(s) {
			ok = false
		}
		b = append(b, '"')
		b = append(b, s...)
		b = append(b, '"')
	}
	b = append(b, `{"eventId":`...)
	str(e.ID)
	b = append(b, `,"scheduleId":`...)
	str(e.ScheduleID)
	b = append(b, `,"fireId":`...)
	str(e.FireID)
	b = append(b, `,"fireTime":`...)
	b, ok = appendTime(b, e.FireTime.UTC(), ok)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(e.Index), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(e.Count), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempts+1), 10)
	if e.Deadline != nil {
		b = append(b, `,"deadline":`...)
		b, ok = appendTime(b, *e.Deadline, ok)
	}
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":`...)
		if b, ok = appendCompact(b, e.Payload, ok); !ok {
			return b, false
		}
	}
	b = append(b, `,"release":{"url":`...)
	b = append(b, '"')
	for _, s := range [...]string{base, "/v1/events/", e.ID, "/release"} {
		if !plain(s) {
			ok = false
		}
		b = append(b, s...)
	}
	b = append(b, `","token":`...)
	str(model.DeliveryToken(e))
	if e.PolicyID != "" && e.TokenExpiresAt != nil && !e.TokenExpiresAt.IsZero() {
		b = append(b, `,"expiresAt":`...)
		b, ok = appendTime(b, e.TokenExpiresAt.UTC(), ok)
	}
	b = append(b, "}}"...)
	return b, ok
}

// plain reports whether encoding/json writes s as it is between quotes:
// printable ASCII without the characters it escapes (", \, and <, > and &,
// which it escapes for HTML).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendTime appends t as time.Time's MarshalJSON does; false for the
// times it refuses (a year outside 0-9999, an offset of a day or more).
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}

// appendCompact appends p as json.Marshal of a json.RawMessage does:
// compacted, when p holds nothing it escapes for HTML (<, >, &, U+2028,
// U+2029). False when p is not JSON or holds such a character.
func appendCompact(b, p []byte, ok bool) ([]byte, bool) {
	if bytes.ContainsAny(p, "<>&\u2028\u2029") {
		return b, false
	}
	if !bytes.ContainsAny(p, " \t\r\n") {
		if !json.Valid(p) {
			return b, false
		}
		return append(b, p...), ok
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, p); err != nil {
		return b, false
	}
	return buf.Bytes(), ok
}
