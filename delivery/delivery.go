// Package delivery defines what a delivery attempt returns and the message
// that every transport sends, so that HTTP and SQS consumers see the same JSON.
// The transports live in delivery/httpdelivery and delivery/sqsdelivery.
package delivery

import (
	"encoding/json"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// Result is the outcome of one delivery attempt of one event.
type Result struct {
	// Err is nil when the consumer accepted the event.
	Err error
	// RetryAfter is set when the consumer asked to be called again later
	// (HTTP 429/503 with Retry-After). Such an attempt is not counted as a
	// failure of the consumer's code.
	RetryAfter time.Duration
	// Permanent marks errors that retrying cannot fix (for example a target
	// refused by the SSRF guard); the event goes to dead at once.
	Permanent bool
	// StatusCode is the HTTP status, if any.
	StatusCode int
}

// Release tells the consumer how to give the event's token back.
type Release struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	// ExpiresAt is when the event's token times out unless released or
	// extended (POST /v1/events/{id}/extend). Absent for events that hold
	// no token after delivery (no policy, or an autoRelease policy).
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// TraceParent names the W3C trace context of a delivery attempt: the HTTP
// header and the SQS message attribute that carry model.Event.TraceParent,
// so that the consumer's spans join the attempt's trace.
const TraceParent = "traceparent"

// TraceState names the W3C tracestate that goes with TraceParent, the
// HTTP header and the SQS message attribute that carry
// model.Event.TraceState when the attempt's span has one.
const TraceState = "tracestate"

// Message is the JSON body of a delivery (HTTP POST body and SQS message body).
type Message struct {
	EventID    string          `json:"eventId"`
	ScheduleID string          `json:"scheduleId"`
	FireID     string          `json:"fireId"`
	FireTime   time.Time       `json:"fireTime"`
	Index      int             `json:"index"`
	Count      int             `json:"count"`
	Attempt    int             `json:"attempt"`
	Deadline   *time.Time      `json:"deadline,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Release    Release         `json:"release"`
}

// NewMessage builds the message of e. releaseBaseURL is the public base URL
// of the service (for example "https://scheduler.internal:8080").
func NewMessage(e *model.Event, releaseBaseURL string) Message {
	m := Message{
		EventID:    e.ID,
		ScheduleID: e.ScheduleID,
		FireID:     e.FireID,
		FireTime:   e.FireTime.UTC(),
		Index:      e.Index,
		Count:      e.Count,
		Attempt:    e.Attempts + 1,
		Deadline:   e.Deadline,
		Payload:    e.Payload,
		Release: Release{
			URL:   releaseBaseURL + "/v1/events/" + e.ID + "/release",
			Token: model.DeliveryToken(e),
		},
	}
	if e.PolicyID != "" && e.TokenExpiresAt != nil {
		m.Release.ExpiresAt = e.TokenExpiresAt.UTC()
	}
	return m
}
