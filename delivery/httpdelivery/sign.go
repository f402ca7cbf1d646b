package httpdelivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery request.
const (
	HeaderEventID   = "X-Scheduler-Event-Id"
	HeaderTimestamp = "X-Scheduler-Timestamp"
	HeaderSignature = "X-Scheduler-Signature"
)

// signatureVersion prefixes each signature in the header so that the scheme
// can change later without breaking consumers that check v1.
const signatureVersion = "v1="

// Errors returned by Verify; test them with errors.Is.
var (
	// ErrMalformedSignature: the signature or timestamp header cannot be parsed.
	ErrMalformedSignature = errors.New("httpdelivery: malformed signature header")
	// ErrSignatureMismatch: no v1 signature in the header matches the body.
	ErrSignatureMismatch = errors.New("httpdelivery: signature does not match")
	// ErrTimestampOutOfTolerance: the timestamp is too far from now, which
	// is how a replayed old request is recognised.
	ErrTimestampOutOfTolerance = errors.New("httpdelivery: timestamp outside tolerance")
)

// Sign returns the X-Scheduler-Signature value of body sent at unix time ts:
// "v1=" followed by the hex HMAC-SHA256 under secret of "<ts>.<body>".
// The timestamp is part of the signed text so that a captured request cannot
// be replayed later with a fresh timestamp.
func Sign(secret []byte, ts int64, body []byte) string {
	return signatureVersion + hex.EncodeToString(mac(secret, strconv.FormatInt(ts, 10), body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	return appendMAC(nil, hmac.New(sha256.New, secret), []byte(ts), body)
}

// appendMAC appends the MAC of "<ts>.<body>" under h, an HMAC-SHA256 under
// the signing secret (reset first, so that a pooled one serves).
func appendMAC(dst []byte, h hash.Hash, ts, body []byte) []byte {
	h.Reset()
	h.Write(ts)
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(dst)
}

// Verify checks a delivery's signature. header is the X-Scheduler-Signature
// value, ts the X-Scheduler-Timestamp value and body the raw request body
// (read it before decoding: re-encoded JSON would not match).
//
// The header may hold several comma-separated signatures ("v1=..,v1=..") so
// that a secret can be rotated while both are in use; one match is enough.
// Signatures of other versions are ignored. Comparison is constant-time.
// If tolerance is positive, a timestamp further than tolerance from now is
// refused with ErrTimestampOutOfTolerance; 5 minutes is a sensible value.
//
// Verify returns nil, ErrMalformedSignature, ErrSignatureMismatch or
// ErrTimestampOutOfTolerance (possibly wrapped).
func Verify(secret []byte, header string, ts string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not unix seconds", ErrMalformedSignature, truncate(ts, 32))
	}
	if tolerance > 0 && absDiff(sec, now.Unix()) > uint64(tolerance/time.Second) {
		return fmt.Errorf("%w: timestamp %d, now %d", ErrTimestampOutOfTolerance, sec, now.Unix())
	}
	want := mac(secret, strings.TrimSpace(ts), body)
	found := false
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimSpace(part)
		hexSig, ok := strings.CutPrefix(part, signatureVersion)
		if !ok {
			continue
		}
		got, err := hex.DecodeString(hexSig)
		if err != nil || len(got) != sha256.Size {
			continue
		}
		found = true
		if hmac.Equal(got, want) {
			return nil
		}
	}
	if !found {
		return fmt.Errorf("%w: no v1 signature in %q", ErrMalformedSignature, truncate(header, 80))
	}
	return ErrSignatureMismatch
}

// absDiff returns |a-b| without overflow: the true difference of two int64
// values always fits in a uint64, and unsigned subtraction computes it.
func absDiff(a, b int64) uint64 {
	if a >= b {
		return uint64(a) - uint64(b)
	}
	return uint64(b) - uint64(a)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
