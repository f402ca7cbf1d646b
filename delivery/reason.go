package delivery

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/schedulerd/schedulerd/model"
)

// ErrTargetRefused is wrapped by the error of an attempt whose target the
// SSRF guard refused (httpdelivery.ErrTargetRefused wraps it).
var ErrTargetRefused = errors.New("target address refused by the SSRF guard")

// Reason is why a delivery attempt failed; a small fixed set, fit for a
// metric label.
type Reason string

const (
	ReasonTimeout Reason = "timeout"  // no answer in time
	ReasonRefused Reason = "refused"  // connection refused
	ReasonSSRF    Reason = "ssrf"     // target refused by the SSRF guard
	ReasonHTTP4xx Reason = "http_4xx" // the consumer answered 4xx (429 included)
	ReasonHTTP5xx Reason = "http_5xx" // the consumer answered 5xx
	ReasonSQS     Reason = "sqs"      // SQS refused or failed the send
	ReasonOther   Reason = "other"    // anything else (DNS, TLS, encoding...)
)

// Reasons lists every Reason.
var Reasons = []Reason{ReasonTimeout, ReasonRefused, ReasonSSRF, ReasonHTTP4xx, ReasonHTTP5xx, ReasonSQS, ReasonOther}

// ReasonOf classifies the failed attempt r at a target of type tt; "" if r
// succeeded.
func ReasonOf(tt model.TargetType, r Result) Reason {
	if r.Err == nil {
		return ""
	}
	var ne net.Error
	switch {
	case errors.Is(r.Err, ErrTargetRefused):
		return ReasonSSRF
	case r.StatusCode >= 500:
		return ReasonHTTP5xx
	case r.StatusCode >= 400:
		return ReasonHTTP4xx
	case tt == model.TargetSQS:
		return ReasonSQS
	case errors.Is(r.Err, context.DeadlineExceeded), errors.As(r.Err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(r.Err, syscall.ECONNREFUSED):
		return ReasonRefused
	}
	return ReasonOther
}
