package model

import (
	"strconv"
	"strings"
)

// DeliveryToken is the release token a delivery of e carries: e's
// ReleaseToken and, after a dot, the queue-shard fence e was sent under.
//
// The fence tells the copies of one event apart when it is sent twice: an
// event is claimed again, under a newer fence, only when the instance that
// had it may have sent it and died (a takeover, a restart). Without the fence
// the first copy's release, retried late, would release the second copy's
// token while that copy is still being worked on, one more than maxInFlight.
func DeliveryToken(e *Event) string {
	if e.Fence <= 0 {
		return e.ReleaseToken
	}
	return e.ReleaseToken + "." + strconv.FormatInt(e.Fence, 10)
}

// ParseDeliveryToken splits a token from DeliveryToken. fence is 0 for a
// token without one (sent before fences were added, or never claimed).
func ParseDeliveryToken(token string) (secret string, fence int64) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return token, 0
	}
	f, err := strconv.ParseInt(token[i+1:], 10, 64)
	if err != nil || f <= 0 {
		return token, 0
	}
	return token[:i], f
}
