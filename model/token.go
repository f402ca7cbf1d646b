package model

import (
	"strconv"
	"strings"
)

// DeliveryToken is the release token a delivery of e carries: e's
// ReleaseToken, the queue-shard fence e was sent under and the number of the
// attempt it is (the message's attempt), joined by dots:
// <secret>.<fence>.<attempt>.
//
// Fence and attempt tell the copies of one event apart when it is sent
// again: under a newer fence after a takeover or restart (the instance that
// had it may have sent it and died), or under the same fence as the retry the
// token timeout made of a delivery still in progress. Without them the first
// copy's release, arriving late, would release the second copy's token while
// that copy is still being worked on, one more than maxInFlight.
func DeliveryToken(e *Event) string {
	if e.Fence <= 0 {
		return e.ReleaseToken
	}
	return e.ReleaseToken + "." + strconv.FormatInt(e.Fence, 10) + "." + strconv.Itoa(e.Attempts+1)
}

// ParseDeliveryToken splits a token from DeliveryToken. fence and attempt
// are 0 when the token does not carry them (a token sent before they were
// added, or of an event never claimed); a token with a fence but no attempt
// has attempt 0.
func ParseDeliveryToken(token string) (secret string, fence int64, attempt int) {
	head, last, ok := splitNumber(token)
	if !ok {
		return token, 0, 0
	}
	if h, f, ok := splitNumber(head); ok && last <= maxAttempt {
		return h, f, int(last)
	}
	return head, last, 0
}

// maxAttempt bounds the attempt a token may name, far above any schedule's
// maxAttempts, so that it fits an int everywhere.
const maxAttempt = 1 << 30

// splitNumber splits s at its last dot when what follows is a positive
// decimal number.
func splitNumber(s string) (head string, n int64, ok bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return s, 0, false
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return s, 0, false
	}
	return s[:i], n, true
}

// CurrentAttempt is the number of the attempt whose delivery holds, or will
// hold, e's token: a delivered event has counted its attempt already, any
// other status has not yet.
func CurrentAttempt(e *Event) int {
	if e.Status == EventDelivered {
		return e.Attempts
	}
	return e.Attempts + 1
}

// Superseded reports whether a delivery token naming fence and attempt did
// not come with the copy of e that holds or will hold its token: e was
// claimed again under a newer fence, or its token timed out during that
// attempt and it was retried, or it was redriven. Such a copy's release or
// extend must not touch e's token. Once e was claimed under a fence, only
// the exact fence and attempt of its current copy pass: a token without
// them (cut off, or of the form older versions issued) or naming others
// would otherwise release the current copy's token from an older copy.
// An event never claimed under a fence has tokens without one
// (DeliveryToken), which are not checked.
func Superseded(e *Event, fence int64, attempt int) bool {
	if e.Fence <= 0 {
		return false
	}
	return fence != e.Fence || attempt != CurrentAttempt(e)
}
