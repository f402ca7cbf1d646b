package chaoskit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
)

// Payload is what the tools put in a schedule's payload so that the
// consumer knows which policy an event counts against (the delivery message
// does not name the policy).
type Payload struct {
	Policy string `json:"policy,omitempty"`
	Tag    string `json:"tag,omitempty"`
}

// JSON returns p encoded.
func (p Payload) JSON() json.RawMessage {
	b, _ := json.Marshal(p)
	return b
}

// Answer is what the consumer does with one delivery attempt.
type Answer int

const (
	// Accept answers 200, holds the event's token for the latency, then
	// releases it.
	Accept Answer = iota
	// Fail answers 500 at once.
	Fail
	// Hang does not answer until the scheduler gives up (its HTTP timeout)
	// or HangFor passes; the scheduler sees a timeout.
	Hang
)

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Secret is the scheduler's signing secret. Required.
	Secret []byte
	// Latency is how long the consumer works on an accepted event before it
	// releases the token; each event takes Latency times a random factor in
	// [0.5, 1.5).
	Latency time.Duration
	// FailureRate and HangRate are the fractions of attempts answered with
	// 500 and with a hang (timeout). They can be changed with SetFailures.
	FailureRate, HangRate float64
	// HangFor caps a hang. Default 30s.
	HangFor time.Duration
	// ReleaseBases returns the base URLs of live instances. A release whose
	// own URL fails is retried against these, because release is store-backed
	// and any instance serves it. Nil: only the message's URL.
	ReleaseBases func() []string
	// ReleaseTimeout bounds the retries of one release. Default 3m.
	ReleaseTimeout time.Duration
	// Seed seeds the failure and latency choices.
	Seed uint64
	// ReleaseOnlyTokens skips the release call of a delivery that holds no
	// token (its release has no expiresAt: an event without a policy, or of
	// an autoRelease policy), as a consumer that needs no release does; its
	// outcome is "skipped". False: every accepted delivery is released.
	ReleaseOnlyTokens bool
	// Logf reports anomalies; nil: dropped.
	Logf func(format string, args ...any)
}

// Delivery is what the consumer recorded about one event.
type Delivery struct {
	EventID    string
	ScheduleID string
	FireID     string
	FireTime   time.Time
	Index      int
	Count      int
	Policy     string
	Tag        string
	// Accepted counts the attempts answered 200 (more than one is a
	// duplicate delivery); Seen counts every attempt that arrived.
	Accepted, Seen int
	// Attempts lists the message's attempt numbers in arrival order.
	Attempts []int
	// First is the receipt time of the first accepted attempt.
	First time.Time
	// AcceptedAt lists the receipt times of the accepted attempts, and
	// AcceptedAttempt their attempt numbers.
	AcceptedAt      []time.Time
	AcceptedAttempt []int
	// AcceptedFrom lists, for each accepted attempt, the base URL of the
	// instance that sent it (its release URL without the path).
	AcceptedFrom []string
	// ReleaseOutcome and ReleasedAt list, for each accepted attempt, how its
	// release call ended ("ok", "conflict", ...; "" while in progress) and,
	// for "ok", when the answer came: from then on the store holds the
	// consumer's acknowledgement.
	ReleaseOutcome []string
	ReleasedAt     []time.Time
}

// Recorder is a recording HTTP consumer. It is an http.Handler; Start runs it
// on a listener of its own.
type Recorder struct {
	cfg RecorderConfig

	mu         sync.Mutex
	rng        *rand.Rand
	failRate   float64
	hangRate   float64
	events     map[string]*Delivery
	bounds     map[string]int                  // policy → maxInFlight
	holds      map[string]map[uint64]heldToken // policy → hold
	holdSeq    uint64
	maxHeld    map[string]int
	violations []string
	counters   map[string]int
	pending    sync.WaitGroup
	inRelease  int

	srv *http.Server
	url string
	hc  *http.Client
	ctx context.Context
	end context.CancelFunc
}

// NewRecorder returns a Recorder; call Start to serve it.
func NewRecorder(cfg RecorderConfig) *Recorder {
	if cfg.HangFor <= 0 {
		cfg.HangFor = 30 * time.Second
	}
	if cfg.ReleaseTimeout <= 0 {
		cfg.ReleaseTimeout = 3 * time.Minute
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Recorder{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		failRate: cfg.FailureRate,
		hangRate: cfg.HangRate,
		events:   map[string]*Delivery{},
		bounds:   map[string]int{},
		holds:    map[string]map[uint64]heldToken{},
		maxHeld:  map[string]int{},
		counters: map[string]int{},
		hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second,
		}},
		ctx: ctx,
		end: cancel,
	}
}

// Start serves the recorder on a free port of 127.0.0.1 and returns its URL.
func (r *Recorder) Start() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	r.url = "http://" + ln.Addr().String() + "/"
	return r.url, nil
}

// URL is the consumer's URL (after Start).
func (r *Recorder) URL() string { return r.url }

// Close stops the server and abandons releases still in progress.
func (r *Recorder) Close() {
	r.end()
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
	}
}

// SetPolicy declares a policy's bound; deliveries of events whose payload
// names it are counted against it.
func (r *Recorder) SetPolicy(id string, maxInFlight int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bounds[id] = maxInFlight
}

// SetFailures changes the failure and hang rates (for example to 0 when the
// consumer "recovers" before a redrive).
func (r *Recorder) SetFailures(failRate, hangRate float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failRate, r.hangRate = failRate, hangRate
}

func (r *Recorder) count(name string) {
	r.counters[name]++
}

// ServeHTTP handles one delivery attempt.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 65<<20)) // an http_batch body is at most 64 MiB
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	v := consumer.Verifier{Secrets: [][]byte{r.cfg.Secret}, Now: func() time.Time { return now }}
	if _, err := v.Verify(req.Header.Get(consumer.HeaderSignature), req.Header.Get(consumer.HeaderTimestamp), body); err != nil {
		r.mu.Lock()
		r.count("bad_signature")
		r.mu.Unlock()
		r.cfg.Logf("recorder: bad signature: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if req.Header.Get(httpdelivery.HeaderEventCount) != "" {
		r.serveBatch(w, req, body, now)
		return
	}
	var m delivery.Message
	if err := json.Unmarshal(body, &m); err != nil || m.EventID == "" {
		r.mu.Lock()
		r.count("bad_body")
		r.mu.Unlock()
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	answer := r.draw()
	a := r.record(m, answer, now)
	r.mu.Unlock()

	switch answer {
	case Fail:
		http.Error(w, "injected failure", http.StatusInternalServerError)
	case Hang:
		r.hang(req)
		http.Error(w, "injected timeout", http.StatusGatewayTimeout)
	case Accept:
		w.WriteHeader(http.StatusOK)
		go r.work(m, a.policy, a.hold, a.copyIdx, a.latency)
	}
}

// serveBatch handles an http_batch request: each event of it is recorded as
// a delivery of its own. An event drawn to fail is named in the answer's
// retry list; one drawn to hang holds the whole request (the scheduler
// times out every event of it).
func (r *Recorder) serveBatch(w http.ResponseWriter, req *http.Request, body []byte, now time.Time) {
	var b httpdelivery.BatchBody
	if err := json.Unmarshal(body, &b); err != nil || len(b.Events) == 0 {
		r.mu.Lock()
		r.count("bad_body")
		r.mu.Unlock()
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	for _, m := range b.Events {
		if m.EventID == "" {
			r.mu.Lock()
			r.count("bad_body")
			r.mu.Unlock()
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
	}
	r.mu.Lock()
	r.count("batches")
	answers := make([]Answer, len(b.Events))
	hang := false
	for i := range answers {
		answers[i] = r.draw()
		hang = hang || answers[i] == Hang
	}
	accepted := make([]accepted, len(b.Events))
	var ans httpdelivery.BatchAnswer
	for i, m := range b.Events {
		if hang {
			answers[i] = Hang
		}
		accepted[i] = r.record(m, answers[i], now)
		if answers[i] == Fail {
			ans.Retry = append(ans.Retry, m.EventID)
		}
	}
	r.mu.Unlock()
	if hang {
		r.hang(req)
		http.Error(w, "injected timeout", http.StatusGatewayTimeout)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
	var quick []int
	for i, m := range b.Events {
		if answers[i] != Accept {
			continue
		}
		a := accepted[i]
		if r.cfg.ReleaseOnlyTokens && a.policy == "" && m.Release.ExpiresAt.IsZero() {
			// Nothing to give back and no token counted: done at once,
			// without a goroutine and a timer for each event of the batch.
			quick = append(quick, i)
			continue
		}
		go r.work(m, a.policy, a.hold, a.copyIdx, a.latency)
	}
	if len(quick) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range quick {
		if d := r.events[b.Events[i].EventID]; d != nil && accepted[i].copyIdx < len(d.ReleaseOutcome) {
			d.ReleaseOutcome[accepted[i].copyIdx] = "skipped"
		}
		r.inRelease--
		r.pending.Done()
		r.count("release_skipped")
	}
}

// draw chooses the answer to one attempt. Called with r.mu held.
func (r *Recorder) draw() Answer {
	switch x := r.rng.Float64(); {
	case x < r.failRate:
		return Fail
	case x < r.failRate+r.hangRate:
		return Hang
	}
	return Accept
}

// accepted is what work needs of an accepted attempt.
type accepted struct {
	policy  string
	hold    uint64
	copyIdx int
	latency time.Duration
}

// record counts an attempt of m received at now and answered with answer;
// an accepted one holds its policy's token and awaits its work (r.pending).
// Called with r.mu held.
func (r *Recorder) record(m delivery.Message, answer Answer, now time.Time) accepted {
	var p Payload
	_ = json.Unmarshal(m.Payload, &p)
	d := r.events[m.EventID]
	if d == nil {
		d = &Delivery{EventID: m.EventID, ScheduleID: m.ScheduleID, FireID: m.FireID, FireTime: m.FireTime,
			Index: m.Index, Count: m.Count, Policy: p.Policy, Tag: p.Tag}
		r.events[m.EventID] = d
	}
	d.Seen++
	d.Attempts = append(d.Attempts, m.Attempt)
	a := accepted{policy: p.Policy, copyIdx: -1}
	switch answer {
	case Fail:
		r.count("answered_500")
	case Hang:
		r.count("answered_hang")
	case Accept:
		r.count("accepted")
		d.Accepted++
		d.AcceptedAt = append(d.AcceptedAt, now)
		d.AcceptedAttempt = append(d.AcceptedAttempt, m.Attempt)
		d.AcceptedFrom = append(d.AcceptedFrom, senderBase(m.Release.URL))
		d.ReleaseOutcome = append(d.ReleaseOutcome, "")
		d.ReleasedAt = append(d.ReleasedAt, time.Time{})
		a.copyIdx = len(d.AcceptedAt) - 1
		if d.Accepted == 1 {
			d.First = now
		} else {
			r.count("duplicates")
		}
		if p.Policy != "" {
			a.hold = r.hold(p.Policy, heldToken{event: m.EventID, attempt: m.Attempt, since: now, expires: m.Release.ExpiresAt})
			h := len(r.holds[p.Policy])
			if h > r.maxHeld[p.Policy] {
				r.maxHeld[p.Policy] = h
			}
			if bound, ok := r.bounds[p.Policy]; ok && h > bound {
				r.violations = append(r.violations, fmt.Sprintf("%s: policy %s has %d tokens held at the consumer, bound %d (event %s); held: %s",
					now.Format(time.RFC3339Nano), p.Policy, h, bound, m.EventID, r.heldList(p.Policy)))
			}
		}
		a.latency = time.Duration(float64(r.cfg.Latency) * (0.5 + r.rng.Float64()))
		r.inRelease++
		r.pending.Add(1)
	}
	return a
}

// hang waits until the scheduler gives up on req, HangFor passes or the
// recorder closes.
func (r *Recorder) hang(req *http.Request) {
	select {
	case <-req.Context().Done():
	case <-time.After(r.cfg.HangFor):
	case <-r.ctx.Done():
	}
}

// hold counts a token of policy as held from now until it is released or
// its expiry passes (a token not released by then is reclaimed and may go
// to another event: it no longer counts against the bound). Holds whose
// expiry passed are dropped and counted as held_past_expiry: this consumer
// releases long before its tokens expire, so each one is a delivery that
// reached it too late. Called with r.mu held.
func (r *Recorder) hold(policy string, h heldToken) uint64 {
	hs := r.holds[policy]
	if hs == nil {
		hs = map[uint64]heldToken{}
		r.holds[policy] = hs
	}
	for id, o := range hs {
		if !o.expires.IsZero() && !h.since.Before(o.expires) {
			delete(hs, id)
			r.count("held_past_expiry")
		}
	}
	r.holdSeq++
	hs[r.holdSeq] = h
	return r.holdSeq
}

// heldToken is one accepted delivery whose token the consumer holds.
type heldToken struct {
	event          string
	attempt        int
	since, expires time.Time
}

// heldList describes policy's held tokens, oldest first. Called with r.mu
// held.
func (r *Recorder) heldList(policy string) string {
	hs := make([]heldToken, 0, len(r.holds[policy]))
	for _, h := range r.holds[policy] {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].since.Before(hs[j].since) })
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s#%d since %s expires %s", h.event, h.attempt, h.since.Format("15:04:05.000"), h.expires.Format("15:04:05.000"))
	}
	return strings.Join(parts, ", ")
}

// work holds the token for latency, then gives it back. The consumer stops
// counting the token before it calls release: the scheduler returns it only
// when the call arrives, so the consumer's count never exceeds the tokens
// really out, and a count above the bound is a real violation.
func (r *Recorder) work(m delivery.Message, policy string, hold uint64, copyIdx int, latency time.Duration) {
	defer r.pending.Done()
	select {
	case <-time.After(latency):
	case <-r.ctx.Done():
	}
	r.mu.Lock()
	if policy != "" {
		if h, ok := r.holds[policy][hold]; ok && !h.expires.IsZero() && !time.Now().Before(h.expires) {
			r.count("held_past_expiry")
		}
		delete(r.holds[policy], hold)
	}
	r.mu.Unlock()
	outcome := "skipped"
	if !r.cfg.ReleaseOnlyTokens || !m.Release.ExpiresAt.IsZero() {
		outcome = r.release(m.Release)
	}
	answered := time.Now()
	r.mu.Lock()
	if d := r.events[m.EventID]; d != nil && copyIdx < len(d.ReleaseOutcome) {
		d.ReleaseOutcome[copyIdx] = outcome
		if outcome == "ok" {
			d.ReleasedAt[copyIdx] = answered
		}
	}
	r.inRelease--
	r.count("release_" + outcome)
	r.mu.Unlock()
}

// senderBase is the base URL of the instance that sent a delivery: its
// release URL up to the API path.
func senderBase(releaseURL string) string {
	if i := strings.Index(releaseURL, "/v1/events/"); i >= 0 {
		return releaseURL[:i]
	}
	return releaseURL
}

// release posts the token to the release URL, then to the other instances,
// until one answers. It returns "ok", "not_found", "conflict", "other" or
// "gave_up".
func (r *Recorder) release(rel delivery.Release) string {
	body, _ := json.Marshal(map[string]string{"token": rel.Token})
	path := rel.URL
	if i := strings.Index(rel.URL, "/v1/events/"); i >= 0 {
		path = rel.URL[i:]
	}
	deadline := time.Now().Add(r.cfg.ReleaseTimeout)
	urls := []string{rel.URL}
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if attempt > 0 && r.cfg.ReleaseBases != nil {
			urls = urls[:0]
			for _, b := range r.cfg.ReleaseBases() {
				urls = append(urls, strings.TrimRight(b, "/")+path)
			}
			if len(urls) == 0 {
				urls = []string{rel.URL}
			}
		}
		u := urls[attempt%len(urls)]
		req, err := http.NewRequestWithContext(r.ctx, http.MethodPost, u, bytes.NewReader(body))
		if err != nil {
			return "other"
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := r.hc.Do(req)
		if err == nil {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				return "ok"
			case resp.StatusCode == http.StatusNotFound:
				r.cfg.Logf("recorder: release %s: 404 %s", u, data)
				return "not_found"
			case resp.StatusCode == http.StatusConflict:
				r.cfg.Logf("recorder: release %s: 409 %s", u, data)
				return "conflict"
			case resp.StatusCode < 500:
				r.cfg.Logf("recorder: release %s: %d %s", u, resp.StatusCode, data)
				return "other"
			}
		}
		r.mu.Lock()
		r.count("release_retries")
		r.mu.Unlock()
		select {
		case <-r.ctx.Done():
			return "gave_up"
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)):
		}
	}
	return "gave_up"
}

// WaitReleases waits until every accepted event's release call ended, or
// ctx ends.
func (r *Recorder) WaitReleases(ctx context.Context) error {
	done := make(chan struct{})
	go func() { r.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		r.mu.Lock()
		n := r.inRelease
		r.mu.Unlock()
		return fmt.Errorf("%d releases still in progress: %w", n, ctx.Err())
	}
}

// Snapshot is a copy of what the recorder saw.
type Snapshot struct {
	Events     map[string]Delivery
	MaxHeld    map[string]int
	Bounds     map[string]int
	Held       map[string]int
	Violations []string
	Counters   map[string]int
}

// Snapshot copies the recorder's state.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Snapshot{
		Events:     make(map[string]Delivery, len(r.events)),
		MaxHeld:    map[string]int{},
		Bounds:     map[string]int{},
		Held:       map[string]int{},
		Violations: append([]string(nil), r.violations...),
		Counters:   map[string]int{},
	}
	for k, v := range r.events {
		c := *v
		c.Attempts = append([]int(nil), v.Attempts...)
		c.AcceptedAt = append([]time.Time(nil), v.AcceptedAt...)
		c.AcceptedAttempt = append([]int(nil), v.AcceptedAttempt...)
		c.AcceptedFrom = append([]string(nil), v.AcceptedFrom...)
		c.ReleaseOutcome = append([]string(nil), v.ReleaseOutcome...)
		c.ReleasedAt = append([]time.Time(nil), v.ReleasedAt...)
		s.Events[k] = c
	}
	for k, v := range r.maxHeld {
		s.MaxHeld[k] = v
	}
	for k, v := range r.bounds {
		s.Bounds[k] = v
	}
	for k, v := range r.holds {
		s.Held[k] = len(v)
	}
	for k, v := range r.counters {
		s.Counters[k] = v
	}
	return s
}

// Counter returns one of the counters (accepted, duplicates, answered_500,
// ...) without copying the recorded deliveries.
func (r *Recorder) Counter(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counters[name]
}

// Accepted returns the number of distinct events accepted at least once.
func (s Snapshot) Accepted() int {
	n := 0
	for _, d := range s.Events {
		if d.Accepted > 0 {
			n++
		}
	}
	return n
}

// Duplicates returns the number of accepted deliveries beyond the first of
// each event.
func (s Snapshot) Duplicates() int {
	n := 0
	for _, d := range s.Events {
		if d.Accepted > 1 {
			n += d.Accepted - 1
		}
	}
	return n
}

// Key names one event independently of the id format: the fire and index.
type Key struct {
	FireID string
	Index  int
}

// ByKey indexes the accepted events by fire and index.
func (s Snapshot) ByKey() map[Key]Delivery {
	out := make(map[Key]Delivery, len(s.Events))
	for _, d := range s.Events {
		if d.Accepted > 0 {
			out[Key{d.FireID, d.Index}] = d
		}
	}
	return out
}

// BySchedule counts accepted distinct events per schedule and index.
func (s Snapshot) BySchedule() map[string]map[int]int {
	out := map[string]map[int]int{}
	for _, d := range s.Events {
		if d.Accepted == 0 {
			continue
		}
		if out[d.ScheduleID] == nil {
			out[d.ScheduleID] = map[int]int{}
		}
		out[d.ScheduleID][d.Index]++
	}
	return out
}

// Lateness returns, for every accepted event matching keep (nil: all), the
// receipt time of its first accepted attempt minus its launch time
// (the fire time: the tools never spread a fire's events), sorted.
func (s Snapshot) Lateness(keep func(Delivery) bool) []time.Duration {
	var out []time.Duration
	for _, d := range s.Events {
		if d.Accepted == 0 || (keep != nil && !keep(d)) {
			continue
		}
		out = append(out, d.First.Sub(d.FireTime))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Percentile returns the p-th percentile (0-100, nearest rank) of sorted
// durations, or 0 if there are none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}
