package store

import (
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// The event state machine: every status change of an event is built by one
// of these constructors and written with EventStore.EventTransition. A fence
// of 0 means the write is not bound to a shard lease (the API's writes).

// StartDelivery gives a throttled event its token: scheduled → delivering
// under the shard fence it was claimed with, the token held until tokenUntil.
func StartDelivery(id string, fence int64, tokenUntil, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventScheduled, Fence: fence,
		To: model.EventDelivering, TokenExpiresAt: &tokenUntil, At: now}
}

// AfterPrevious makes t apply only if the transition before it in the same
// call won (see RequiresPrevious): the start of the event that a release
// hands its token to.
func (t EventTransition) AfterPrevious() EventTransition {
	t.RequiresPrevious = true
	return t
}

// HandBack returns an event that holds a token but was not sent to pending
// and clears its token (the caller gives the token back).
func HandBack(id string, fence int64, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventDelivering, Fence: fence,
		To: model.EventPending, ClearToken: true, At: now}
}

// RenewToken moves the token expiry of an event that waited between taking
// its token and its send, before the send.
func RenewToken(id string, fence int64, until, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventDelivering, Fence: fence,
		To: model.EventDelivering, TokenExpiresAt: &until, At: now}
}

// ExtendToken is the consumer's heartbeat: the token of an event in the
// token-holding status from is kept until until. Like Release, it applies
// only while the event is the copy sent under fence in attempt attempt (0:
// any), so that an older copy's extend does not move a retry's expiry.
func ExtendToken(id string, from model.EventStatus, fence int64, attempt int, until, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, Fence: fence, To: from, TokenExpiresAt: &until,
		AttemptsAtMost: attemptsAtMost(from, attempt), At: now}
}

// attemptsAtMost is the most attempts an event in the token-holding status
// from may have counted while its token is still attempt's: delivered has
// counted it, delivering not yet. nil for attempt 0 (any).
func attemptsAtMost(from model.EventStatus, attempt int) *int {
	if attempt <= 0 {
		return nil
	}
	n := attempt - 1
	if from == model.EventDelivered {
		n = attempt
	}
	return &n
}

// Release is the consumer's release of an event holding a token (from is
// delivering or delivered): released, finished now, token cleared. It
// applies only while the event is still the copy the consumer got: claimed
// under fence (0: any) and in its attempt number attempt (see
// model.DeliveryToken; 0: any), whose delivery has at most Attempts
// attempt-1 while delivering and attempt once delivered. A copy sent again
// since (claimed under a newer fence, or retried after its token timed out)
// holds the token now, and an older copy's release must not free it.
func Release(id string, from model.EventStatus, fence int64, attempt int, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, Fence: fence, To: model.EventReleased,
		FinishedAt: &now, ClearToken: true, AttemptsAtMost: attemptsAtMost(from, attempt), At: now}
}

// ReleaseFrom is the release t (built by Release) tried again from the
// token-holding status from: the same copy, whose delivery moved between
// delivering and delivered meanwhile.
func (t EventTransition) ReleaseFrom(from model.EventStatus) EventTransition {
	attempt := 0
	if t.AttemptsAtMost != nil {
		attempt = *t.AttemptsAtMost + 1
		if t.From == model.EventDelivered {
			attempt = *t.AttemptsAtMost
		}
	}
	return Release(t.ID, from, t.Fence, attempt, *t.FinishedAt)
}

// Acknowledge is the consumer's release of an unthrottled event whose
// delivery outcome is not written yet (from is scheduled or retrying): it
// finishes as released and is not delivered again.
func Acknowledge(id string, from model.EventStatus, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, To: model.EventReleased, FinishedAt: &now, At: now}
}

// AcknowledgeSent is the consumer's release of a throttled event still
// scheduled (under fence) whose attempt attempt reached it: it was sent
// early (before the write that starts it and takes its token) and that
// write never applied, the sender having died first. It holds no token, so
// it finishes as released like an acknowledged unthrottled event, and is
// not sent again.
func AcknowledgeSent(id string, fence int64, attempt int, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventScheduled, Fence: fence, To: model.EventReleased,
		FinishedAt: &now, AttemptsAtMost: attemptsAtMost(model.EventScheduled, attempt), At: now}
}

// Redrive sends a dead event again from its first attempt, now: attempts
// reset and the finished attempt's outcome (finishedAt, deliveredAt,
// tokenTimedOut, any token) cleared. LastError stays: it is the error that
// made the event dead until a new attempt fails.
func Redrive(id string, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventDead, To: model.EventPending,
		LaunchAt: now, ResetAttempts: true, ClearOutcome: true, ClearToken: true, At: now}
}

// RedriveExpired is Redrive of an expired event: it also drops its
// expiry, so that it is sent although its deadline has passed.
func RedriveExpired(id string, now time.Time) EventTransition {
	t := Redrive(id, now)
	t.From, t.ClearExpiry = model.EventExpired, true
	return t
}

// Delivered records a successful attempt whose consumer keeps the token
// until it releases it: delivering → delivered. attempts counts every
// attempt made, this one included.
func Delivered(id string, fence int64, attempts int, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventDelivering, Fence: fence,
		To: model.EventDelivered, Attempts: attempts, DeliveredAt: &now, At: now}
}

// DeliveredReleased records a successful attempt that finishes the event
// at once (unthrottled, or an autoRelease policy); holdsToken clears the
// token of a throttled one.
func DeliveredReleased(id string, from model.EventStatus, fence int64, attempts int, holdsToken bool, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, Fence: fence, To: model.EventReleased,
		Attempts: attempts, DeliveredAt: &now, FinishedAt: &now, ClearToken: holdsToken, At: now}
}

// DeliveredAfterCancel records a successful attempt on an event that was
// cancelled (its schedule paused or deleted) while its deliverer already
// held it: the store must not say cancelled for a delivered event. It is not
// bound to a fence: whoever sent it knows that it was delivered.
func DeliveredAfterCancel(id string, attempts int, deliveredAt, now time.Time) EventTransition {
	return EventTransition{ID: id, From: model.EventCancelled, To: model.EventReleased,
		Attempts: attempts, DeliveredAt: &deliveredAt, FinishedAt: &now, At: now}
}

// DeliveredAfterRelease records a successful attempt whose outcome write
// lost to the consumer's release: a consumer may release (Acknowledge,
// Release) before its answer reaches the deliverer, and the event then is
// released with neither the attempt nor deliveredAt. attempts and
// deliveredAt are the lost outcome's; the release's finishedAt stays. It
// applies only while the stored Attempts does not count this attempt yet,
// so that a copy whose outcome was written keeps its own record; like
// DeliveredAfterCancel it is not bound to a fence.
func DeliveredAfterRelease(id string, attempts int, deliveredAt, now time.Time) EventTransition {
	below := attempts - 1
	return EventTransition{ID: id, From: model.EventReleased, To: model.EventReleased,
		Attempts: attempts, DeliveredAt: &deliveredAt, AttemptsAtMost: &below, At: now}
}

// Retry records a failed attempt to be tried again at launchAt. attempts 0
// keeps the stored count (a consumer that asked to be called later);
// holdsToken clears the token of a throttled event.
func Retry(id string, from model.EventStatus, fence int64, attempts int, launchAt time.Time, lastError string, holdsToken bool, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, Fence: fence, To: model.EventRetrying,
		Attempts: attempts, LaunchAt: launchAt, LastError: lastError, ClearToken: holdsToken, At: now}
}

// Dead ends an event that will not be delivered: attempts exhausted, a
// permanent failure, or its policy gone. attempts 0 keeps the stored count;
// holdsToken clears the token of a throttled event.
func Dead(id string, from model.EventStatus, fence int64, attempts int, lastError string, holdsToken bool, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, Fence: fence, To: model.EventDead,
		Attempts: attempts, LastError: lastError, FinishedAt: &now, ClearToken: holdsToken, At: now}
}

// Expired ends an event not attempted (again) because its ExpireAt
// passed; holdsToken clears the token of a throttled event. attempts 0
// keeps the stored count.
func Expired(id string, from model.EventStatus, fence int64, attempts int, lastError string, holdsToken bool, now time.Time) EventTransition {
	return EventTransition{ID: id, From: from, Fence: fence, To: model.EventExpired,
		Attempts: attempts, LastError: lastError, FinishedAt: &now, ClearToken: holdsToken, At: now}
}

// ReclaimToken takes back the token of e, which expired by now. A delivered
// event is released with TokenTimedOut; one still delivering (nobody knows
// whether its consumer got it) counts an attempt and is retried now, or is
// dead once it reached maxAttempts. The write applies only if the stored
// token has not been renewed past now (TokenExpiredBy).
func ReclaimToken(e *model.Event, maxAttempts int, now time.Time) EventTransition {
	tr := EventTransition{ID: e.ID, From: e.Status, At: now, ClearToken: true, TokenExpiredBy: &now}
	if e.Status == model.EventDelivered {
		tr.To, tr.TokenTimedOut, tr.FinishedAt = model.EventReleased, true, &now
		return tr
	}
	tr.Attempts = e.Attempts + 1
	tr.LastError = "token timed out before the delivery attempt finished"
	if tr.Attempts >= maxAttempts {
		tr.To, tr.FinishedAt = model.EventDead, &now
	} else {
		tr.To, tr.LaunchAt = model.EventRetrying, now
	}
	return tr
}

// Conflicts reports whether e is not as t requires (its From status,
// Fence, TokenExpiredBy and AttemptsAtMost): the transition then answers
// model.ErrConflict and changes nothing.
func (t *EventTransition) Conflicts(e *model.Event) bool {
	return e.Status != t.From || (t.Fence != 0 && e.Fence != t.Fence) ||
		(t.TokenExpiredBy != nil && (e.TokenExpiresAt == nil || e.TokenExpiresAt.After(*t.TokenExpiredBy))) ||
		(t.AttemptsAtMost != nil && e.Attempts > *t.AttemptsAtMost)
}

// Apply writes t's changes into e; e shares no memory with t afterwards.
// A driver that keeps events as model.Event applies a transition that does
// not conflict with it so.
func (t *EventTransition) Apply(e *model.Event) {
	e.Status = t.To
	if !t.LaunchAt.IsZero() {
		e.LaunchAt = t.LaunchAt
	}
	if t.Attempts != 0 {
		e.Attempts = t.Attempts
	}
	if t.ResetAttempts {
		e.Attempts = 0
	}
	if t.LastError != "" {
		e.LastError = t.LastError
	}
	if t.TokenExpiresAt != nil {
		e.TokenExpiresAt = copyTime(t.TokenExpiresAt)
	}
	if t.ClearToken {
		e.TokenExpiresAt = nil
	}
	if t.TokenTimedOut {
		e.TokenTimedOut = true
	}
	if t.DeliveredAt != nil {
		e.DeliveredAt = copyTime(t.DeliveredAt)
	}
	if t.FinishedAt != nil {
		e.FinishedAt = copyTime(t.FinishedAt)
	}
	if t.ClearOutcome {
		e.DeliveredAt, e.FinishedAt, e.TokenTimedOut = nil, nil, false
	}
	if t.ClearExpiry {
		e.ExpireAt = nil
	}
	if !t.At.IsZero() {
		e.UpdatedAt = t.At
	}
}

func copyTime(t *time.Time) *time.Time {
	c := *t
	return &c
}
