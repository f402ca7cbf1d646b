package master

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/calendar"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// The consumer's brake: a consumer key is an API key scoped to one policy
// (model.APIKey.PolicyID). It may only call the operations of
// consumerOps, on its own policy; a tenant key of the policy's tenant may
// call them too. A hold is stored on the policy (model.Policy.Hold) and
// ends by itself at its until: the throttle ignores it from then on.

// consumerOps are the operations a consumer key may call, by lower-case
// operation id (the embedded spec capitalises them).
var consumerOps = map[string]bool{"setpolicyhold": true, "clearpolicyhold": true, "getpolicystatus": true}

// adminOrTenantOps are tenant operations the admin key may call too (on
// any tenant's objects); by lower-case operation id.
var adminOrTenantOps = map[string]bool{"createconsumerkey": true, "listconsumerkeys": true, "revokeconsumerkey": true, "listaudit": true}

// prefixConsumerKey starts a clear consumer key.
const prefixConsumerKey = "ck_"

// maxConsumerKeys bounds the unrevoked consumer keys of one policy.
const maxConsumerKeys = 100

// maxHold is how far ahead a hold may end.
const maxHold = 7 * 24 * time.Hour

// checkScope refuses a consumer key outside its policy's brake operations.
func checkScope(who *caller, op, policyParam string) error {
	if who.policyID == "" {
		return nil
	}
	if !consumerOps[op] || policyParam != who.policyID {
		return forbidden("a consumer key may only set or clear the hold of policy " + who.policyID + " and read its status")
	}
	return nil
}

// policyOfCaller is the policy id as the caller may see it: the tenant's
// (its own keys and consumer keys), or any tenant's for the admin.
func (s *Server) policyOfCaller(c echo.Context, id string) (*model.Policy, error) {
	ctx := c.Request().Context()
	who := callerOf(c)
	if who.admin {
		return s.store.PolicyGetByID(ctx, id)
	}
	return s.store.PolicyGet(ctx, who.tenantID, id)
}

// CreateConsumerKey implements POST /v1/policies/{id}/consumer-keys.
func (s *Server) CreateConsumerKey(c echo.Context, id api.ID, _ api.CreateConsumerKeyParams) error {
	p, err := s.policyOfCaller(c, id)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	keys, err := s.store.APIKeyList(ctx, p.TenantID)
	if err != nil {
		return err
	}
	n := 0
	for _, k := range keys {
		if k.PolicyID == p.ID && k.RevokedAt == nil {
			n++
		}
	}
	if n >= maxConsumerKeys {
		return conflict("the policy has " + itoa(n) + " consumer keys, the most it may have; revoke one first")
	}
	return s.idempotent(c, model.PrefixKey, func(keyID string) (int, any, error) {
		clear := prefixConsumerKey + newAPIKey()[len(prefixAPIKey):]
		k := &model.APIKey{
			ID: keyID, TenantID: p.TenantID, PolicyID: p.ID,
			Hash:      model.HashAPIKey(clear),
			Prefix:    clear[:len(prefixConsumerKey)+6],
			CreatedAt: s.now().UTC(),
		}
		if err := s.store.APIKeyCreate(ctx, k); err != nil {
			return 0, nil, err
		}
		o := keyOut(k)
		return http.StatusCreated, api.APIKeyCreated{
			Id: o.Id, TenantId: o.TenantId, PolicyId: o.PolicyId, Prefix: o.Prefix, CreatedAt: o.CreatedAt, Key: clear,
		}, nil
	}, nil)
}

// ListConsumerKeys implements GET /v1/policies/{id}/consumer-keys.
func (s *Server) ListConsumerKeys(c echo.Context, id api.ID) error {
	p, err := s.policyOfCaller(c, id)
	if err != nil {
		return err
	}
	keys, err := s.store.APIKeyList(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	out := api.APIKeyList{Items: []api.APIKey{}}
	for _, k := range keys {
		if k.PolicyID == p.ID {
			out.Items = append(out.Items, keyOut(k))
		}
	}
	return c.JSON(http.StatusOK, out)
}

// RevokeConsumerKey implements DELETE /v1/policies/{id}/consumer-keys/{keyId}.
func (s *Server) RevokeConsumerKey(c echo.Context, id api.ID, keyID string) error {
	p, err := s.policyOfCaller(c, id)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	keys, err := s.store.APIKeyList(ctx, p.TenantID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == keyID && k.PolicyID == p.ID {
			if err := s.revokeKey(ctx, p.TenantID, keyID); err != nil {
				return err
			}
			return c.NoContent(http.StatusNoContent)
		}
	}
	return notFound()
}

// SetPolicyHold implements POST /v1/policies/{id}/hold.
func (s *Server) SetPolicyHold(c echo.Context, id api.ID) error {
	var in api.HoldRequest
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	p, err := s.policyOfCaller(c, id)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	var fe fieldErrors
	switch {
	case !in.Until.After(now):
		fe.add("until", "is not in the future ("+now.Format(time.RFC3339)+")")
	case in.Until.Sub(now) > maxHold:
		fe.add("until", "more than "+maxHold.String()+" ahead; a hold must end by itself")
	}
	switch {
	case in.MaxInFlight < 0:
		fe.add("maxInFlight", "must not be negative")
	case in.MaxInFlight > p.MaxInFlight:
		fe.add("maxInFlight", "over the policy's own limit ("+itoa(p.MaxInFlight)+"); a hold only lowers it")
	case p.ConcurrencyKey != "":
		fe.add("maxInFlight", "a policy with a concurrencyKey cannot be held")
	}
	if err := fe.err(); err != nil {
		return err
	}
	h := &model.PolicyHold{Until: in.Until.UTC(), MaxInFlight: in.MaxInFlight, SetAt: now, By: callerOf(c).keyPrefix}
	if err := s.store.PolicySetHold(c.Request().Context(), p.TenantID, p.ID, h); err != nil {
		return err
	}
	p.Hold = h
	return s.statusAnswer(c, p)
}

// ClearPolicyHold implements DELETE /v1/policies/{id}/hold.
func (s *Server) ClearPolicyHold(c echo.Context, id api.ID) error {
	p, err := s.policyOfCaller(c, id)
	if err != nil {
		return err
	}
	if p.Hold != nil {
		if err := s.store.PolicySetHold(c.Request().Context(), p.TenantID, p.ID, nil); err != nil {
			return err
		}
		p.Hold = nil
	}
	return s.statusAnswer(c, p)
}

// GetPolicyStatus implements GET /v1/policies/{id}/status.
func (s *Server) GetPolicyStatus(c echo.Context, id api.ID) error {
	p, err := s.policyOfCaller(c, id)
	if err != nil {
		return err
	}
	return s.statusAnswer(c, p)
}

func (s *Server) statusAnswer(c echo.Context, p *model.Policy) error {
	out, err := s.policyStatus(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// effective is a policy's limit, rate and their source at now, and when
// they next may change by time alone.
type effective struct {
	limit  int
	source string
	rate   float64
	until  time.Time
}

func (s *Server) effectiveOf(ctx context.Context, p *model.Policy, now time.Time) (effective, error) {
	cp, err := PolicyCaps(s.store).PolicyCap(ctx, p, now)
	if err != nil {
		return effective{}, err
	}
	e := effective{until: p.NextChange(cp, now)}
	e.limit, e.source = p.Effective(cp, now)
	e.rate, _ = p.EffectiveRate(cp)
	return e, nil
}

// policyStatus is the consumer's view: tokens out, events waiting, the
// effective limit and why, and when the waiting events would be out.
func (s *Server) policyStatus(ctx context.Context, p *model.Policy) (*api.PolicyStatus, error) {
	now := s.now().UTC()
	waiting, err := s.store.EventCountWaiting(ctx, p.ID, now)
	if err != nil {
		return nil, err
	}
	e, err := s.effectiveOf(ctx, p, now)
	if err != nil {
		return nil, err
	}
	out := &api.PolicyStatus{
		PolicyId: p.ID, TokensInUse: p.InUse, Waiting: waiting, MaxInFlight: p.MaxInFlight,
		EffectiveLimit: e.limit, LimitSource: e.source,
	}
	if !e.until.IsZero() {
		u := e.until.UTC()
		out.LimitUntil = &u
	}
	if e.rate > 0 {
		r := e.rate
		out.RatePerSecond = &r
	}
	if h := p.Hold; h.Active(now) {
		out.Hold = holdOut(h)
	}
	// The drain time at the limit and rate that apply now.
	q := *p
	q.Adaptive, q.MaxInFlight, q.RatePerSecond = nil, e.limit, e.rate
	if d, ok := q.DrainTime(waiting); ok && e.limit > 0 {
		eta := now.Add(d)
		out.DrainEta = &eta
	}
	return out, nil
}

func holdOut(h *model.PolicyHold) *api.PolicyHold {
	o := &api.PolicyHold{Until: h.Until, MaxInFlight: h.MaxInFlight, SetAt: h.SetAt}
	if h.By != "" {
		by := h.By
		o.By = &by
	}
	return o
}

// setLimits sets p's limit schedule from in after checking it: the rules
// in package calendar, their calendars here (the tenant's own).
func (s *Server) setLimits(ctx context.Context, fe *fieldErrors, p *model.Policy, in *[]api.LimitRule) error {
	if in == nil {
		return nil
	}
	p.Limits = nil
	for _, r := range *in {
		w := r.When
		m := model.LimitRule{MaxInFlight: r.MaxInFlight, When: model.LimitWhen{
			From: deref(w.From, ""), To: deref(w.To, ""), Timezone: deref(w.Timezone, ""), CalendarID: deref(w.CalendarId, ""),
		}}
		if r.RatePerSecond != nil {
			m.RatePerSecond = *r.RatePerSecond
		}
		if w.Days != nil {
			for _, d := range *w.Days {
				m.When.Days = append(m.When.Days, string(d))
			}
		}
		p.Limits = append(p.Limits, m)
	}
	if _, err := calendar.CompileLimits(p.Limits); err != nil {
		var ce schedule.Errors
		if !errors.As(err, &ce) {
			return err
		}
		*fe = append(*fe, ce...)
	}
	for i, r := range p.Limits {
		if r.When.CalendarID == "" {
			continue
		}
		_, err := s.store.CalendarGet(ctx, p.TenantID, r.When.CalendarID)
		switch {
		case errors.Is(err, model.ErrNotFound):
			fe.add("limits["+itoa(i)+"].when.calendarId", "no calendar "+r.When.CalendarID+" of the tenant")
		case err != nil:
			return err
		}
	}
	return nil
}

func limitsOut(rs []model.LimitRule) *[]api.LimitRule {
	if len(rs) == 0 {
		return nil
	}
	out := make([]api.LimitRule, len(rs))
	for i, r := range rs {
		w := r.When
		o := api.LimitRule{MaxInFlight: r.MaxInFlight}
		if r.RatePerSecond > 0 {
			x := r.RatePerSecond
			o.RatePerSecond = &x
		}
		if w.CalendarID != "" {
			id := w.CalendarID
			o.When.CalendarId = &id
		} else {
			days := make([]api.LimitWhenDays, len(w.Days))
			for j, d := range w.Days {
				days[j] = api.LimitWhenDays(d)
			}
			o.When.Days = &days
			o.When.From, o.When.To, o.When.Timezone = strPtr(w.From), strPtr(w.To), strPtr(w.Timezone)
		}
		out[i] = o
	}
	return &out
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
