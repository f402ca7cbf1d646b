package consumer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of an HTTP delivery.
const (
	HeaderSignature  = "X-Scheduler-Signature"
	HeaderTimestamp  = "X-Scheduler-Timestamp"
	HeaderEventID    = "X-Scheduler-Event-Id"
	HeaderEventCount = "X-Scheduler-Event-Count" // http_batch targets
	// HeaderTraceparent is the W3C trace context of the delivery, when the
	// scheduler traces.
	HeaderTraceparent = "traceparent"
)

// DefaultTolerance is how far a signed timestamp may be from the
// consumer's clock unless Verifier.Tolerance says otherwise.
const DefaultTolerance = 5 * time.Minute

// The reasons a signature is refused; a *SignatureError wraps one of them,
// so test with errors.Is.
var (
	// ErrNoSignature: the request carries no X-Scheduler-Signature with a
	// v1 signature, or no X-Scheduler-Timestamp.
	ErrNoSignature = errors.New("no v1 signature")
	// ErrBadSignature: no v1 signature matches the body and timestamp
	// under any of the secrets (a wrong secret or a changed body), or the
	// timestamp is not unix seconds.
	ErrBadSignature = errors.New("signature does not match")
	// ErrStale: the signature matches but its timestamp is further from
	// now than the tolerance, as a replayed request's is.
	ErrStale = errors.New("timestamp outside tolerance")
)

// SignatureError is the error of a refused signature. Reason is
// ErrNoSignature, ErrBadSignature or ErrStale.
type SignatureError struct {
	Reason error
	// Detail says what was found, without secrets.
	Detail string
}

func (e *SignatureError) Error() string {
	if e.Detail == "" {
		return "consumer: " + e.Reason.Error()
	}
	return "consumer: " + e.Reason.Error() + ": " + e.Detail
}

func (e *SignatureError) Unwrap() error { return e.Reason }

// Verifier checks the signature of a delivery. The zero value refuses
// everything; a Verifier is safe for concurrent use once set up.
type Verifier struct {
	// Secrets are the signing secrets; a request signed under any one of
	// them is accepted. While the scheduler's secret is rotated, list the
	// new and the old one.
	Secrets [][]byte
	// Tolerance is how far the signed timestamp may be from Now, either
	// way; a request outside it is refused with ErrStale, so that a
	// captured request cannot be replayed later. Zero means
	// DefaultTolerance; negative turns the check off.
	Tolerance time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// NewVerifier returns a Verifier of the given secrets with the default
// tolerance.
func NewVerifier(secrets ...string) *Verifier {
	v := &Verifier{}
	for _, s := range secrets {
		v.Secrets = append(v.Secrets, []byte(s))
	}
	return v
}

// Verify checks signature (the X-Scheduler-Signature value: one or more
// comma-separated "v1=<hex HMAC-SHA256>"), made over timestamp (the
// X-Scheduler-Timestamp value) + "." + body. body must be the raw bytes
// received: decoded and encoded again they would not match. Signatures
// are compared in constant time; one match under any secret is enough.
// It returns the signing time, or a *SignatureError.
func (v *Verifier) Verify(signature, timestamp string, body []byte) (time.Time, error) {
	timestamp = strings.TrimSpace(timestamp)
	var sigs [][]byte
	for part := range strings.SplitSeq(signature, ",") {
		h, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue // another version of the scheme
		}
		if sig, err := hex.DecodeString(h); err == nil && len(sig) == sha256.Size {
			sigs = append(sigs, sig)
		}
	}
	switch {
	case len(sigs) == 0:
		return time.Time{}, &SignatureError{Reason: ErrNoSignature, Detail: "in " + HeaderSignature + " " + strconv.Quote(truncate(signature, 80))}
	case timestamp == "":
		return time.Time{}, &SignatureError{Reason: ErrNoSignature, Detail: "no " + HeaderTimestamp}
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return time.Time{}, &SignatureError{Reason: ErrBadSignature, Detail: HeaderTimestamp + " " + strconv.Quote(truncate(timestamp, 32)) + " is not unix seconds"}
	}
	if !v.matches(sigs, timestamp, body) {
		return time.Time{}, &SignatureError{Reason: ErrBadSignature, Detail: fmt.Sprintf("%d signatures checked under %d secrets", len(sigs), len(v.Secrets))}
	}
	signed := time.Unix(sec, 0)
	tolerance := v.Tolerance
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if d := now().Sub(signed).Abs(); tolerance > 0 && d > tolerance {
		return signed, &SignatureError{Reason: ErrStale, Detail: fmt.Sprintf("signed at %s, %s away from now (tolerance %s)", signed.UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)}
	}
	return signed, nil
}

// matches reports whether one of sigs is the MAC of timestamp.body under
// one of the secrets, comparing every pair in constant time.
func (v *Verifier) matches(sigs [][]byte, timestamp string, body []byte) bool {
	ok := false
	for _, secret := range v.Secrets {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(timestamp))
		m.Write([]byte{'.'})
		m.Write(body)
		want := m.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				ok = true
			}
		}
	}
	return ok
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
