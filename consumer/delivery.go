package consumer

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Delivery is one event as the scheduler delivers it: the JSON body of an
// http delivery, one element of an http_batch delivery's "events", or the
// body of an SQS message.
type Delivery struct {
	// EventID is the event's id, the same on every attempt: a consumer
	// that remembers the ids it has done can skip a repeated delivery.
	EventID    string `json:"eventId"`
	ScheduleID string `json:"scheduleId"`
	// FireID names the fire (one run of the schedule) the event belongs to.
	FireID   string    `json:"fireId"`
	FireTime time.Time `json:"fireTime"`
	// Index is 0-based among the Count events of the fire.
	Index int `json:"index"`
	Count int `json:"count"`
	// Attempt is 1 on the first attempt.
	Attempt int `json:"attempt"`
	// Deadline is when the event's fire must be finished (the end of the
	// schedule's batch window, or its deadline); zero without one.
	Deadline time.Time `json:"deadline,omitzero"`
	// Payload is the schedule's payload, as given.
	Payload json.RawMessage `json:"payload,omitempty"`
	Release Release         `json:"release"`

	// Traceparent is the W3C trace context the delivery carried (the
	// traceparent header or SQS message attribute), if any. Release and
	// Extend send it on, so that they join the delivery's trace.
	Traceparent string `json:"-"`
	// SignedAt is when an HTTP delivery was signed; zero for SQS.
	SignedAt time.Time `json:"-"`
}

// Release says how to give the event's throttling token back.
type Release struct {
	// URL is the event's release URL (POST /v1/events/{id}/release).
	URL string `json:"url"`
	// Token authorises the release and extend calls of this delivery.
	// Opaque.
	Token string `json:"token"`
	// ExpiresAt is when the policy's token timeout takes the token back
	// unless it is released or extended. Zero when the delivery holds no
	// token (no policy, or an autoRelease one).
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// HoldsToken reports whether the delivery holds a throttling token that
// only a release (or the token timeout) gives back. A delivery that holds
// none needs no release: the scheduler accepts one and changes nothing.
func (d *Delivery) HoldsToken() bool { return !d.Release.ExpiresAt.IsZero() }

// ErrNotDelivery: a body that does not decode as a delivery, or lacks the
// fields the release needs.
var ErrNotDelivery = errors.New("consumer: not a delivery")

// Parse decodes the body of an http delivery or an SQS message. It does
// not check a signature: verify the raw body first.
func Parse(body []byte) (*Delivery, error) {
	var d Delivery
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotDelivery, err)
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return &d, nil
}

// ParseBatch decodes the body of an http_batch delivery, {"events": [...]}.
func ParseBatch(body []byte) ([]*Delivery, error) {
	var b struct {
		Events []*Delivery `json:"events"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotDelivery, err)
	}
	if b.Events == nil {
		return nil, fmt.Errorf("%w: no events array", ErrNotDelivery)
	}
	for i, d := range b.Events {
		if d == nil {
			return nil, fmt.Errorf("%w: events[%d] is null", ErrNotDelivery, i)
		}
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	return b.Events, nil
}

func (d *Delivery) check() error {
	switch {
	case d.EventID == "":
		return fmt.Errorf("%w: no eventId", ErrNotDelivery)
	case d.Release.Token == "":
		return fmt.Errorf("%w: event %s: no release.token", ErrNotDelivery, d.EventID)
	}
	return nil
}
