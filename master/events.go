package master

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// casRetries bounds how often a handler re-reads an event after losing a
// compare-and-set to a concurrent change.
const casRetries = 8

// ListEvents implements GET /v1/events.
func (s *Server) ListEvents(c echo.Context, params api.ListEventsParams) error {
	after, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	limit := s.pageSize(params.Limit)
	p := &store.EventListParams{
		TenantID:   callerOf(c).tenantID,
		ScheduleID: deref(params.ScheduleId, ""),
		FireID:     deref(params.FireId, ""),
		After:      after,
		Limit:      min(limit+1, 1000),
	}
	if params.Status != nil {
		p.Status = model.EventStatus(*params.Status)
	}
	if p.From, p.To, err = timeRange(params.From, params.To); err != nil {
		return err
	}
	items, err := s.store.EventList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := api.EventList{Items: make([]api.Event, 0, min(len(items), limit))}
	for i, e := range items {
		if i == limit {
			break
		}
		out.Items = append(out.Items, eventOut(e))
	}
	if len(items) > limit || (len(items) == limit && p.Limit == limit) {
		out.NextCursor = encodeCursor(items[limit-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}

// GetEvent implements GET /v1/events/{id}.
func (s *Server) GetEvent(c echo.Context, id api.ID) error {
	e, err := s.store.EventGet(c.Request().Context(), callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, eventOut(e))
}

// deliveryCopy is the copy of an event a delivery token came with (see
// model.DeliveryToken).
type deliveryCopy struct {
	fence   int64
	attempt int
}

// supersededBy reports whether e has been claimed again or retried since
// this copy was sent: the copy no longer holds e's token.
func (d deliveryCopy) supersededBy(e *model.Event) bool {
	return model.Superseded(e, d.fence, d.attempt)
}

// sentUnstarted reports whether this copy of the throttled event e was sent
// under an older fence, in e's current attempt, and e has not been started
// since: it waits again, scheduled under the fence of a newer claim. Only
// an early dispatch whose sender died before writing the start leaves such
// a copy (see throttle.Throttle.Release): its consumer has the event, so
// its release acknowledges it where the shard's owner can still keep it
// from being sent again.
func (d deliveryCopy) sentUnstarted(e *model.Event) bool {
	return e.PolicyID != "" && e.Status == model.EventScheduled &&
		d.fence > 0 && d.fence < e.Fence && d.attempt == model.CurrentAttempt(e)
}

// eventByToken returns the event if token is its release token, and which
// copy of the event the token came with. An unknown event and a wrong token
// are the same 404.
func (s *Server) eventByToken(ctx context.Context, id, token string) (*model.Event, deliveryCopy, error) {
	e, err := s.store.EventGetByID(ctx, id)
	if err != nil {
		return nil, deliveryCopy{}, err
	}
	fence, attempt, ok := model.MatchDeliveryToken(e.ReleaseToken, token)
	if !ok {
		return nil, deliveryCopy{}, notFound()
	}
	return e, deliveryCopy{fence: fence, attempt: attempt}, nil
}

// superseded answers a release or extend made with the token of an older
// copy of the event.
func superseded(e *model.Event) error {
	return conflict("this delivery of the event was superseded: the event was claimed again or its token timed out and it was retried (status " +
		string(e.Status) + "), and it is or will be delivered again; release that delivery instead")
}

// ReleaseEvent implements POST /v1/events/{id}/release. It is authorised by
// the release token and idempotent: the policy gets the token back exactly
// once, from the call whose compare-and-set moved the event to released.
func (s *Server) ReleaseEvent(c echo.Context, id api.ID) error {
	var in api.ReleaseRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	e, cp, err := s.eventByToken(ctx, id, in.Token)
	if err != nil {
		return err
	}
	if e.Status.Finished() {
		// Released (by this copy's consumer, or by the token timeout),
		// dead or cancelled: nothing changes and no token goes back.
		return c.JSON(http.StatusOK, api.EventState{Id: e.ID, Status: api.EventStatus(e.Status)})
	}
	if e.PolicyID == "" {
		// Any copy's receipt finishes it: it holds no token.
		return s.ackUnthrottled(c, e)
	}
	if cp.supersededBy(e) {
		if !cp.sentUnstarted(e) {
			return superseded(e)
		}
		// Released as the copy it is: the throttle acknowledges e if the
		// claim that superseded the copy is its own and e is still
		// waiting (not sent again), and refuses otherwise.
		sent := *e
		sent.Fence = cp.fence
		e = &sent
	}
	if fwd, err := s.forwardTokens(c, e, in); fwd {
		return err
	}
	// Tokens does the compare-and-set, gives the token back exactly
	// once, and hands it straight to a waiting event when the policy's
	// bucket runs in this process.
	now := s.now().UTC()
	released, err := s.tokens.Release(ctx, e, now)
	if released {
		if err != nil {
			// The event is released; the bucket owner's reconciliation
			// (counting token-holding events) repairs InUse.
			s.log.Error().Err(err).Str("event", e.ID).Str("policy", e.PolicyID).Msg("giving the token back failed")
		}
		e.Status, e.FinishedAt, e.TokenExpiresAt, e.UpdatedAt = model.EventReleased, &now, nil, now
		return c.JSON(http.StatusOK, api.EventState{Id: e.ID, Status: api.Released})
	}
	if err != nil {
		return err
	}
	// It holds no token (any more): answer by its current state.
	if e, err = s.store.EventGetByID(ctx, id); err != nil {
		return err
	}
	if e.Status.Finished() {
		return c.JSON(http.StatusOK, api.EventState{Id: e.ID, Status: api.EventStatus(e.Status)})
	}
	if cp.supersededBy(e) {
		return superseded(e)
	}
	return conflict("the event is " + string(e.Status) + " and holds no token")
}

// ackUnthrottled answers the release of an event without a policy. It holds
// no token, but the call proves that the consumer has the event (only a
// delivery carries the release token), so an event still scheduled (its
// delivery's outcome not yet written) or retrying (an attempt that timed
// out on our side but reached the consumer) is finished as released. Were
// it left scheduled, an instance that died between the consumer's answer
// and its outcome write would have the shard's next owner deliver it again.
// The handler's outcome write then loses its compare-and-set, which it
// counts as delivered. Other states are answered as they are.
//
// This is one more write for every delivery whose consumer releases at once
// (the instance recording it writes the outcome too), which costs
// throughput; leaving it to that instance's handler instead multiplied the
// duplicates in the chaos runs, where that handler's write often came after
// a kill.
func (s *Server) ackUnthrottled(c echo.Context, e *model.Event) error {
	// Once started, the write completes even if the consumer gives up
	// waiting (as a release does): a slow store otherwise cancelled it and
	// the event was delivered again (seen in a chaos run: 74 duplicates).
	ctx := context.WithoutCancel(c.Request().Context())
	for range casRetries {
		if e.Status != model.EventScheduled && e.Status != model.EventRetrying {
			return c.JSON(http.StatusOK, api.EventState{Id: e.ID, Status: api.EventStatus(e.Status)})
		}
		now := s.now().UTC()
		res, err := s.store.EventTransition(ctx, []store.EventTransition{store.Acknowledge(e.ID, e.Status, now)})
		if err != nil {
			return err
		}
		if res[0] == nil {
			return c.JSON(http.StatusOK, api.EventState{Id: e.ID, Status: api.Released})
		}
		if !errors.Is(res[0], model.ErrConflict) {
			return res[0]
		}
		if e, err = s.store.EventGetByID(ctx, e.ID); err != nil {
			return err
		}
	}
	return conflict("the event kept changing; try again")
}

// ExtendEvent implements POST /v1/events/{id}/extend.
func (s *Server) ExtendEvent(c echo.Context, id api.ID) error {
	var in api.ExtendRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	e, cp, err := s.eventByToken(ctx, id, in.Token)
	if err != nil {
		return err
	}
	if cp.supersededBy(e) && !e.Status.Finished() {
		return superseded(e)
	}
	if e.PolicyID != "" && e.Status.HoldsToken() {
		if fwd, err := s.forwardTokens(c, e, in); fwd {
			return err
		}
	}
	by := s.cfg.DefaultTokenTimeout
	if in.ExtendBy != nil {
		var fe fieldErrors
		by = s.parseTimeout(&fe, "extendBy", *in.ExtendBy)
		if err := fe.err(); err != nil {
			return err
		}
	} else if e.PolicyID != "" {
		p, err := s.store.PolicyGet(ctx, e.TenantID, e.PolicyID)
		switch {
		case err == nil:
			by = p.TokenTimeout
		case !errors.Is(err, model.ErrNotFound):
			return err
		}
	}
	for range casRetries {
		if !e.Status.HoldsToken() {
			return conflict("the event is " + string(e.Status) + " and holds no token")
		}
		if cp.supersededBy(e) {
			// Re-read after a lost compare-and-set: retried or claimed again.
			return superseded(e)
		}
		now := s.now().UTC()
		base := now
		if e.TokenExpiresAt != nil && e.TokenExpiresAt.After(now) {
			base = e.TokenExpiresAt.UTC()
		}
		until := base.Add(by)
		if limit := now.Add(s.cfg.MaxTokenTimeout); until.After(limit) {
			until = limit
		}
		err := s.tokens.Extend(ctx, e, until, now)
		switch {
		case err == nil:
			return c.JSON(http.StatusOK, api.EventState{Id: e.ID, Status: api.EventStatus(e.Status), TokenExpiresAt: &until})
		case errors.Is(err, model.ErrConflict):
			if e, err = s.store.EventGetByID(ctx, id); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return conflict("the event keeps changing; retry")
}

// RedriveEvent implements POST /v1/events/{id}/redrive.
func (s *Server) RedriveEvent(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	e, err := s.store.EventGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	var tr store.EventTransition
	switch e.Status {
	case model.EventDead:
		tr = store.Redrive(e.ID, now)
	case model.EventExpired:
		tr = store.RedriveExpired(e.ID, now)
	default:
		return conflict("only dead or expired events can be redriven; this one is " + string(e.Status))
	}
	errs, err := s.store.EventTransition(ctx, []store.EventTransition{tr})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		if errors.Is(errs[0], model.ErrConflict) {
			return conflict("the event changed meanwhile")
		}
		return errs[0]
	}
	if e, err = s.store.EventGet(ctx, tenant, id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, eventOut(e))
}

func eventOut(e *model.Event) api.Event {
	out := api.Event{
		Id:             e.ID,
		ScheduleId:     e.ScheduleID,
		FireId:         e.FireID,
		FireTime:       e.FireTime.UTC(),
		Index:          e.Index,
		Count:          e.Count,
		LaunchAt:       e.LaunchAt.UTC(),
		Deadline:       e.Deadline,
		ExpireAt:       e.ExpireAt,
		Priority:       e.Priority,
		Target:         targetOut(e.Target),
		MaxAttempts:    e.MaxAttempts,
		Status:         api.EventStatus(e.Status),
		Attempts:       e.Attempts,
		TokenExpiresAt: e.TokenExpiresAt,
		DeliveredAt:    e.DeliveredAt,
		FinishedAt:     e.FinishedAt,
		CreatedAt:      e.CreatedAt,
		UpdatedAt:      e.UpdatedAt,
	}
	if e.PolicyID != "" {
		out.PolicyId = &e.PolicyID
	}
	if len(e.Payload) > 0 {
		p := api.Payload(e.Payload)
		out.Payload = &p
	}
	if e.LastError != "" {
		out.LastError = &e.LastError
	}
	if e.TokenTimedOut {
		t := true
		out.TokenTimedOut = &t
	}
	return out
}

// GetFire implements GET /v1/fires/{id}.
func (s *Server) GetFire(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	f, err := s.store.FireGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	out, err := s.fireOut(ctx, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// ListScheduleFires implements GET /v1/schedules/{id}/fires, newest first.
func (s *Server) ListScheduleFires(c echo.Context, id api.ID, params api.ListScheduleFiresParams) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	pos, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	var before time.Time
	if pos != "" {
		if before, err = time.Parse(time.RFC3339Nano, pos); err != nil {
			return badCursor()
		}
	}
	if _, err := s.store.ScheduleGet(ctx, tenant, id); err != nil {
		return err
	}
	limit := s.pageSize(params.Limit)
	p := &store.FireListParams{TenantID: tenant, ScheduleID: id, Before: before, Limit: min(limit+1, 1000)}
	fires, err := s.store.FireList(ctx, p)
	if err != nil {
		return err
	}
	out := api.FireList{Items: make([]api.Fire, 0, min(len(fires), limit))}
	for i, f := range fires {
		if i == limit {
			break
		}
		o, err := s.fireOut(ctx, f)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, *o)
	}
	if len(fires) > limit || (len(fires) == limit && p.Limit == limit) {
		out.NextCursor = encodeCursor(fires[limit-1].FireTime.UTC().Format(time.RFC3339Nano))
	}
	return c.JSON(http.StatusOK, out)
}

// fireOut renders a fire with its live event counts.
func (s *Server) fireOut(ctx context.Context, f *model.Fire) (*api.Fire, error) {
	counts, err := s.store.EventCountByFire(ctx, f.ID)
	if err != nil {
		return nil, err
	}
	last, err := s.store.EventLastFinished(ctx, f.ID)
	if err != nil {
		return nil, err
	}
	out := &api.Fire{
		Id:             f.ID,
		ScheduleId:     f.ScheduleID,
		FireTime:       f.FireTime.UTC(),
		LocalTime:      f.LocalTime,
		N:              f.Count,
		Decision:       api.FireDecision(f.Decision),
		Counts:         countsOut(counts),
		LastFinishedAt: last,
		FinishedAt:     f.FinishedAt,
		CreatedAt:      f.CreatedAt,
	}
	if f.Note != "" {
		out.Note = &f.Note
	}
	if f.Jitter > 0 {
		j, at := f.Jitter.String(), f.FireTime.Add(f.Jitter).UTC()
		out.Jitter, out.LaunchAt = &j, &at
	}
	if f.Payload != nil {
		p := api.Payload(f.Payload)
		out.Payload = &p
	}
	fireEmission(out, f)
	if f.Deadline != nil {
		d, on := f.Deadline.UTC(), api.OnDeadline(f.OnDeadline)
		out.Deadline, out.OnDeadline = &d, &on
	}
	if m := f.DeadlineMissed; m != nil {
		out.DeadlineMissed = &api.DeadlineMissed{At: m.At.UTC(), Remaining: m.Remaining}
	}
	if err := s.fireETA(ctx, f, counts, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fireETA sets eta and atRisk of a fire with unfinished events: now plus
// those events' drain time at the throughput its policy has been giving
// (model.Policy.DrainTime). Nothing when the throughput is not known.
func (s *Server) fireETA(ctx context.Context, f *model.Fire, counts map[model.EventStatus]int, out *api.Fire) error {
	left := f.Remaining // not written yet
	for st, n := range counts {
		if !st.Finished() {
			left += n
		}
	}
	if left == 0 || !hasEventsDecision(f.Decision) {
		return nil
	}
	sc, err := s.store.ScheduleGet(ctx, f.TenantID, f.ScheduleID)
	if errors.Is(err, model.ErrNotFound) {
		return nil
	}
	if err != nil || sc.PolicyID == "" {
		return err
	}
	p, err := s.store.PolicyGet(ctx, f.TenantID, sc.PolicyID)
	if errors.Is(err, model.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	drain, ok := p.DrainTime(left)
	if !ok {
		return nil
	}
	eta := s.now().Add(drain).UTC()
	if launch := f.FireTime.Add(f.Jitter); eta.Before(launch) {
		eta = launch.Add(drain) // not launched yet: it drains from its launch
	}
	risk := f.Deadline != nil && eta.After(*f.Deadline)
	out.Eta, out.AtRisk = &eta, &risk
	return nil
}

// hasEventsDecision reports whether a fire so decided delivers events.
func hasEventsDecision(d model.FireDecision) bool {
	switch d {
	case model.FireSkippedOverlap, model.FireSkippedManual, model.FireSkippedCalendar:
		return false
	}
	return true
}

// fireEmission marks the representation of a fire whose events are still
// being written in the background.
func fireEmission(out *api.Fire, f *model.Fire) {
	if f.Remaining <= 0 {
		return
	}
	emitting, emitted := true, f.Count-f.Remaining
	out.Emitting, out.Emitted = &emitting, &emitted
}

// countsOut groups event counts by status as a fire or a summary shows them.
func countsOut(counts map[model.EventStatus]int) api.FireCounts {
	return api.FireCounts{
		Waiting:   counts[model.EventPending] + counts[model.EventScheduled],
		InFlight:  counts[model.EventDelivering],
		Delivered: counts[model.EventDelivered],
		Released:  counts[model.EventReleased],
		Retrying:  counts[model.EventRetrying],
		Dead:      counts[model.EventDead],
		Cancelled: counts[model.EventCancelled],
		Expired:   counts[model.EventExpired],
	}
}

// timeRange is the [from, to) of a list's query in UTC, each zero when
// absent; a to not after from is a 422 naming to.
func timeRange(from, to *time.Time) (f, t time.Time, err error) {
	if from != nil {
		f = from.UTC()
	}
	if to != nil {
		t = to.UTC()
	}
	if from != nil && to != nil && !t.After(f) {
		return f, t, invalid("to", "must be after from")
	}
	return f, t, nil
}
