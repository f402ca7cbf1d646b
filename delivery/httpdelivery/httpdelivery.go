// Package httpdelivery delivers events to HTTP consumers: a signed JSON POST
// per event over keep-alive connections, with an SSRF guard on every dial.
//
// The body is delivery.Message, the same JSON the SQS transport sends. The
// request carries X-Scheduler-Event-Id, X-Scheduler-Timestamp (unix seconds)
// and X-Scheduler-Signature ("v1=" + hex HMAC-SHA256 of "<timestamp>.<body>");
// consumers check it with Verify.
//
// Events of type http_batch go to their URL together: one POST carries the
// events of a Deliver call to one URL, up to Config.BatchMaxEvents and
// Config.BatchMaxBytes, as {"events":[message, ...]} with
// X-Scheduler-Event-Count, signed the same way (batch.go).
package httpdelivery

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/gopool"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
)

// Defaults of Config.
const (
	DefaultTimeout             = 10 * time.Second
	DefaultMaxIdleConnsPerHost = 64
	DefaultMaxConnsPerHost     = 64
	DefaultConcurrency         = 64
	DefaultUserAgent           = "schedulerd-delivery/1"
)

// drainLimit bounds how much of a response body is read so that the
// connection can be reused. A consumer that answers with more than this is
// not worth a kept connection; its connection is closed instead.
const drainLimit = 64 << 10

// errorBodyLimit bounds how much of a failed response's body goes into the
// error, which ends up in the event's LastError.
const errorBodyLimit = 256

// Config configures a Deliverer. Zero values mean the documented default.
type Config struct {
	// SigningSecret is the HMAC key of X-Scheduler-Signature. Required.
	SigningSecret []byte
	// PreviousSigningSecrets are secrets being rotated out: each request
	// carries one more "v1=" signature per secret, after SigningSecret's,
	// so that consumers still checking with one of them accept it.
	PreviousSigningSecrets [][]byte
	// ReleaseBaseURL is the service's public base URL; the message's release
	// URL is ReleaseBaseURL + "/v1/events/{id}/release".
	ReleaseBaseURL string
	// Timeout bounds one request from dial to the end of the response body.
	// Default 10s.
	Timeout time.Duration
	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// per consumer host. Keep it at least Concurrency so that a burst to one
	// consumer reuses its connections instead of opening new ones. Default 64.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps the connections open to one consumer host at
	// once, across all Deliver calls; requests beyond it wait for a free
	// connection (within their Timeout). It protects a consumer from a burst
	// and stops the transport from dialling a spare connection whenever a
	// request starts a moment before another one's connection is back in the
	// pool. Default 64.
	MaxConnsPerHost int
	// Concurrency is how many requests one Deliver call runs at once.
	// Default 64.
	Concurrency int
	// BatchMaxEvents is the most events of one http_batch request. Default
	// 500.
	BatchMaxEvents int
	// BatchMaxBytes is the most bytes of one http_batch request body; a
	// message larger than that goes alone. Default 1 MiB.
	BatchMaxBytes int
	// UserAgent is sent with every request. Default "schedulerd-delivery/1".
	UserAgent string
	// AllowCIDRs and DenyCIDRs tune the SSRF guard on top of
	// DefaultDenyCIDRs: the most specific matching prefix decides, deny wins
	// a tie, and an address no prefix matches is allowed. The check runs on
	// the resolved address at dial time.
	AllowCIDRs []netip.Prefix
	DenyCIDRs  []netip.Prefix
	// Now is the clock of the signature timestamp and of Retry-After dates.
	// Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxIdleConnsPerHost = cmp.Or(c.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost)
	c.MaxConnsPerHost = cmp.Or(c.MaxConnsPerHost, DefaultMaxConnsPerHost)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.BatchMaxEvents = cmp.Or(c.BatchMaxEvents, DefaultBatchMaxEvents)
	c.BatchMaxBytes = cmp.Or(c.BatchMaxBytes, DefaultBatchMaxBytes)
	if c.Now == nil {
		c.Now = time.Now
	}
}

// validate checks c after setDefaults; the error names the field.
func (c *Config) validate() error {
	if len(c.SigningSecret) == 0 {
		return errors.New("httpdelivery: Config.SigningSecret: required")
	}
	for i, old := range c.PreviousSigningSecrets {
		if len(old) == 0 {
			return fmt.Errorf("httpdelivery: Config.PreviousSigningSecrets[%d]: empty", i)
		}
	}
	if c.ReleaseBaseURL != "" {
		u, err := url.Parse(c.ReleaseBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("httpdelivery: Config.ReleaseBaseURL: %q is not an absolute http(s) URL", c.ReleaseBaseURL)
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("httpdelivery: Config.Timeout: %v is negative", c.Timeout)
	}
	if c.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("httpdelivery: Config.MaxIdleConnsPerHost: %d is negative", c.MaxIdleConnsPerHost)
	}
	if c.MaxConnsPerHost < 0 {
		return fmt.Errorf("httpdelivery: Config.MaxConnsPerHost: %d is negative", c.MaxConnsPerHost)
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("httpdelivery: Config.Concurrency: %d is negative", c.Concurrency)
	}
	if c.BatchMaxEvents < 0 {
		return fmt.Errorf("httpdelivery: Config.BatchMaxEvents: %d is negative", c.BatchMaxEvents)
	}
	if c.BatchMaxBytes < 0 {
		return fmt.Errorf("httpdelivery: Config.BatchMaxBytes: %d is negative", c.BatchMaxBytes)
	}
	for i, p := range c.AllowCIDRs {
		if !p.IsValid() {
			return fmt.Errorf("httpdelivery: Config.AllowCIDRs[%d]: invalid prefix", i)
		}
	}
	for i, p := range c.DenyCIDRs {
		if !p.IsValid() {
			return fmt.Errorf("httpdelivery: Config.DenyCIDRs[%d]: invalid prefix", i)
		}
	}
	return nil
}

// Deliverer sends events to HTTP consumers. It is safe for concurrent use;
// make one per process so that connections are shared.
type Deliverer struct {
	cfg    Config
	client *http.Client
	// transport is kept to close idle connections in Close.
	transport *http.Transport
	// ruled are the connection pools of tenants whose target rule judges
	// the resolved address: a connection is checked when it is dialled, so
	// it must not serve another tenant.
	ruled   ruledPools
	targets targetCache
	workers *gopool.Pool // a Deliver call's requests beyond its first
	bufs    sync.Pool    // *[]byte: a message or a request being written
	macs    sync.Pool    // *[]hash.Hash: HMAC-SHA256 under each signing secret, current first
}

// New validates cfg and returns a Deliverer. Errors name the Config field.
func New(cfg Config) (*Deliverer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.SigningSecret = bytes.Clone(cfg.SigningSecret)
	secrets := [][]byte{cfg.SigningSecret}
	for _, old := range cfg.PreviousSigningSecrets {
		secrets = append(secrets, bytes.Clone(old))
	}
	cfg.PreviousSigningSecrets = secrets[1:]
	cfg.ReleaseBaseURL = strings.TrimRight(cfg.ReleaseBaseURL, "/")

	g := newGuard(cfg.AllowCIDRs, cfg.DenyCIDRs)
	dialer := &net.Dialer{
		Timeout:        cfg.Timeout,
		KeepAlive:      30 * time.Second,
		ControlContext: g.controlContext,
	}
	transport := &http.Transport{
		// No proxy: a proxy would be dialled instead of the target, and the
		// guard would check the proxy's address rather than the consumer's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          max(100, 4*cfg.MaxIdleConnsPerHost),
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		MaxConnsPerHost:       cfg.MaxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	client := &http.Client{
		Transport: transport,
		// Redirects are not followed: a 3xx is an unexpected answer (a
		// retryable failure), and following it would turn the POST into a GET
		// or send the signed body to a host the tenant did not configure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	d := &Deliverer{cfg: cfg, client: client, transport: transport, workers: gopool.New(gopool.DefaultIdle)}
	d.ruled.init(client)
	d.bufs.New = func() any { return new([]byte) }
	d.macs.New = func() any {
		macs := make([]hash.Hash, len(secrets))
		for i, secret := range secrets {
			macs[i] = hmac.New(sha256.New, secret)
		}
		return &macs
	}
	return d, nil
}

// Close closes idle connections. Deliveries still running are not affected.
func (d *Deliverer) Close() {
	d.transport.CloseIdleConnections()
	d.ruled.closeIdle()
}

// Deliver sends each event to its Target.URL and returns one Result per
// event, in the order of events. Events of type http_batch go together, as
// batch.go describes. Up to Config.Concurrency requests run at
// once. A 2xx answer is success; 429 and 503 with Retry-After set RetryAfter;
// other answers, timeouts and connection errors are retryable errors; a
// target refused by the SSRF guard, a URL that is not http(s) or a payload
// that is not JSON is a Permanent error.
//
// A tenant's target rule in ctx (netguard.WithTargetRule) is checked on
// every address dialled, after name resolution; a refused target is a
// Permanent error wrapping ErrTargetRefused.
func (d *Deliverer) Deliver(ctx context.Context, events []*model.Event) []delivery.Result {
	if hasBatch(events) {
		return d.deliverBatches(ctx, events)
	}
	results := make([]delivery.Result, len(events))
	workers := min(d.cfg.Concurrency, len(events))
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(events) {
				return
			}
			results[i] = d.deliverOne(ctx, events[i])
		}
	}
	// The calling goroutine is one of the workers: a lone event (a fire
	// spread over its window sends one or a few at a time) starts none.
	var wg sync.WaitGroup
	for range workers - 1 {
		d.workers.GoWith(&wg, work)
	}
	work()
	wg.Wait()
	return results
}

func (d *Deliverer) deliverOne(ctx context.Context, e *model.Event) delivery.Result {
	if e == nil {
		return delivery.Result{Err: errors.New("httpdelivery: nil event"), Permanent: true}
	}
	if e.Target.Type != "" && e.Target.Type != model.TargetHTTP {
		return permanent(fmt.Errorf("httpdelivery: event %s: target type %q is not http", e.ID, e.Target.Type))
	}
	t := d.targets.get(e.Target.URL, d.cfg.UserAgent)
	if t.url == nil {
		return permanent(fmt.Errorf("httpdelivery: event %s: target URL is not an absolute http(s) URL", e.ID))
	}
	client := d.client
	if tenant, rule := netguard.TargetRuleFrom(ctx); rule != nil && !rule.NameAllowed(t.url.Hostname()) {
		// Its addresses decide: dial them for this tenant only.
		client = d.ruled.client(tenant, rule, d.transport)
		ctx = context.WithValue(ctx, dialHostKey{}, t.url.Hostname())
	}
	body, err := d.message(e)
	if err != nil {
		return permanent(fmt.Errorf("httpdelivery: event %s: encode message: %w", e.ID, err))
	}
	ts := strconv.AppendInt(nil, d.cfg.Now().Unix(), 10)
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.str, bytes.NewReader(body))
	if err != nil {
		return permanent(fmt.Errorf("httpdelivery: event %s: build request: %w", e.ID, err))
	}
	req.Header = http.Header{
		"Content-Type":  {"application/json"},
		"User-Agent":    {d.cfg.UserAgent},
		HeaderEventID:   {e.ID},
		HeaderTimestamp: {string(ts)},
		HeaderSignature: {string(d.appendSignature(make([]byte, 0, (1+len(d.cfg.PreviousSigningSecrets))*(len(signatureVersion)+2*sha256.Size+1)), ts, body))},
		// The event's id is its idempotency key; with it net/http also
		// sends the request again on a new connection when a kept one
		// turns out closed by the consumer before it took the request.
		"Idempotency-Key": {e.ID},
	}
	if e.TraceParent != "" {
		req.Header[delivery.TraceParent] = []string{e.TraceParent}
		if e.TraceState != "" {
			req.Header[delivery.TraceState] = []string{e.TraceState}
		}
	}

	resp, err := client.Do(req)
	if err != nil {
		// err is a *url.Error; its text holds the URL with any password
		// redacted.
		err = fmt.Errorf("httpdelivery: event %s: %w", e.ID, err)
		if errors.Is(err, ErrTargetRefused) {
			return permanent(err)
		}
		return delivery.Result{Err: err}
	}
	return d.result(e, t.url, resp)
}

// message is e's message in a slice of its own size; it is written in a
// kept buffer, so that it does not grow a new one step by step.
func (d *Deliverer) message(e *model.Event) ([]byte, error) {
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	msg, err := delivery.AppendMessage((*bp)[:0], e, d.cfg.ReleaseBaseURL)
	*bp = msg
	if err != nil {
		return nil, err
	}
	return bytes.Clone(msg), nil
}

// appendSignature appends Sign's value for body sent at ts (unix seconds,
// as text) under each signing secret, current first, joined by commas.
func (d *Deliverer) appendSignature(dst, ts, body []byte) []byte {
	macs := d.macs.Get().(*[]hash.Hash)
	var sum [sha256.Size]byte
	for i, h := range *macs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, signatureVersion...)
		dst = hex.AppendEncode(dst, appendMAC(sum[:0], h, ts, body))
	}
	d.macs.Put(macs)
	return dst
}

// maxTargets bounds the parsed target URLs kept; past it the cache starts
// again.
const maxTargets = 4096

// targetCache keeps target URLs parsed, keyed by the URL as given.
type targetCache struct {
	m sync.Map // string → *target
	n atomic.Int64
}

// target is a parsed target URL: url is nil when it is not an absolute
// http(s) URL; str is url as a request takes it.
type target struct {
	url *url.URL
	str string
}

func (c *targetCache) get(raw, userAgent string) *target {
	if t, ok := c.m.Load(raw); ok {
		return t.(*target)
	}
	t := &target{}
	if u, err := url.Parse(raw); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		t.url, t.str = u, u.String()
	}
	if c.n.Add(1) > maxTargets {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(raw, t)
	return t
}

// result maps a response to a Result. It always drains (up to drainLimit)
// and closes the body so that the connection goes back to the pool.
func (d *Deliverer) result(e *model.Event, target *url.URL, resp *http.Response) delivery.Result {
	defer resp.Body.Close()
	res := delivery.Result{StatusCode: resp.StatusCode}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
		return res
	}
	snippet := make([]byte, errorBodyLimit)
	n, _ := io.ReadFull(resp.Body, snippet)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	res.Err = &StatusError{
		EventID:    e.ID,
		URL:        target.Redacted(),
		StatusCode: resp.StatusCode,
		Body:       string(bytes.ToValidUTF8(snippet[:n], nil)),
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if after, ok := parseRetryAfter(resp.Header.Get("Retry-After"), d.cfg.Now()); ok {
			res.RetryAfter = after
		}
	}
	return res
}

// StatusError is the error of a delivery answered with a status other than
// 2xx. Body holds the start of the answer, to help the tenant see why.
type StatusError struct {
	EventID    string
	URL        string
	StatusCode int
	Body       string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("httpdelivery: event %s: POST %s: status %d", e.EventID, e.URL, e.StatusCode)
	if e.Body != "" {
		msg += ": " + strings.TrimSpace(e.Body)
	}
	return msg
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date
// (RFC 9110, section 10.2.3). A date in the past means "now" (0, true).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Cap before multiplying so that a huge value cannot overflow.
		const maxSecs = int64(1<<63-1) / int64(time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func permanent(err error) delivery.Result { return delivery.Result{Err: err, Permanent: true} }
