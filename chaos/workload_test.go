package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/chaoskit"
)

func readyz(ctx context.Context, base string) int { return chaoskit.Ready(ctx, base) }

// deployment is a running schedulerd deployment with a tenant, a recording
// consumer and the book of what it is expected to deliver.
type deployment struct {
	t         *testing.T
	instances []*instance
	admin     *chaoskit.Client
	api       *chaoskit.Client
	rec       *chaoskit.Recorder
	consumer  string

	mu        sync.Mutex
	policies  map[string]int // id → maxInFlight
	oneOffs   map[string]int // schedule id → events of its single fire
	crons     map[string]int // schedule id → eventCount the test asked for
	fires     map[string]int // fire id → events (triggers that answered)
	ambiguous int            // triggers whose answer was lost
	storeMax  map[string]int // largest tokensInUse the API showed per policy
	// disruptions are the kills and store outages of the run: the only
	// times at which a delivery may be left unrecorded and sent again.
	disruptions []chaoskit.Disruption
}

// disrupted records that instance (its base URL; "" for the store, i.e.
// every instance) was down, or cut off from the store, from start to end.
func (d *deployment) disrupted(instance string, start, end time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disruptions = append(d.disruptions, chaoskit.Disruption{Instance: instance, Start: start, End: end})
}

// liveBases returns the base URLs of the instances that run now.
func (d *deployment) liveBases() []string {
	var out []string
	for _, in := range d.instances {
		if in.running() {
			out = append(out, in.base)
		}
	}
	if len(out) == 0 {
		for _, in := range d.instances {
			out = append(out, in.base)
		}
	}
	return out
}

func newDeployment(t *testing.T, ctx context.Context, insts []*instance, rc chaoskit.RecorderConfig) *deployment {
	t.Helper()
	d := &deployment{t: t, instances: insts, policies: map[string]int{}, oneOffs: map[string]int{},
		crons: map[string]int{}, fires: map[string]int{}, storeMax: map[string]int{}}
	rc.Secret = []byte(signingSecret)
	rc.ReleaseBases = d.liveBases
	if rc.Logf == nil {
		rc.Logf = func(f string, a ...any) {
			if testing.Verbose() {
				t.Logf(f, a...)
			}
		}
	}
	d.rec = chaoskit.NewRecorder(rc)
	u, err := d.rec.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.rec.Close)
	d.consumer = u
	d.admin = &chaoskit.Client{Key: adminKey, Bases: d.liveBases, CallTimeout: 90 * time.Second}
	_, key, err := d.admin.CreateTenant(ctx, "chaos-"+t.Name())
	if err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	d.api = d.admin.WithKey(key)
	return d
}

func (d *deployment) policy(ctx context.Context, name string, maxInFlight int, tokenTimeout time.Duration) string {
	d.t.Helper()
	p, err := d.api.CreatePolicy(ctx, name, maxInFlight, tokenTimeout)
	if err != nil {
		d.t.Fatalf("create policy %s: %v", name, err)
	}
	d.mu.Lock()
	d.policies[p.ID] = maxInFlight
	d.mu.Unlock()
	d.rec.SetPolicy(p.ID, maxInFlight)
	return p.ID
}

// oneOff creates a one-off schedule of n events at runAt. A create that
// answered 2xx must be durable, so its events join the expected ones.
func (d *deployment) oneOff(ctx context.Context, name string, runAt time.Time, n int, policy string, maxAttempts int) error {
	return d.oneOffVia(ctx, d.api, name, runAt, n, policy, maxAttempts)
}

// oneOffVia is oneOff through another client (for example one that gives up
// sooner).
func (d *deployment) oneOffVia(ctx context.Context, c *chaoskit.Client, name string, runAt time.Time, n int, policy string, maxAttempts int) error {
	s, err := c.CreateSchedule(ctx, chaoskit.ScheduleSpec{
		Name: name, RunAt: &runAt, EventCount: n, PolicyID: policy, MaxAttempts: maxAttempts,
		Target:  chaoskit.Target{Type: "http", URL: d.consumer},
		Payload: chaoskit.Payload{Policy: policy, Tag: name}.JSON(),
	})
	if err != nil {
		return fmt.Errorf("create one-off %s: %w", name, err)
	}
	d.mu.Lock()
	d.oneOffs[s.ID] = n
	d.mu.Unlock()
	return nil
}

// cronSchedule creates a schedule that does not fire during the test (it is
// fired by trigger).
func (d *deployment) cronSchedule(ctx context.Context, name string, n int, policy string, maxAttempts int) string {
	d.t.Helper()
	s, err := d.api.CreateSchedule(ctx, chaoskit.ScheduleSpec{
		Name: name, Cron: "0 0 1 1 *", EventCount: n, PolicyID: policy, MaxAttempts: maxAttempts,
		Target:  chaoskit.Target{Type: "http", URL: d.consumer},
		Payload: chaoskit.Payload{Policy: policy, Tag: name}.JSON(),
	})
	if err != nil {
		d.t.Fatalf("create schedule %s: %v", name, err)
	}
	d.mu.Lock()
	d.crons[s.ID] = n
	d.mu.Unlock()
	return s.ID
}

// trigger fires a schedule now; a fire that answered joins the expected
// ones, with the eventCount the schedule was created with (the server's
// answer is checked against it, not trusted). A trigger whose answer was
// lost (the instance died) is counted: its fire may exist, and the final
// store check covers it.
func (d *deployment) trigger(ctx context.Context, id string) {
	f, err := d.api.Trigger(ctx, id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.ambiguous++
		d.t.Logf("trigger %s: %v (counted as ambiguous)", id, err)
		return
	}
	n, ok := d.crons[id]
	if !ok {
		d.t.Errorf("trigger %s: not a schedule of the test", id)
		return
	}
	if f.N != n {
		d.t.Errorf("trigger %s: fire %s has %d events, the schedule asked for %d", id, f.ID, f.N, n)
	}
	d.fires[f.ID] = n
}

// samplePolicies polls the policies' live token counts until ctx ends.
func (d *deployment) samplePolicies(ctx context.Context) {
	for {
		d.mu.Lock()
		ids := make([]string, 0, len(d.policies))
		for id := range d.policies {
			ids = append(ids, id)
		}
		d.mu.Unlock()
		for _, id := range ids {
			c := d.api
			p, err := c.GetPolicy(ctx, id)
			if err != nil {
				continue
			}
			d.mu.Lock()
			d.storeMax[id] = max(d.storeMax[id], p.TokensInUse)
			d.mu.Unlock()
		}
		// Every 3 s: the policy's waiting count behind each read costs
		// FerretDB a pass over the policy's waiting events, as much as a
		// claim (the consumer checks the bound at every delivery anyway).
		select {
		case <-ctx.Done():
			return
		case <-time.After(3 * time.Second):
		}
	}
}

// expectedCount returns the number of events the deployment must deliver.
func (d *deployment) expectedCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.oneOffs {
		n += c
	}
	for _, c := range d.fires {
		n += c
	}
	return n
}

// missing lists the expected events the consumer has not accepted.
func (d *deployment) missing(s chaoskit.Snapshot) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	bySched := s.BySchedule()
	byKey := s.ByKey()
	var out []string
	for id, n := range d.oneOffs {
		for i := range n {
			if bySched[id][i] == 0 {
				out = append(out, fmt.Sprintf("%s[%d]", id, i))
			}
		}
	}
	for id, n := range d.fires {
		for i := range n {
			if _, ok := byKey[chaoskit.Key{FireID: id, Index: i}]; !ok {
				out = append(out, fmt.Sprintf("%s[%d]", id, i))
			}
		}
	}
	sort.Strings(out)
	return out
}

// explainMissing logs what the store says about the schedules (or fires) of
// a few missing events: the schedule, its fires and its events' statuses, so
// that a loss can be told apart from a fire that never happened.
func (d *deployment) explainMissing(ctx context.Context, missing []string) {
	seen := map[string]bool{}
	for _, m := range missing {
		id, _, _ := strings.Cut(m, "[")
		if seen[id] || len(seen) == 3 {
			continue
		}
		seen[id] = true
		var raw json.RawMessage
		if strings.HasPrefix(id, "sch_") && !strings.Contains(id, ".") {
			for _, path := range []string{"/v1/schedules/" + id, "/v1/schedules/" + id + "/fires"} {
				err := d.api.Do(ctx, http.MethodGet, path, nil, &raw)
				d.t.Logf("missing %s: GET %s: %s %v", m, path, truncate(string(raw), 1500), err)
			}
		} else {
			err := d.api.Do(ctx, http.MethodGet, "/v1/fires/"+id, nil, &raw)
			d.t.Logf("missing %s: GET /v1/fires/%s: %s %v", m, id, truncate(string(raw), 1500), err)
		}
		q := url.Values{}
		if strings.Contains(id, ".") {
			q.Set("fireId", id)
		} else {
			q.Set("scheduleId", id)
		}
		evs, err := d.api.ListEvents(ctx, q)
		st := map[string]int{}
		for _, e := range evs {
			st[e.Status]++
		}
		d.t.Logf("missing %s: events in the store by status %v (released ones are removed after the retention) %v", m, st, err)
	}
}

// explainViolation logs the store's record of each event the consumer held
// at a bound violation (kept only within the retention: CHAOS_RETENTION).
func (d *deployment) explainViolation(ctx context.Context, v string) {
	d.t.Logf("explaining %s", v)
	_, held, _ := strings.Cut(v, "; held: ")
	for _, h := range strings.Split(held, ", ") {
		id, _, _ := strings.Cut(h, "#")
		var raw json.RawMessage
		err := d.api.Do(ctx, http.MethodGet, "/v1/events/"+id, nil, &raw)
		d.t.Logf("held %s: %s %v", h, truncate(string(raw), 800), err)
	}
}

// describeDuplicates logs how the duplicate deliveries came about: the
// same attempt number twice means a shard's new owner sent an event that
// its previous owner had sent (a takeover); a higher one means a retry of
// an attempt that had failed or timed out on the scheduler's side.
func (d *deployment) describeDuplicates(s chaoskit.Snapshot) {
	var dups []chaoskit.Delivery
	for _, e := range s.Events {
		if e.Accepted > 1 {
			dups = append(dups, e)
		}
	}
	if len(dups) == 0 {
		return
	}
	sort.Slice(dups, func(i, j int) bool { return dups[i].AcceptedAt[1].Before(dups[j].AcceptedAt[1]) })
	sameAttempt, throttled := 0, 0
	for _, e := range dups {
		if e.AcceptedAttempt[0] == e.AcceptedAttempt[1] {
			sameAttempt++
		}
		if e.Policy != "" {
			throttled++
		}
	}
	d.t.Logf("duplicates: %d events, %d with the same attempt number twice (takeover), %d throttled", len(dups), sameAttempt, throttled)
	for _, e := range dups[:min(len(dups), 8)] {
		d.t.Logf("duplicate %s (policy %q): attempts %v accepted at %v", e.EventID, e.Policy, e.AcceptedAttempt, e.AcceptedAt)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// doubleEmitted lists the one-off schedules of which the consumer accepted
// more distinct events than the schedule's single fire has: a fire emitted
// twice (under another fire time or id) would show here, a redelivery of the
// same event would not (that is a duplicate).
func (d *deployment) doubleEmitted(s chaoskit.Snapshot) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	distinct := map[string]int{}
	for _, e := range s.Events {
		if e.Accepted > 0 {
			distinct[e.ScheduleID]++
		}
	}
	var out []string
	for id, n := range d.oneOffs {
		if distinct[id] > n {
			out = append(out, fmt.Sprintf("%s: %d distinct events, %d expected", id, distinct[id], n))
		}
	}
	sort.Strings(out)
	return out
}

// report is the outcome of a run.
type report struct {
	Expected    int
	Delivered   int // distinct expected events accepted at least once
	Missing     []string
	Doubled     []string // one-off schedules with more distinct events than expected
	Accepted    int      // accepted deliveries in total
	Duplicates  int      // accepted deliveries beyond each event's first
	DupEvents   int      // events accepted more than once
	Unexplained []string // duplicate copies no kill or outage explains
	Unfinished  []chaoskit.Event
	Statuses    map[string]int
	Violations  []string
	MaxHeld     map[string]int
	Bounds      map[string]int
	StoreMax    map[string]int
	TimedOut    map[string]int64
	Counters    map[string]int
	Ambiguous   int
	Lateness    []time.Duration
	Unreceived  []string // released in the store, never accepted by the consumer
	DrainedIn   time.Duration
	DrainPassed bool

	snap chaoskit.Snapshot // what the consumer recorded, for the checks
}

func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "expected %d, delivered %d, missing %d, accepted %d, duplicates %d of %d events (%.3f%%; %d deliveries), unfinished %d, statuses %v\n",
		r.Expected, r.Delivered, len(r.Missing), r.Accepted, r.DupEvents, r.Expected, 100*float64(r.DupEvents)/float64(max(r.Expected, 1)),
		r.Duplicates, len(r.Unfinished), r.Statuses)
	ids := make([]string, 0, len(r.Bounds))
	for id := range r.Bounds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "policy %s: bound %d, max held at consumer %d, max tokensInUse via API %d, token timeouts %d\n",
			id, r.Bounds[id], r.MaxHeld[id], r.StoreMax[id], r.TimedOut[id])
	}
	fmt.Fprintf(&b, "lateness p50 %v p95 %v p99 %v max %v; consumer counters %v; ambiguous triggers %d; drained in %v",
		chaoskit.Percentile(r.Lateness, 50).Round(time.Millisecond), chaoskit.Percentile(r.Lateness, 95).Round(time.Millisecond),
		chaoskit.Percentile(r.Lateness, 99).Round(time.Millisecond), chaoskit.Percentile(r.Lateness, 100).Round(time.Millisecond),
		r.Counters, r.Ambiguous, r.DrainedIn.Round(time.Second))
	return b.String()
}

// drain waits until every expected event was accepted, no event of the
// tenant is unfinished in the store and the consumer's releases are done,
// or until timeout; then it gathers the report.
func (d *deployment) drain(ctx context.Context, timeout time.Duration) *report {
	d.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	lastLog := start
	passed := false
	for time.Now().Before(deadline) {
		s := d.rec.Snapshot()
		miss := d.missing(s)
		if len(miss) == 0 {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			werr := d.rec.WaitReleases(wctx)
			cancel()
			if werr == nil {
				un, err := d.api.UnfinishedEvents(ctx)
				if err == nil && len(un) == 0 {
					passed = true
					break
				}
			}
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			d.t.Logf("draining for %v: %d of %d expected events missing", time.Since(start).Round(time.Second), len(miss), d.expectedCount())
		}
		time.Sleep(time.Second)
	}
	r := &report{DrainedIn: time.Since(start), DrainPassed: passed}
	s := d.rec.Snapshot()
	r.Expected = d.expectedCount()
	r.Missing = d.missing(s)
	r.Doubled = d.doubleEmitted(s)
	r.Delivered = r.Expected - len(r.Missing)
	d.explainMissing(ctx, r.Missing)
	if len(s.Violations) > 0 {
		d.explainViolation(ctx, s.Violations[0])
	}
	d.describeDuplicates(s)
	r.Duplicates = s.Duplicates()
	r.DupEvents = s.DuplicatedEvents()
	r.snap = s
	r.Accepted = s.Counters["accepted"]
	r.Violations = s.Violations
	r.MaxHeld, r.Bounds, r.Counters = s.MaxHeld, s.Bounds, s.Counters
	r.Lateness = s.Lateness(nil)
	d.mu.Lock()
	r.Ambiguous = d.ambiguous
	r.StoreMax = map[string]int{}
	for k, v := range d.storeMax {
		r.StoreMax[k] = v
	}
	d.mu.Unlock()
	r.TimedOut = map[string]int64{}
	for id := range r.Bounds {
		if p, err := d.api.GetPolicy(ctx, id); err == nil {
			r.TimedOut[id] = p.TokenTimeouts
			r.StoreMax[id] = max(r.StoreMax[id], p.TokensInUse)
		}
	}
	all, err := d.api.ListEvents(ctx, url.Values{})
	if err != nil {
		d.t.Errorf("list events: %v", err)
	}
	r.Statuses = map[string]int{}
	for _, e := range all {
		r.Statuses[e.Status]++
		switch e.Status {
		case "pending", "scheduled", "delivering", "delivered", "retrying":
			r.Unfinished = append(r.Unfinished, e)
		case "released":
			if ev, ok := s.Events[e.ID]; (!ok || ev.Accepted == 0) && !e.TokenTimedOut {
				r.Unreceived = append(r.Unreceived, e.ID)
			}
		}
	}
	return r
}

// checks are the invariants every chaos run asserts. Every run checks
// each duplicate against the run's kills and outages
// (chaoskit.UnexplainedDuplicates): a copy is allowed only if the
// instance that sent the earlier one was killed (or the store stopped)
// while that copy was in flight, i.e. accepted and not yet acknowledged.
type checks struct {
	allowDead bool
	// dupGoal also asserts the product's goal: at most 0.1% of the
	// expected events (rounded down) delivered more than once.
	dupGoal bool
	// superseded allows a duplicate whose earlier copy's release was
	// refused with 409 (the scheduler had timed that attempt out).
	superseded bool
	// noTokenTimeout fails the run if a policy reclaimed a token by
	// timeout.
	noTokenTimeout bool
}

func (d *deployment) assert(r *report, c checks) {
	t := d.t
	t.Helper()
	t.Logf("result: %s", r)
	if r.Expected == 0 {
		t.Errorf("no events were expected: the workload did not start")
	}
	if len(r.Missing) > 0 {
		t.Errorf("LOSS: %d of %d expected events never reached the consumer, for example %v", len(r.Missing), r.Expected, r.Missing[:min(10, len(r.Missing))])
	}
	if len(r.Doubled) > 0 {
		t.Errorf("DOUBLE EMISSION: %v", r.Doubled)
	}
	if len(r.Unfinished) > 0 {
		var ex []string
		for _, e := range r.Unfinished[:min(10, len(r.Unfinished))] {
			ex = append(ex, fmt.Sprintf("%s %s attempts=%d launchAt=%s err=%q", e.ID, e.Status, e.Attempts, e.LaunchAt.Format(time.RFC3339), e.LastError))
		}
		t.Errorf("STUCK: %d events unfinished after the drain deadline: %v", len(r.Unfinished), ex)
	}
	if len(r.Unreceived) > 0 {
		t.Errorf("%d events are released in the store but the consumer never accepted them: %v", len(r.Unreceived), r.Unreceived[:min(10, len(r.Unreceived))])
	}
	if len(r.Violations) > 0 {
		t.Errorf("THROTTLE: %d deliveries exceeded a policy's bound, first: %v", len(r.Violations), r.Violations[:min(5, len(r.Violations))])
	}
	for id, b := range r.Bounds {
		if r.StoreMax[id] > b {
			t.Errorf("THROTTLE: policy %s showed tokensInUse %d > maxInFlight %d", id, r.StoreMax[id], b)
		}
		switch {
		case c.noTokenTimeout && r.TimedOut[id] > 0:
			t.Errorf("TOKEN TIMEOUT: policy %s reclaimed %d tokens by timeout", id, r.TimedOut[id])
		case r.TimedOut[id] > 0:
			t.Logf("note: policy %s reclaimed %d tokens by timeout (an instance died while delivering)", id, r.TimedOut[id])
		}
	}
	if !c.allowDead && r.Statuses["dead"] > 0 {
		t.Errorf("%d events are dead, though the consumer never failed", r.Statuses["dead"])
	}
	if n := r.Counters["held_past_expiry"]; n > 0 {
		// The consumers release long before their tokens expire, so a token
		// that expired while held reached its consumer too late (the bound
		// check does not count it any more: it may be another event's now).
		t.Errorf("LATE SEND: %d deliveries reached the consumer too late to release before their token expired", n)
	}
	if n := r.Counters["bad_signature"] + r.Counters["bad_body"]; n > 0 {
		t.Errorf("%d deliveries had a bad signature or body", n)
	}
	d.mu.Lock()
	dc := chaoskit.DuplicateCheck{Disruptions: append([]chaoskit.Disruption(nil), d.disruptions...), Superseded: c.superseded}
	d.mu.Unlock()
	r.Unexplained = chaoskit.UnexplainedDuplicates(r.snap, dc)
	if len(r.Unexplained) > 0 {
		t.Errorf("DUPLICATES: %d copies delivered again with no kill or outage of their sender while they were unacknowledged (%d disruptions recorded), for example %v",
			len(r.Unexplained), len(dc.Disruptions), r.Unexplained[:min(5, len(r.Unexplained))])
	}
	if allowed := r.Expected / 1000; c.dupGoal && r.DupEvents > allowed {
		t.Errorf("DUPLICATES: %d of %d events delivered more than once (%.3f%%), above the goal of 0.1%% (%d events)",
			r.DupEvents, r.Expected, 100*float64(r.DupEvents)/float64(max(r.Expected, 1)), allowed)
	}
	for _, in := range d.instances {
		for _, c := range in.unexpectedExits() {
			t.Errorf("CRASH: %s", c)
		}
	}
}
