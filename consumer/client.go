package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/client"
)

// Options configure a Client. Zero values mean the documented defaults.
type Options struct {
	// BaseURL, if set, is where release and extend calls go
	// (BaseURL + "/v1/events/{id}/release"), instead of the URL the
	// delivery names: for a consumer that reaches the scheduler at another
	// address than the one it advertises.
	BaseURL string
	// HTTPClient makes the calls. Default: a client with a 10 s timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of one call. Default 5.
	MaxAttempts int
}

// Backoff between tries, unless the scheduler says Retry-After.
const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = 10 * time.Second
)

// Client makes a delivery's release and extend calls. They are authorised
// by the delivery's release token, not an API key. It is safe for
// concurrent use.
type Client struct {
	opts Options
	// sleep waits d or until ctx ends; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
}

// NewClient returns a Client with opts.
func NewClient(opts Options) *Client {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	return &Client{opts: opts, sleep: sleep, now: time.Now}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// ErrSuperseded: the scheduler answered 409 to a release or extend. The
// delivery was superseded (the event was claimed again or retried and is
// or will be delivered again; that copy is the one to release), or, for
// extend, the event holds no token any more. Retrying does not help.
var ErrSuperseded = errors.New("consumer: superseded or holds no token")

// APIError is the scheduler's answer to a release or extend call that
// failed: its status and the problem details it gave.
type APIError struct {
	Op         string // "release" or "extend"
	EventID    string
	StatusCode int
	Problem    client.Problem
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("consumer: %s of event %s: status %d", e.Op, e.EventID, e.StatusCode)
	if e.Problem.Title != "" {
		msg += ": " + e.Problem.Title
	}
	if e.Problem.Detail != nil {
		msg += ": " + *e.Problem.Detail
	}
	return msg
}

// Is makes a 409 match ErrSuperseded.
func (e *APIError) Is(target error) bool {
	return target == ErrSuperseded && e.StatusCode == http.StatusConflict
}

// Release gives the delivery's throttling token back, so that the next
// waiting event of its policy can go. Releasing twice is harmless. A
// delivery that holds no token may be released too: the scheduler
// answers 200 and gives nothing back.
//
// A connection error, a timeout and the answers 408, 429, 500, 502, 503
// and 504 are tried again, up to Options.MaxAttempts tries, after
// Retry-After if the scheduler sent one and otherwise after an
// exponential backoff with full jitter; ctx bounds it all, and a
// Retry-After beyond ctx's deadline ends it at once. Other answers fail
// with an *APIError (404: unknown event or wrong token; 409:
// ErrSuperseded).
func (c *Client) Release(ctx context.Context, d *Delivery) error {
	u, err := c.url(d, "release")
	if err != nil {
		return err
	}
	return c.call(ctx, "release", d, u, client.ReleaseRequest{Token: d.Release.Token}, nil)
}

// Extend pushes back the token timeout of the delivery by by (zero: the
// policy's token timeout) and returns the new expiry. Retries as Release.
func (c *Client) Extend(ctx context.Context, d *Delivery, by time.Duration) (time.Time, error) {
	u, err := c.url(d, "extend")
	if err != nil {
		return time.Time{}, err
	}
	req := client.ExtendRequest{Token: d.Release.Token}
	if by != 0 {
		s := by.String()
		req.ExtendBy = &s
	}
	var st client.EventState
	if err := c.call(ctx, "extend", d, u, req, &st); err != nil {
		return time.Time{}, err
	}
	if st.TokenExpiresAt == nil {
		return time.Time{}, fmt.Errorf("consumer: extend of event %s: the answer has no tokenExpiresAt", d.EventID)
	}
	return *st.TokenExpiresAt, nil
}

// url is the address of op ("release" or "extend") of d.
func (c *Client) url(d *Delivery, op string) (string, error) {
	if c.opts.BaseURL != "" {
		return c.opts.BaseURL + "/v1/events/" + url.PathEscape(d.EventID) + "/" + op, nil
	}
	base, ok := strings.CutSuffix(d.Release.URL, "/release")
	if !ok {
		return "", fmt.Errorf("consumer: %s of event %s: release.url %q does not end in /release", op, d.EventID, d.Release.URL)
	}
	return base + "/" + op, nil
}

// call POSTs in to u, retrying as Release says, and decodes a 200 answer
// into out (if not nil).
func (c *Client) call(ctx context.Context, op string, d *Delivery, u string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("consumer: %s of event %s: %w", op, d.EventID, err)
	}
	for attempt := 1; ; attempt++ {
		wait, err := c.try(ctx, op, d, u, body, out)
		if err == nil || wait < 0 {
			return err
		}
		if attempt >= c.opts.MaxAttempts {
			return fmt.Errorf("%w (after %d tries)", err, attempt)
		}
		if wait == 0 {
			// Full jitter: a uniform wait up to the exponential bound, so
			// that consumers released by one outage do not return in step.
			wait = rand.N(min(backoffBase<<min(attempt-1, 16), backoffMax)) + time.Millisecond
		}
		if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
			return fmt.Errorf("%w (the next try, in %s, would be after the context's deadline)", err, wait)
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%w (waiting to try again: %w)", err, serr)
		}
	}
}

// try makes one call. wait is negative when the error is final, else the
// Retry-After the scheduler asked for (0: none).
func (c *Client) try(ctx context.Context, op string, d *Delivery, u string, body []byte, out any) (wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("consumer: %s of event %s: %w", op, d.EventID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if d.Traceparent != "" {
		req.Header.Set(HeaderTraceparent, d.Traceparent)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("consumer: %s of event %s: %w", op, d.EventID, err)
		}
		return 0, fmt.Errorf("consumer: %s of event %s: %w", op, d.EventID, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		if err != nil {
			return 0, fmt.Errorf("consumer: %s of event %s: read the answer: %w", op, d.EventID, err)
		}
		if out != nil {
			if err := json.Unmarshal(answer, out); err != nil {
				return -1, fmt.Errorf("consumer: %s of event %s: decode the answer: %w", op, d.EventID, err)
			}
		}
		return 0, nil
	}
	apiErr := &APIError{Op: op, EventID: d.EventID, StatusCode: resp.StatusCode}
	_ = json.Unmarshal(answer, &apiErr.Problem) // best effort: a proxy may answer in text
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After"), c.now()), apiErr
	}
	return -1, apiErr
}

// retryAfter reads a Retry-After value, delay seconds or an HTTP date; 0
// when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
