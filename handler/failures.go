package handler

import (
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/tracing"
	"github.com/schedulerd/schedulerd/model"
)

// Failed and dead deliveries are logged at most once per target (HTTP host,
// SQS queue) and level per failureLogEvery, with the number of lines left
// out since; a consumer that is down for hours costs a line every few
// seconds, not one per event.
const (
	failureLogEvery = 10 * time.Second
	// failureLogTargets bounds the targets tracked; beyond it, the
	// targets not seen yet share one line per interval.
	failureLogTargets = 1024
	// overflowTarget names the shared line.
	overflowTarget = "(other targets)"
)

// failureLog samples the log lines of failed deliveries.
type failureLog struct {
	mu      sync.Mutex
	targets map[failureKey]*sampled
}

type failureKey struct {
	target string
	dead   bool
}

type sampled struct {
	next       time.Time // no line before this
	suppressed int       // lines left out since the last one
}

// allow reports whether a line about key may be written at now and how many
// were left out before it. A target not tracked yet while the map is full
// shares the overflow entry.
func (f *failureLog) allow(key failureKey, now time.Time) (bool, failureKey, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.targets == nil {
		f.targets = map[failureKey]*sampled{}
	}
	s := f.targets[key]
	if s == nil && len(f.targets) >= failureLogTargets {
		// Forget the targets quiet for a whole interval (nothing left
		// out to report), then share the overflow entry if still full.
		for k, v := range f.targets {
			if v.suppressed == 0 && !now.Before(v.next) {
				delete(f.targets, k)
			}
		}
		if len(f.targets) >= failureLogTargets {
			key.target = overflowTarget
			s = f.targets[key]
		}
	}
	if s == nil {
		s = &sampled{}
		f.targets[key] = s
	}
	if now.Before(s.next) {
		s.suppressed++
		return false, key, 0
	}
	n := s.suppressed
	s.next, s.suppressed = now.Add(failureLogEvery), 0
	return true, key, n
}

// targetOf names an event's target for sampling: the host of an http or
// http_batch target (never its path or credentials), the queue of an SQS
// one.
func targetOf(t model.Target) string {
	switch t.Type {
	case model.TargetHTTP, model.TargetHTTPBatch:
		if u, err := url.Parse(t.URL); err == nil && u.Host != "" {
			return u.Host
		}
	case model.TargetSQS:
		return t.QueueURL
	}
	return string(t.Type)
}

// logFailure logs a failed attempt of e (dead: its last one), sampled;
// attempt is the traceparent of the attempt's span ("": none).
func (h *Handler) logFailure(e *model.Event, attempt string, r delivery.Result, reason delivery.Reason, dead bool, now time.Time) {
	ok, key, suppressed := h.failures.allow(failureKey{target: targetOf(e.Target), dead: dead}, now)
	if !ok {
		return
	}
	var ev *zerolog.Event
	msg := "delivery failed; will retry"
	if dead {
		ev, msg = h.log.Error(), "delivery failed for good; event is dead"
	} else {
		ev = h.log.Warn()
	}
	ev = ev.Str("target", key.target).Str(logkey.Event, e.ID).Str(logkey.Schedule, e.ScheduleID).
		Str("reason", string(reason)).Int("attempt", e.Attempts+1).Err(r.Err)
	if e.PolicyID != "" {
		ev = ev.Str(logkey.Policy, e.PolicyID)
	}
	if r.StatusCode != 0 {
		ev = ev.Int("status", r.StatusCode)
	}
	if suppressed > 0 {
		ev = ev.Int("suppressed", suppressed)
	}
	if attempt == "" {
		attempt = e.TraceParent // no span of the attempt: its fire's
	}
	if sc := tracing.Parse(attempt); sc.IsValid() {
		ev = ev.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
	ev.Msg(msg)
}
