// Package chaoskit holds what the chaos tests (package chaos) and the benchmark
// command (cmd/schedbench) share: a small REST client of schedulerd that
// survives dying instances, and a recording HTTP consumer that verifies
// signatures, counts every delivery, checks the throttle bound at every
// delivery and releases tokens with fail-over between instances.
//
// It uses only net/http and encoding/json, so that it exercises the API the
// way an outside client does.
package chaoskit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Client calls the schedulerd REST API of a deployment of one or more
// instances. Every call tries the instances in turn: a connection error or a
// 5xx answer moves on to the next one, until CallTimeout. Creates carry an
// Idempotency-Key, so retrying them against another instance is safe.
type Client struct {
	// Bases returns the base URLs of the instances to try, for example
	// "http://127.0.0.1:8080". It is called for every attempt, so that a
	// test can leave out instances it killed.
	Bases func() []string
	// Key is the bearer key (the admin key for tenants and keys, a tenant
	// key for the rest).
	Key string
	// HTTP is the client used; a client with a 10s timeout if nil.
	HTTP *http.Client
	// CallTimeout bounds the retries of one call. Default 60s.
	CallTimeout time.Duration

	next atomic.Uint64
}

// NewClient returns a client of the instances at bases.
func NewClient(key string, bases ...string) *Client {
	return &Client{Key: key, Bases: func() []string { return bases }}
}

// WithKey returns a copy of c that authenticates with key.
func (c *Client) WithKey(key string) *Client {
	return &Client{Bases: c.Bases, Key: key, HTTP: c.HTTP, CallTimeout: c.CallTimeout}
}

// APIError is a non-2xx answer that is not retried.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Body)
}

// StatusOf returns the HTTP status of an *APIError, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// retryMode says when a call may be sent again to another instance.
type retryMode int

const (
	retryAlways retryMode = iota // idempotent: reads, creates with an Idempotency-Key, release
	retryDial                    // not idempotent: only when the request never left (connection refused)
)

// Do sends one request and decodes a 2xx JSON answer into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	mode := retryAlways
	if method == http.MethodPost && strings.HasSuffix(path, "/trigger") {
		mode = retryDial
	}
	return c.do(ctx, method, path, in, out, mode)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any, mode retryMode) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	idem := ""
	if method == http.MethodPost && mode == retryAlways && !strings.Contains(path, "/events/") {
		idem = randomID()
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	timeout := c.CallTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		bases := c.Bases()
		if len(bases) == 0 {
			last = errors.New("no instance to call")
		} else {
			base := bases[int(c.next.Add(1)%uint64(len(bases)))]
			status, data, err := c.once(ctx, hc, base, method, path, body, idem)
			switch {
			case err == nil && status >= 200 && status < 300:
				if out == nil || len(data) == 0 {
					return nil
				}
				if err := json.Unmarshal(data, out); err != nil {
					return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
				}
				return nil
			case err == nil && status < 500 && status != http.StatusTooManyRequests:
				return &APIError{Method: method, Path: path, Status: status, Body: strings.TrimSpace(string(data))}
			case err == nil:
				last = &APIError{Method: method, Path: path, Status: status, Body: strings.TrimSpace(string(data))}
				if mode == retryDial {
					return last
				}
			default:
				last = err
				if mode == retryDial && !errors.Is(err, syscall.ECONNREFUSED) {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: gave up after %d attempts: %w", method, path, attempt+1, last)
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)):
		}
	}
}

func (c *Client) once(ctx context.Context, hc *http.Client, base, method, path string, body []byte, idem string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Tenant is the part of a tenant the tools use.
type Tenant struct {
	ID string `json:"id"`
}

// CreateTenant creates a tenant and an API key for it (admin key needed)
// and returns the tenant id and the clear key.
func (c *Client) CreateTenant(ctx context.Context, name string) (id, key string, err error) {
	var t Tenant
	if err := c.Do(ctx, http.MethodPost, "/v1/tenants", map[string]string{"name": name}, &t); err != nil {
		return "", "", err
	}
	var k struct {
		Key string `json:"key"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/tenants/"+t.ID+"/keys", nil, &k); err != nil {
		return "", "", err
	}
	return t.ID, k.Key, nil
}

// Policy is a throttling policy as the API shows it.
type Policy struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	MaxInFlight   int    `json:"maxInFlight"`
	TokenTimeout  string `json:"tokenTimeout"`
	AutoRelease   bool   `json:"autoRelease"`
	TokensInUse   int    `json:"tokensInUse"`
	Waiting       int    `json:"waiting"`
	TokenTimeouts int64  `json:"tokenTimeouts"`
}

// CreatePolicy creates a policy.
func (c *Client) CreatePolicy(ctx context.Context, name string, maxInFlight int, tokenTimeout time.Duration) (*Policy, error) {
	in := map[string]any{"name": name, "maxInFlight": maxInFlight}
	if tokenTimeout > 0 {
		in["tokenTimeout"] = tokenTimeout.String()
	}
	var p Policy
	return &p, c.Do(ctx, http.MethodPost, "/v1/policies", in, &p)
}

// GetPolicy reads a policy with its live token counts.
func (c *Client) GetPolicy(ctx context.Context, id string) (*Policy, error) {
	var p Policy
	return &p, c.Do(ctx, http.MethodGet, "/v1/policies/"+url.PathEscape(id), nil, &p)
}

// ScheduleSpec is the body of a schedule create.
type ScheduleSpec struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron,omitempty"`
	RunAt       *time.Time      `json:"runAt,omitempty"`
	EventCount  int             `json:"eventCount,omitempty"`
	PolicyID    string          `json:"policyId,omitempty"`
	Window      string          `json:"window,omitempty"`
	Spread      bool            `json:"spread,omitempty"`
	MaxAttempts int             `json:"maxAttempts,omitempty"`
	Target      Target          `json:"target"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// Target is an HTTP or SQS target.
type Target struct {
	Type string `json:"type"`
	URL  string `json:"url,omitempty"`
}

// Schedule is the part of a schedule the tools use.
type Schedule struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	RunAt      *time.Time `json:"runAt,omitempty"`
	EventCount int        `json:"eventCount"`
	PolicyID   string     `json:"policyId,omitempty"`
}

// CreateSchedule creates a schedule.
func (c *Client) CreateSchedule(ctx context.Context, s ScheduleSpec) (*Schedule, error) {
	var out Schedule
	return &out, c.Do(ctx, http.MethodPost, "/v1/schedules", s, &out)
}

// Fire is the part of a fire the tools use.
type Fire struct {
	ID         string    `json:"id"`
	ScheduleID string    `json:"scheduleId"`
	FireTime   time.Time `json:"fireTime"`
	N          int       `json:"n"`
	Decision   string    `json:"decision"`
	// Emitting is true while the events of a large fire are still being
	// written in the background; Emitted then counts those written.
	Emitting bool `json:"emitting"`
	Emitted  int  `json:"emitted"`
}

// GetFire reads a fire.
func (c *Client) GetFire(ctx context.Context, id string) (*Fire, error) {
	var f Fire
	return &f, c.Do(ctx, http.MethodGet, "/v1/fires/"+url.PathEscape(id), nil, &f)
}

// Trigger fires a schedule now. It is not idempotent, so it is sent again to
// another instance only when the connection was refused; other failures are
// returned (the fire may or may not exist).
func (c *Client) Trigger(ctx context.Context, scheduleID string) (*Fire, error) {
	var f Fire
	return &f, c.Do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(scheduleID)+"/trigger", nil, &f)
}

// Event is an event as the API shows it.
type Event struct {
	ID            string    `json:"id"`
	ScheduleID    string    `json:"scheduleId"`
	FireID        string    `json:"fireId"`
	FireTime      time.Time `json:"fireTime"`
	Index         int       `json:"index"`
	Count         int       `json:"count"`
	LaunchAt      time.Time `json:"launchAt"`
	PolicyID      string    `json:"policyId,omitempty"`
	MaxAttempts   int       `json:"maxAttempts"`
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"lastError,omitempty"`
	TokenTimedOut bool      `json:"tokenTimedOut,omitempty"`
}

// Unfinished lists the event statuses that still expect work. An event
// the consumer released ends in released; one out of attempts in dead.
var Unfinished = []string{"pending", "scheduled", "delivering", "delivered", "retrying"}

// ListEvents pages through the tenant's events; query holds filters such as
// status or scheduleId.
func (c *Client) ListEvents(ctx context.Context, query url.Values) ([]Event, error) {
	var all []Event
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("limit", "1000")
	for {
		var page struct {
			Items      []Event `json:"items"`
			NextCursor string  `json:"nextCursor"`
		}
		if err := c.Do(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", page.NextCursor)
	}
}

// CountByStatus returns how many of the tenant's events are in each status.
func (c *Client) CountByStatus(ctx context.Context) (map[string]int, error) {
	evs, err := c.ListEvents(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range evs {
		out[e.Status]++
	}
	return out, nil
}

// UnfinishedEvents returns the events that are in one of Unfinished.
func (c *Client) UnfinishedEvents(ctx context.Context) ([]Event, error) {
	var out []Event
	for _, st := range Unfinished {
		evs, err := c.ListEvents(ctx, url.Values{"status": {st}})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// Redrive sends a dead event again.
func (c *Client) Redrive(ctx context.Context, eventID string) (*Event, error) {
	var e Event
	return &e, c.Do(ctx, http.MethodPost, "/v1/events/"+url.PathEscape(eventID)+"/redrive", nil, &e)
}

// Ready asks one instance's /readyz and returns its status code (0 if it
// did not answer).
func Ready(ctx context.Context, base string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/readyz", nil)
	if err != nil {
		return 0
	}
	resp, err := defaultHTTP.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
