package handler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// dispatch starts deliveries whenever a delivery ends or the throttle
// hands events on (startDeliveries); the timer starts those of the events
// it launches itself, so that a wake-up of the timer is not also one of
// this goroutine.
func (h *Handler) dispatch() {
	for {
		if !h.startDeliveries() {
			return
		}
		select {
		case <-h.stopCh:
			return
		case <-h.wakeD:
		}
	}
}

// startDeliveries starts deliveries while there are due events and free
// slots: it takes the next batch (one host, fair across tenants) from the
// queues and delivers it in its own goroutine, so that a slow consumer never
// holds back the events of others. A delivery keeps its slots until its
// outcomes are queued for the writers, so memory stays bounded when the
// store is slow. False once the handler stops. Only the handler's loops
// call it: deliveries.Wait follows their end.
func (h *Handler) startDeliveries() bool {
	h.dispatchMu.Lock()
	defer h.dispatchMu.Unlock()
	for {
		select {
		case <-h.stopCh:
			return false
		default:
		}
		room := h.cfg.MaxInFlight - int(h.inFlight.Load())
		// Under mu, so that Held counts each event once, queued or sent.
		h.mu.Lock()
		batch, host := h.queue.take(min(room, h.cfg.MaxBatch), h.tenants.weight, h.hosts.free)
		n := len(batch)
		h.sent += n
		h.mu.Unlock()
		if n == 0 {
			return true
		}
		h.hosts.acquire(host, n)
		h.inFlight.Add(int64(n))
		h.workers.GoWith(&h.deliveries, func() {
			o, rs := h.deliverTenant(h.workCtx, batch)
			h.hosts.done(host, n, rs)
			written := 0
			if o != nil {
				written = o.each
				if len(o.items) > 0 {
					written += len(o.items)
					h.outcomes.put(o)
				}
			}
			h.settle(n - written)
			h.inFlight.Add(-int64(n))
			if h.queue.Len() > 0 {
				// Its slots may let a waiting event go. With none
				// waiting, the next enqueue starts it.
				h.wakeDispatch()
			}
		})
	}
}

// settle counts n sent events as no longer held: their outcomes are
// written, or they are not to be written.
func (h *Handler) settle(n int) {
	if n == 0 {
		return
	}
	h.mu.Lock()
	h.sent -= n
	h.mu.Unlock()
}

// deliverTenant delivers a batch of one tenant with the tenant's target rule
// in the context.
func (h *Handler) deliverTenant(ctx context.Context, batch []throttle.Item) (*outcomes, []delivery.Result) {
	tenant := batch[0].Event.TenantID
	rule, err := h.tenants.rule(ctx, tenant)
	if err != nil {
		h.log.Warn().Err(err).Str(logkey.Tenant, tenant).Int("events", len(batch)).Msg("tenant's targets unknown; not sending")
		return h.deliverWith(ctx, batch, err)
	}
	return h.deliverWith(netguard.WithTargetRule(ctx, tenant, rule), batch, nil)
}

// outcomes is one delivered batch waiting to be written.
type outcomes struct {
	items   []throttle.Item
	results []delivery.Result
	ts      []store.EventTransition
	// traces are the traceparents of the items' attempts ("": none),
	// which their failures' log lines name.
	traces []string
	// each counts the events of the delivery whose outcomes were queued one
	// by one as they came (deliverEach), not in this batch.
	each int
	// lingers: no outcome of the batch gives a token back or is awaited by
	// a consumer's release (all unthrottled), so its write may wait for
	// others to share its commit.
	lingers bool
	put     time.Time // when it was queued (real time)
}

// add appends the outcomes of o to m.
func (m *outcomes) add(o *outcomes) {
	m.items, m.results, m.ts = append(m.items, o.items...), append(m.results, o.results...), append(m.ts, o.ts...)
	m.traces = append(m.traces, o.traces...)
	for len(m.traces) < len(m.items) {
		m.traces = append(m.traces, "")
	}
}

// trace is the traceparent of the attempt of item i, "" if none.
func (o *outcomes) trace(i int) string {
	if i < len(o.traces) {
		return o.traces[i]
	}
	return ""
}

// lingers reports whether every item is unthrottled.
func lingers(items []throttle.Item) bool {
	for _, it := range items {
		if it.Policy != nil {
			return false
		}
	}
	return true
}

// writer writes delivery outcomes, merging what is queued (up to MaxBatch
// events) into one EventTransition call.
func (h *Handler) writer() {
	for {
		o, ok := h.outcomes.take(h.cfg.MaxBatch)
		if !ok {
			return
		}
		h.record(h.workCtx, o)
		h.outcomes.release(len(o.items))
		h.settle(len(o.items))
		h.madeRoom()
	}
}

// outbox holds delivered batches until the writers have written them. It
// counts events, not batches (a batch may be one event or MaxBatch): put
// waits while max events are queued or being written, so memory stays
// bounded when the store is slow.
//
// With linger set, take holds back batches of unthrottled events until
// the oldest has waited linger or a full write is queued: when events are
// delivered one at a time (a fire spread over its window), one commit then
// records several outcomes instead of one each. While busy reports due
// events waiting for a delivery slot (a burst), it holds them back, full
// writes too, up to busyLingers lingers and while the box is at most three
// quarters full: their commits would take the cores the sending needs.
// linger is real time, not the handler's clock: it only groups writes.
type outbox struct {
	mu      sync.Mutex
	queued  sync.Cond // a batch was put, the box closed, or a linger ended
	space   sync.Cond // events were written
	q       []*outcomes
	events  int // queued or being written
	waiting int // queued
	max     int
	closed  bool
	linger  time.Duration
	timer   *time.Timer // wakes take when the oldest batch's linger ends
	batch   int         // the max of the last take: a full write
	busy    func() bool // due events wait for a delivery slot; nil: never
}

// busyLingers is how many lingers unthrottled outcomes may wait while due
// events wait for a delivery slot.
const busyLingers = 10

func newOutbox(max int, linger time.Duration, busy func() bool) *outbox {
	b := &outbox{max: max, linger: linger, busy: busy}
	b.queued.L, b.space.L = &b.mu, &b.mu
	return b
}

// sending reports whether lingering outcomes give way to the sending of
// due events. Called with b.mu held.
func (b *outbox) sending() bool {
	return b.busy != nil && 4*b.events <= 3*b.max && b.busy()
}

func (b *outbox) put(o *outcomes) {
	n := len(o.items)
	if b.linger > 0 {
		o.lingers, o.put = lingers(o.items), time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.events > 0 && b.events+n > b.max {
		b.space.Wait()
	}
	b.q = append(b.q, o)
	b.events += n
	b.waiting += n
	if b.timer != nil && o.lingers && (b.waiting < b.batch || b.sending()) {
		// A writer lingers already; its timer wakes it.
		return
	}
	b.queued.Signal()
}

// holdBack reports how long take should wait for more batches before
// writing what is queued (0: write now). Called with b.mu held.
func (b *outbox) holdBack(max int) time.Duration {
	if b.linger <= 0 || b.closed {
		return 0
	}
	for _, o := range b.q {
		if !o.lingers {
			return 0
		}
	}
	age := time.Since(b.q[0].put)
	if b.sending() {
		if w := busyLingers*b.linger - age; w > 0 {
			// Looked at again after a linger at most: the due events
			// may have gone by then.
			return min(w, b.linger)
		}
	}
	if b.waiting >= max {
		return 0
	}
	return b.linger - age
}

// take waits for queued batches and merges them up to max events (at least
// one batch); false once the box is closed and empty.
func (b *outbox) take(max int) (*outcomes, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batch = max
	for {
		for len(b.q) == 0 && !b.closed {
			b.queued.Wait()
		}
		if len(b.q) == 0 {
			return nil, false
		}
		wait := b.holdBack(max)
		if wait <= 0 {
			break
		}
		if b.timer == nil {
			b.timer = time.AfterFunc(wait, func() {
				b.mu.Lock()
				b.timer = nil
				b.queued.Broadcast()
				b.mu.Unlock()
			})
		}
		b.queued.Wait()
	}
	o := b.q[0]
	i := 1
	if i < len(b.q) && len(o.items) < max {
		m := &outcomes{}
		m.add(o)
		for ; i < len(b.q) && len(m.items) < max; i++ {
			m.add(b.q[i])
		}
		o = m
	}
	clear(b.q[:i])
	b.q = b.q[i:]
	b.waiting -= len(o.items)
	if len(b.q) > 0 {
		// Another writer may take the rest.
		b.queued.Signal()
	}
	return o, true
}

// release ends the writing of n events.
func (b *outbox) release(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events -= n
	b.space.Broadcast()
}

// close lets the writers return once the box is empty, writing what is
// queued without lingering.
func (b *outbox) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.queued.Broadcast()
}

// deliverWith sends one batch and returns the outcomes to write (nil if
// nothing was sent) and the results of every event sent; with fail set,
// each event fails with it instead (retryable). The outcomes of events sent
// one by one (deliverEach) are queued for the writers as they come, not
// returned.
func (h *Handler) deliverWith(ctx context.Context, batch []throttle.Item, fail error) (*outcomes, []delivery.Result) {
	clock := h.deps.Clock
	owns := map[int]bool{}
	send := batch[:0:0]
	var later []throttle.Item
	for _, it := range batch {
		if it.Policy == nil {
			// Unthrottled events are still scheduled: deliver only while
			// the shard lease is valid.
			ok, seen := owns[it.Shard]
			if !seen {
				ok = h.deps.Shards.Owns(it.Shard, it.Fence)
				owns[it.Shard] = ok
			}
			if !ok {
				later = append(later, it)
				continue
			}
		}
		send = append(send, it)
	}
	if len(later) > 0 {
		// The lease may be renewing; look again in a second. If the shard
		// is really lost, the timer drops them.
		at := clock.Now().Add(time.Second)
		for i := range later {
			e := *later[i].Event
			e.LaunchAt = at
			later[i].Event = &e
		}
		h.schedule(later)
	}
	send = h.recheck(ctx, send)
	send = h.dropExpired(ctx, send)
	send = h.renewTokens(ctx, send)
	if len(send) == 0 {
		return nil, nil
	}

	// Deliver, grouped by target type.
	results := make([]delivery.Result, len(send))
	groups := map[model.TargetType][]int{}
	for i, it := range send {
		groups[it.Event.Target.Type] = append(groups[it.Event.Target.Type], i)
	}
	start := clock.Now()
	for _, it := range send {
		h.observeLateness(it, start)
	}
	each := make([]bool, len(send)) // sent one by one, outcomes queued already
	traces := make([]string, len(send))
	for tt, idx := range groups {
		d := h.deps.Deliverers[tt]
		if fail != nil {
			for _, i := range idx {
				results[i] = delivery.Result{Err: fail}
			}
			continue
		}
		if d == nil {
			for _, i := range idx {
				results[i] = delivery.Result{Err: fmt.Errorf("no deliverer for target type %q", tt), Permanent: true}
			}
			continue
		}
		evs := make([]*model.Event, len(idx))
		for j, i := range idx {
			evs[j] = send[i].Event
			if p := send[i].Policy; p != nil && p.AutoRelease {
				// Its token goes back at delivery: the message names no
				// token expiry.
				e := *evs[j]
				e.TokenExpiresAt = nil
				evs[j] = &e
			}
		}
		spans := h.startAttempts(ctx, tt, evs)
		for j, i := range idx {
			traces[i] = evs[j].TraceParent
		}
		var rs []delivery.Result
		if (tt == model.TargetHTTP || tt == model.TargetHTTPBatch) && adaptiveHTTP(send, idx) {
			its := make([]throttle.Item, len(idx))
			for j, i := range idx {
				its[j] = send[i]
				each[i] = true
			}
			rs = h.deliverEach(ctx, d, evs, its)
		} else {
			rs = d.Deliver(ctx, evs)
		}
		endAttempts(spans, rs)
		for j, i := range idx {
			if j < len(rs) {
				results[i] = rs[j]
			} else {
				results[i] = delivery.Result{Err: errors.New("deliverer returned no result")}
			}
		}
	}
	now := clock.Now()
	o := &outcomes{}
	for i, it := range send {
		if each[i] {
			o.each++
		} else {
			h.answer(it, results[i], now.Sub(start))
			o.items, o.results, o.traces = append(o.items, it), append(o.results, results[i]), append(o.traces, traces[i])
		}
	}
	return h.outcomesAt(o, now), results
}

// outcomesAt sets the transitions of o's results at now and tells the
// throttle which events are delivered.
func (h *Handler) outcomesAt(o *outcomes, now time.Time) *outcomes {
	o.ts = make([]store.EventTransition, len(o.items))
	var ok []string
	for i, it := range o.items {
		o.ts[i] = h.outcome(it, o.results[i], now)
		if o.ts[i].To == model.EventDelivered {
			ok = append(ok, it.Event.ID)
		}
	}
	// Until its delivered write, a consumer's release may already come.
	h.thr.Delivered(ok...)
	return o
}

// observeLateness reports the delay the scheduler added to it: from the
// moment the event may go (its launch time or, for a throttled event, the
// later moment it was granted its token) to the start of its delivery. The
// wait for the token is the policy's doing and is reported apart.
func (h *Handler) observeLateness(it throttle.Item, start time.Time) {
	may := it.Event.LaunchAt
	if it.Policy != nil && !it.TokenAt.IsZero() {
		wait := max(0, it.TokenAt.Sub(may))
		h.deps.Metrics.TokenWait(wait)
		may = may.Add(wait)
	}
	h.deps.Metrics.Lateness(max(0, start.Sub(may)))
}

// recheck drops the items marked Recheck whose event the store no longer
// has scheduled under the item's fence (the consumer acknowledged the
// previous owner's delivery, or the event moved on). An event that cannot
// be read is sent: at least once.
func (h *Handler) recheck(ctx context.Context, items []throttle.Item) []throttle.Item {
	var ids []string
	for _, it := range items {
		if it.Recheck {
			ids = append(ids, it.Event.ID)
		}
	}
	if len(ids) == 0 {
		return items
	}
	// One read for all of them: after a takeover they can be hundreds.
	cur, err := h.deps.Store.EventGetMany(ctx, ids)
	if err != nil {
		h.log.Warn().Err(err).Int("events", len(ids)).Msg("reading taken-over events failed; sending them")
		return items
	}
	out := items[:0:0]
	dropped := 0
	for _, it := range items {
		if it.Recheck {
			if e := cur[it.Event.ID]; e == nil || e.Status != model.EventScheduled || e.Fence != it.Fence {
				dropped++
				continue
			}
		}
		out = append(out, it)
	}
	if dropped > 0 {
		h.log.Info().Int("events", dropped).Msg("taken-over events already finished; not sent again")
	}
	return out
}

// renewTokens renews the tokens of throttled items that waited more than
// TokenRenewAfter (or its default) since they took them and returns the items to send. An
// item whose renewal lost its compare-and-set is not sent: its token timed
// out and was reclaimed (the event is retrying), or a newer owner has it.
// Without the renewal a late send could reach the consumer after the
// reclaim gave the token to another event, one more than maxInFlight.
// An item whose token has expired is not sent nor renewed: it may have
// been reclaimed and the event started again with a new token, which a
// renewal (same status and fence) could not tell apart; the reclaim
// retries it. When the store cannot be reached, items whose tokens have
// not expired yet are sent (the reclaim needs the store too).
func (h *Handler) renewTokens(ctx context.Context, items []throttle.Item) []throttle.Item {
	now := h.deps.Clock.Now()
	var idx []int
	var ts []store.EventTransition
	expired := map[int]bool{}
	for i, it := range items {
		if it.Policy == nil || it.Event.TokenExpiresAt == nil {
			continue
		}
		if !it.Event.TokenExpiresAt.After(now) {
			// Its token may have been reclaimed and the event granted a
			// new one since (same status, same fence): a renewal would
			// win against that new holder's state and send this copy
			// beside it. The reclaim retries it.
			expired[i] = true
			continue
		}
		timeout := h.thr.TokenTimeout(it.Policy)
		after := h.cfg.TokenRenewAfter
		if after == 0 {
			after = max(time.Second, timeout/10)
		}
		if timeout-it.Event.TokenExpiresAt.Sub(now) <= after {
			continue
		}
		exp := now.Add(timeout)
		idx = append(idx, i)
		ts = append(ts, store.RenewToken(it.Event.ID, it.Fence, exp, now))
	}
	drop := expired
	if len(ts) == 0 && len(drop) == 0 {
		return items
	}
	var res []error
	var err error
	if len(ts) > 0 {
		res, err = h.deps.Store.EventTransition(context.WithoutCancel(ctx), ts)
	}
	renewed := 0
	for j, i := range idx {
		switch {
		case err == nil && res[j] == nil:
			renewed++
			e := *items[i].Event
			e.TokenExpiresAt = ts[j].TokenExpiresAt
			items[i].Event = &e
		case err == nil || !items[i].Event.TokenExpiresAt.After(now):
			drop[i] = true
		}
	}
	if err != nil {
		h.log.Warn().Err(err).Int("events", len(ts)).Msg("renewing tokens before a late send failed")
	}
	if len(ts) > 0 {
		h.deps.Metrics.TokensRenewed(renewed)
	}
	if len(drop) == 0 {
		return items
	}
	h.log.Info().Int("events", len(drop)).Msg("not sending events whose tokens timed out before their send")
	out := items[:0:0]
	for i, it := range items {
		if !drop[i] {
			out = append(out, it)
		}
	}
	return out
}

// record writes the outcomes of delivered batches, gives back the tokens of
// the transitions that won and leave a token-holding status, and reports.
func (h *Handler) record(ctx context.Context, o *outcomes) {
	for _, it := range o.items {
		if it.Started != nil {
			<-it.Started // sent early: its start must be written first
		}
	}
	res := h.transition(ctx, o.ts)
	var ok []string
	for _, tr := range o.ts {
		if tr.To == model.EventDelivered {
			ok = append(ok, tr.ID)
		}
	}
	h.thr.OutcomeWritten(ok...)
	after := h.deliveredAfterLoss(ctx, o, res)
	tokens := map[string]int{}
	failed := map[delivery.Reason]int{}
	now := h.deps.Clock.Now()
	var delivered int
	retried, dead := map[string]int{}, map[string]int{}
	for i, it := range o.items {
		var to model.EventStatus
		if res != nil && res[i] == nil {
			to = o.ts[i].To
			if it.Policy != nil && to != model.EventDelivered {
				tokens[it.Event.PolicyID]++
			}
			switch to {
			case model.EventReleased, model.EventDelivered:
				delivered++
			case model.EventRetrying:
				retried[model.PriorityClass(it.Event.Priority)]++
			case model.EventDead:
				dead[model.PriorityClass(it.Event.Priority)]++
			}
		} else if o.results[i].Err == nil {
			// The write lost (the consumer released first, the token
			// timed out, a newer owner claimed the event, or it was
			// cancelled): the attempt still delivered.
			delivered++
			if after[i] {
				to = model.EventReleased
			}
		}
		if r := o.results[i]; r.Err != nil {
			reason := delivery.ReasonOf(it.Event.Target.Type, r)
			failed[reason]++
			h.logFailure(it.Event, o.trace(i), r, reason, to == model.EventDead, now)
		}
		if h.deps.Hooks.Attempted != nil {
			h.deps.Hooks.Attempted(it.Event, o.results[i], to)
		}
	}
	for pid, n := range tokens {
		if err := h.thr.ReturnTokens(context.WithoutCancel(ctx), pid, n); err != nil {
			h.log.Warn().Err(err).Str(logkey.Policy, pid).Int("tokens", n).Msg("returning tokens failed")
		}
	}
	if delivered > 0 {
		h.deps.Metrics.Delivered(delivered)
	}
	for c, n := range retried {
		h.deps.Metrics.Retried(c, n)
	}
	for c, n := range dead {
		h.deps.Metrics.Dead(c, n)
	}
	for reason, n := range failed {
		h.deps.Metrics.DeliveryFailed(reason, n)
	}
}

// deliveredAfterLoss records the deliveries whose outcome write lost to a
// consumer's release (a consumer that released before it answered) or to
// a cancel (a pause or delete while the handler held the event): on the
// released event, its attempt and deliveredAt; the cancelled one becomes
// released. It reports which were recorded.
func (h *Handler) deliveredAfterLoss(ctx context.Context, o *outcomes, res []error) map[int]bool {
	if res == nil {
		return nil
	}
	var lost []int
	for i, err := range res {
		if errors.Is(err, model.ErrConflict) && o.results[i].Err == nil {
			lost = append(lost, i)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	// A quick release is the usual loss: its record goes first, in one
	// batched write; what it does not find released may be cancelled. The
	// rest lost to a newer owner or a token timeout and fail both.
	won := map[int]bool{}
	ts := make([]store.EventTransition, len(lost))
	for j, i := range lost {
		ts[j] = store.DeliveredAfterRelease(o.ts[i].ID, o.ts[i].Attempts, o.ts[i].At, h.deps.Clock.Now())
	}
	var rest []int
	for j, err := range h.transition(ctx, ts) {
		if err == nil {
			won[lost[j]] = true
		} else {
			rest = append(rest, lost[j])
		}
	}
	if len(rest) == 0 {
		return won
	}
	ts = ts[:0]
	for _, i := range rest {
		ts = append(ts, store.DeliveredAfterCancel(o.ts[i].ID, o.ts[i].Attempts, o.ts[i].At, h.deps.Clock.Now()))
	}
	cancelled := 0
	for j, err := range h.transition(ctx, ts) {
		if err == nil {
			won[rest[j]] = true
			cancelled++
		}
	}
	if cancelled > 0 {
		h.log.Info().Int("events", cancelled).Msg("events cancelled while being delivered recorded as released")
	}
	return won
}

// transition writes ts, retrying a store outage with backoff until the
// handler's context ends; nil if it never succeeded (the events stay
// scheduled or delivering and are delivered again later: at least once).
func (h *Handler) transition(ctx context.Context, ts []store.EventTransition) []error {
	wait := 50 * time.Millisecond
	for {
		res, err := h.deps.Store.EventTransition(context.WithoutCancel(ctx), ts)
		if err == nil {
			return res
		}
		h.log.Warn().Err(err).Int("events", len(ts)).Msg("writing delivery outcomes failed; retrying")
		select {
		case <-ctx.Done():
			return nil
		case <-h.deps.Clock.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// outcome is the transition that records result r of delivering it.
func (h *Handler) outcome(it throttle.Item, r delivery.Result, now time.Time) store.EventTransition {
	e := it.Event
	from, throttled := model.EventScheduled, it.Policy != nil
	if throttled {
		from = model.EventDelivering
	}
	// Attempts counts every attempt made, the successful one included.
	attempts := e.Attempts + 1
	if r.Err == nil {
		if throttled && !it.Policy.AutoRelease {
			// The consumer keeps the token until it releases it.
			return store.Delivered(e.ID, it.Fence, attempts, now)
		}
		return store.DeliveredReleased(e.ID, from, it.Fence, attempts, throttled, now)
	}
	lastErr := truncate(errorText(r), 1000)
	switch {
	case r.Permanent:
		return store.Dead(e.ID, from, it.Fence, attempts, lastErr, throttled, now)
	case r.RetryAfter > 0:
		// The consumer asked to be called later: not a failure of its code,
		// so Attempts stays (0 keeps it).
		return store.Retry(e.ID, from, it.Fence, 0, now.Add(min(r.RetryAfter, h.cfg.MaxRetryAfter)), lastErr, throttled, now)
	}
	maxA := e.MaxAttempts
	if maxA <= 0 {
		maxA = h.cfg.DefaultMaxAttempts
	}
	if attempts >= maxA {
		return store.Dead(e.ID, from, it.Fence, attempts, lastErr, throttled, now)
	}
	next := now.Add(h.cfg.Backoff(attempts))
	if e.ExpireAt != nil && !next.Before(*e.ExpireAt) {
		// The retry would come after the event expires: it ends now.
		return store.Expired(e.ID, from, it.Fence, attempts, truncate(expiredText+"; last error: "+lastErr, 1000), throttled, now)
	}
	return store.Retry(e.ID, from, it.Fence, attempts, next, lastErr, throttled, now)
}

// expiredText is the LastError of an event that expired before an attempt.
const expiredText = "expired: past its fire's deadline (onDeadline expire) or its maxEventAge"

// dropExpired moves the items whose event's ExpireAt has passed to
// expired instead of sending them (their tokens go back) and returns the
// others: nothing is sent after it, whenever the deadline check runs.
func (h *Handler) dropExpired(ctx context.Context, items []throttle.Item) []throttle.Item {
	now := h.deps.Clock.Now()
	var gone []throttle.Item
	out := items[:0:0]
	for _, it := range items {
		if x := it.Event.ExpireAt; x != nil && !now.Before(*x) {
			gone = append(gone, it)
			continue
		}
		out = append(out, it)
	}
	if len(gone) == 0 {
		return items
	}
	ts := make([]store.EventTransition, len(gone))
	for i, it := range gone {
		if it.Started != nil {
			<-it.Started // its start must be written first
		}
		from, throttled := model.EventScheduled, it.Policy != nil
		if throttled {
			from = model.EventDelivering
		}
		ts[i] = store.Expired(it.Event.ID, from, it.Fence, 0, expiredText, throttled, now)
	}
	res := h.transition(ctx, ts)
	tokens := map[string]int{}
	for i, it := range gone {
		if it.Policy != nil && res != nil && res[i] == nil {
			tokens[it.Event.PolicyID]++
		}
	}
	for pid, n := range tokens {
		if err := h.thr.ReturnTokens(context.WithoutCancel(ctx), pid, n); err != nil {
			h.log.Warn().Err(err).Str(logkey.Policy, pid).Int("tokens", n).Msg("returning tokens failed")
		}
	}
	h.log.Info().Int("events", len(gone)).Msg("events past their expiry not sent")
	return out
}

func errorText(r delivery.Result) string {
	s := r.Err.Error()
	if r.StatusCode != 0 {
		s = fmt.Sprintf("HTTP %d: %s", r.StatusCode, s)
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
