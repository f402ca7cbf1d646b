package model

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strconv"
	"strings"
)

// DeliveryToken is the release token a delivery of e carries: a tag of
// this copy of e, the queue-shard fence e was sent under and the number of
// the attempt it is (the message's attempt), joined by dots:
// <tag>.<fence>.<attempt>. The tag is an HMAC of fence and attempt under
// e's ReleaseToken (appendCopyTag), so a token shows neither the event's secret
// nor a way to make the token of another copy.
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
	var sfx [32]byte
	suffix := strconv.AppendInt(sfx[:0], e.Fence, 10)
	suffix = append(suffix, '.')
	suffix = strconv.AppendInt(suffix, int64(e.Attempts)+1, 10)
	var out [96]byte
	b := appendCopyTag(out[:0], e.ReleaseToken, suffix)
	return string(append(append(b, '.'), suffix...))
}

// appendCopyTag appends the tag of the copy named by suffix
// ("<fence>.<attempt>") of an event whose ReleaseToken is secret: 16 bytes
// of HMAC-SHA256 under secret of copyTagLabel + suffix, in hex. HMAC is
// computed here on stack buffers: crypto/hmac allocates its state for
// every key, and every delivery has a key of its own.
func appendCopyTag(dst []byte, secret string, suffix []byte) []byte {
	var key [sha256.BlockSize]byte
	if len(secret) > sha256.BlockSize {
		sum := sha256.Sum256([]byte(secret))
		copy(key[:], sum[:])
	} else {
		copy(key[:], secret)
	}
	var buf [sha256.BlockSize + 128]byte
	b := buf[:sha256.BlockSize]
	for i, k := range key {
		b[i] = k ^ 0x36
	}
	b = append(append(b, copyTagLabel...), suffix...)
	inner := sha256.Sum256(b)
	b = buf[:sha256.BlockSize]
	for i, k := range key {
		b[i] = k ^ 0x5c
	}
	outer := sha256.Sum256(append(b, inner[:]...))
	return hex.AppendEncode(dst, outer[:16])
}

const copyTagLabel = "schedulerd delivery token v1\x00"

// MatchDeliveryToken reports whether token is a delivery token of an event
// whose ReleaseToken is secret, and which copy it names (fence and attempt
// as ParseDeliveryToken gives them). Tokens of the forms older versions
// issued, the secret itself with or without ".<fence>[.<attempt>]", match
// too; whether the copy they name is current is Superseded's to say.
// Comparisons are constant-time.
func MatchDeliveryToken(secret, token string) (fence int64, attempt int, ok bool) {
	head, fence, attempt := ParseDeliveryToken(token)
	if secret == "" {
		return 0, 0, false
	}
	if subtle.ConstantTimeCompare([]byte(head), []byte(secret)) == 1 {
		return fence, attempt, true
	}
	if fence == 0 || attempt == 0 {
		return 0, 0, false
	}
	var tag [32]byte
	want := appendCopyTag(tag[:0], secret, []byte(token[len(head)+1:]))
	return fence, attempt, subtle.ConstantTimeCompare([]byte(head), want) == 1
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
