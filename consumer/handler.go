package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Func does the work of one delivery. A nil error means done: the
// delivery is acknowledged and its token released. An error means the
// scheduler should send the event again (as a failed attempt, with
// backoff, up to the schedule's maxAttempts; or after a *RetryAfterError's
// delay without counting an attempt).
type Func func(ctx context.Context, d *Delivery) error

// RetryAfterError asks the scheduler to send the event again after After,
// without counting a failed attempt: for a consumer that is overloaded
// rather than failing. The Handler answers it with 503 and Retry-After.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// DefaultMaxBody bounds the body a Handler reads unless MaxBody says
// otherwise: an http_batch request holds at most 1 MiB by default, and a
// single larger message goes alone.
const DefaultMaxBody = 4 << 20

// Handler is the http.Handler of an http or http_batch target. For each
// request it
//
//   - answers 405 to anything but POST and 413 to a body over MaxBody;
//   - verifies the signature over the raw body and answers 401 if it is
//     bad, without calling Func;
//   - parses the body (a batch if the request has X-Scheduler-Event-Count)
//     and answers 400 if it is not a delivery;
//   - calls Func with the request's context;
//   - when Func returns nil, releases the delivery if it holds a token
//     (Delivery.HoldsToken; one without needs no release) before
//     answering, so that the next event of the policy goes at once, and
//     answers 204: delivered. A release that fails (after the Client's
//     retries) is reported to OnError and still answered 204: the work is
//     done, and the policy's token timeout takes the token back;
//   - when Func returns an error, answers 503 with Retry-After for a
//     *RetryAfterError and 500 otherwise, so that the scheduler sends the
//     event again; the error goes to OnError.
//
// A batch (http_batch target) runs Func for its events one after another,
// releases those that succeeded and answers 200 with {"retry": [ids]}
// naming the others, which the scheduler sends again.
//
// Func runs while the scheduler waits for the answer, which it gives up
// after its delivery timeout (10 s by default) and counts as a failed
// attempt. Longer work should be handed off (to a queue, a goroutine) and
// released with Client.Release when it is done.
type Handler struct {
	// Verifier checks the signatures. Required.
	Verifier *Verifier
	// Func does the work. Required.
	Func Func
	// Client releases the deliveries. Nil: NewClient(Options{}).
	Client *Client
	// MaxBody bounds the request body. Zero: DefaultMaxBody.
	MaxBody int64
	// OnError, if set, is told of each request refused and each error of
	// Func or of a release, with the delivery if there is one.
	OnError func(d *Delivery, err error)

	defaultClient sync.Once
}

// ServeHTTP handles one delivery request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	limit := h.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.refuse(w, nil, http.StatusRequestEntityTooLarge, fmt.Errorf("consumer: body over %d bytes", limit))
			return
		}
		h.refuse(w, nil, http.StatusBadRequest, fmt.Errorf("consumer: read the body: %w", err))
		return
	}
	signed, err := h.Verifier.Verify(r.Header.Get(HeaderSignature), r.Header.Get(HeaderTimestamp), body)
	if err != nil {
		h.refuse(w, nil, http.StatusUnauthorized, err)
		return
	}
	batch := r.Header.Get(HeaderEventCount) != ""
	var ds []*Delivery
	if batch {
		ds, err = ParseBatch(body)
	} else {
		var d *Delivery
		d, err = Parse(body)
		ds = []*Delivery{d}
	}
	if err != nil {
		h.refuse(w, nil, http.StatusBadRequest, err)
		return
	}
	for _, d := range ds {
		d.SignedAt = signed
		d.Traceparent = r.Header.Get(HeaderTraceparent)
	}
	if !batch {
		h.serveOne(w, r.Context(), ds[0])
		return
	}
	answer := struct {
		Retry []string `json:"retry"`
	}{Retry: []string{}}
	for _, d := range ds {
		if err := h.handle(r.Context(), d); err != nil {
			answer.Retry = append(answer.Retry, d.EventID)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

func (h *Handler) serveOne(w http.ResponseWriter, ctx context.Context, d *Delivery) {
	err := h.handle(ctx, d)
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(time.Second, ra.After+time.Second-1)/time.Second)))
		http.Error(w, "retry later", http.StatusServiceUnavailable)
		return
	}
	http.Error(w, "the consumer failed; send it again", http.StatusInternalServerError)
}

// handle runs Func for d and releases d if it succeeded; the error is
// Func's.
func (h *Handler) handle(ctx context.Context, d *Delivery) error {
	if err := h.Func(ctx, d); err != nil {
		h.report(d, fmt.Errorf("consumer: event %s: %w", d.EventID, err))
		return err
	}
	if d.HoldsToken() {
		if err := h.client().Release(ctx, d); err != nil {
			h.report(d, err)
		}
	}
	return nil
}

// client is h.Client, set to NewClient(Options{}) at first use if nil.
func (h *Handler) client() *Client {
	h.defaultClient.Do(func() {
		if h.Client == nil {
			h.Client = NewClient(Options{})
		}
	})
	return h.Client
}

func (h *Handler) refuse(w http.ResponseWriter, d *Delivery, status int, err error) {
	h.report(d, err)
	http.Error(w, err.Error(), status)
}

func (h *Handler) report(d *Delivery, err error) {
	if h.OnError != nil {
		h.OnError(d, err)
	}
}
