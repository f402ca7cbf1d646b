package master

import (
	"context"
	"errors"
	"maps"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
)

// CreatePolicy implements POST /v1/policies.
func (s *Server) CreatePolicy(c echo.Context, _ api.CreatePolicyParams) error {
	var in api.PolicyCreate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	who := callerOf(c)
	p := &model.Policy{
		TenantID:     who.tenantID,
		Name:         in.Name,
		MaxInFlight:  in.MaxInFlight,
		TokenTimeout: s.cfg.DefaultTokenTimeout,
	}
	if in.AutoRelease != nil {
		p.AutoRelease = *in.AutoRelease
	}
	var fe fieldErrors
	s.checkName(&fe, "name", p.Name)
	setLimit(&fe, p, nil, in.Adaptive, false)
	if in.TokenTimeout != nil {
		p.TokenTimeout = s.parseTimeout(&fe, "tokenTimeout", *in.TokenTimeout)
	}
	if in.RatePerSecond != nil {
		p.RatePerSecond = *in.RatePerSecond
		checkRate(&fe, p.RatePerSecond)
	}
	if in.Burst != nil {
		p.Burst = *in.Burst
		checkBurst(&fe, p.Burst, p.RatePerSecond)
	}
	if in.ConcurrencyKey != nil {
		p.ConcurrencyKey = *in.ConcurrencyKey
	}
	if in.MaxInFlightTotal != nil {
		p.MaxInFlightTotal = *in.MaxInFlightTotal
	}
	checkConcurrency(&fe, p, in.ConcurrencyKey != nil, boundField(in.MaxInFlightTotal != nil, false, in.ConcurrencyKey != nil))
	setLabels(&fe, &p.Labels, in.Labels)
	ctx := c.Request().Context()
	if err := s.setLimits(ctx, &fe, p, in.Limits); err != nil {
		return err
	}
	checkLimitsKey(&fe, p)
	if err := fe.err(); err != nil {
		return err
	}
	return s.idempotent(c, model.PrefixPolicy, func(id string) (int, any, error) {
		p := *p
		p.ID = id
		now := s.now().UTC()
		p.CreatedAt, p.UpdatedAt, p.Version = now, now, 1
		if err := s.store.PolicyCreate(ctx, &p); err != nil {
			return 0, nil, s.nameTaken(ctx, &p, err)
		}
		noteChange(ctx, auditChange{objectID: p.ID, version: p.Version, after: &p})
		out, err := s.policyOut(ctx, &p)
		return http.StatusCreated, out, err
	}, func(id string) (int, any, error) {
		p, err := s.store.PolicyGet(ctx, who.tenantID, id)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.policyOut(ctx, p)
		return http.StatusCreated, out, err
	})
}

// ListPolicies implements GET /v1/policies.
func (s *Server) ListPolicies(c echo.Context) error {
	ctx := c.Request().Context()
	ps, err := s.store.PolicyList(ctx, callerOf(c).tenantID)
	if err != nil {
		return err
	}
	out := api.PolicyList{Items: make([]api.Policy, 0, len(ps))}
	for _, p := range ps {
		o, err := s.policyOut(ctx, p)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, *o)
	}
	return c.JSON(http.StatusOK, out)
}

// GetPolicy implements GET /v1/policies/{id}.
func (s *Server) GetPolicy(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	p, err := s.store.PolicyGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	out, err := s.policyOut(ctx, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// UpdatePolicy implements PATCH /v1/policies/{id}.
func (s *Server) UpdatePolicy(c echo.Context, id api.ID) error {
	var in api.PolicyUpdate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	old, err := s.store.PolicyGet(ctx, callerOf(c).tenantID, id)
	if err != nil {
		return err
	}
	p := *old
	var fe fieldErrors
	if in.Name != nil {
		p.Name = *in.Name
		s.checkName(&fe, "name", p.Name)
	}
	if in.MaxInFlight != nil || in.Adaptive != nil {
		setLimit(&fe, &p, in.MaxInFlight, in.Adaptive, true)
	}
	if in.TokenTimeout != nil {
		p.TokenTimeout = s.parseTimeout(&fe, "tokenTimeout", *in.TokenTimeout)
	}
	if in.AutoRelease != nil {
		p.AutoRelease = *in.AutoRelease
	}
	if in.RatePerSecond != nil {
		// 0 removes the rate limit, and with it the burst.
		p.RatePerSecond = *in.RatePerSecond
		if p.RatePerSecond == 0 {
			p.Burst = 0
		} else {
			checkRate(&fe, p.RatePerSecond)
		}
	}
	if in.Burst != nil {
		p.Burst = *in.Burst
		checkBurst(&fe, p.Burst, p.RatePerSecond)
	}
	if in.ConcurrencyKey != nil {
		// "" removes the key, and with it the overall bound.
		p.ConcurrencyKey = *in.ConcurrencyKey
		if p.ConcurrencyKey == "" && in.MaxInFlightTotal == nil {
			p.MaxInFlightTotal = 0
		}
	}
	if in.MaxInFlightTotal != nil {
		p.MaxInFlightTotal = *in.MaxInFlightTotal
	}
	checkConcurrency(&fe, &p, in.ConcurrencyKey != nil, boundField(in.MaxInFlightTotal != nil, in.MaxInFlight != nil, in.ConcurrencyKey != nil))
	setLabels(&fe, &p.Labels, in.Labels)
	if err := s.setLimits(ctx, &fe, &p, in.Limits); err != nil {
		return err
	}
	if in.Limits != nil || in.ConcurrencyKey != nil {
		checkLimitsKey(&fe, &p)
	}
	if err := fe.err(); err != nil {
		return err
	}
	p.Version = old.Version + 1
	p.UpdatedAt = s.now().UTC()
	if err := s.store.PolicyUpdate(ctx, &p, old.Version); err != nil {
		return s.nameTaken(ctx, &p, err)
	}
	noteChange(ctx, auditChange{objectID: p.ID, version: p.Version, before: old, after: &p})
	// Re-read: the store keeps InUse and TimedOut, which may have moved.
	fresh, err := s.store.PolicyGet(ctx, p.TenantID, p.ID)
	if err != nil {
		return err
	}
	out, err := s.policyOut(ctx, fresh)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// DeletePolicy implements DELETE /v1/policies/{id}: refused while a schedule
// names the policy.
func (s *Server) DeletePolicy(c echo.Context, id api.ID) error {
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	old, err := s.store.PolicyGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	n, err := s.store.ScheduleCountByPolicy(ctx, tenant, id)
	if err != nil {
		return err
	}
	if n > 0 {
		return conflict("the policy is used by " + itoa(n) + " schedule(s); change or delete them first")
	}
	if err := s.store.PolicyDelete(ctx, tenant, id); err != nil {
		return err
	}
	noteChange(ctx, auditChange{objectID: id, version: old.Version, before: old})
	return c.NoContent(http.StatusNoContent)
}

// nameTaken explains a conflict of writing p: the store answers ErrConflict
// both for a lost compare-and-set (or an id taken by a concurrent retry) and
// for a name another policy of the tenant has. The store decided; this only
// looks which it was, so a name conflict answers 409 naming the field.
func (s *Server) nameTaken(ctx context.Context, p *model.Policy, err error) error {
	if !errors.Is(err, model.ErrConflict) {
		return err
	}
	ps, lerr := s.store.PolicyList(ctx, p.TenantID)
	if lerr != nil {
		return err
	}
	for _, o := range ps {
		if o.Name == p.Name && o.ID != p.ID {
			return nameConflict("name", "a policy named "+strconv.Quote(p.Name)+" already exists: "+o.ID)
		}
	}
	return err
}

func (s *Server) policyOut(ctx context.Context, p *model.Policy) (*api.Policy, error) {
	waiting, err := s.store.EventCountWaiting(ctx, p.ID, s.now())
	if err != nil {
		return nil, err
	}
	out := &api.Policy{
		Id:            p.ID,
		Name:          p.Name,
		MaxInFlight:   p.MaxInFlight,
		TokenTimeout:  p.TokenTimeout.String(),
		AutoRelease:   p.AutoRelease,
		TokensInUse:   p.InUse,
		Waiting:       waiting,
		TokenTimeouts: p.TimedOut,
		Version:       p.Version,
		CreatedAt:     p.CreatedAt,
		UpdatedAt:     p.UpdatedAt,
	}
	if a := p.Adaptive; a != nil {
		out.Adaptive = &api.AdaptiveLimit{Min: a.Min, Max: &a.Max}
		ls := limitOf(p)
		reason := api.PolicyLimitReason(ls.reason)
		out.EffectiveLimit, out.LimitReason, out.LimitChangedAt = &ls.limit, &reason, &ls.at
	}
	out.Limits = limitsOut(p.Limits)
	if p.HoldTime > 0 {
		h := p.HoldTime.String()
		out.HoldTime = &h
	}
	now := s.now()
	if h := p.Hold; h.Active(now) {
		out.Hold = holdOut(h)
	}
	if p.Adaptive != nil || len(p.Limits) > 0 || p.Hold.Active(now) {
		e, err := s.effectiveOf(ctx, p, now)
		if err != nil {
			return nil, err
		}
		out.EffectiveLimit, out.LimitSource = &e.limit, &e.source
	}
	if p.ConcurrencyKey != "" {
		k := p.ConcurrencyKey
		out.ConcurrencyKey = &k
	}
	if p.MaxInFlightTotal > 0 {
		n := p.MaxInFlightTotal
		out.MaxInFlightTotal = &n
	}
	if len(p.Labels) > 0 {
		l := api.Labels(p.Labels)
		out.Labels = &l
	}
	if p.RatePerSecond > 0 {
		r, b := p.RatePerSecond, p.Burst
		if b == 0 {
			b = model.DefaultBurst(r)
		}
		out.RatePerSecond, out.Burst = &r, &b
	}
	return out, nil
}

// Bounds of a policy's rate: at least one event a day, at most a million a
// second, bursts of at most a million.
const (
	minRatePerSecond = 1.0 / 86400
	maxRatePerSecond = 1e6
	maxBurst         = 1_000_000
)

func checkRate(fe *fieldErrors, r float64) {
	switch {
	case math.IsNaN(r) || math.IsInf(r, 0):
		fe.add("ratePerSecond", "must be a finite number")
	case r <= 0:
		fe.add("ratePerSecond", "must be positive")
	case r < minRatePerSecond:
		fe.add("ratePerSecond", "less than one event a day ("+strconv.FormatFloat(minRatePerSecond, 'g', 6, 64)+")")
	case r > maxRatePerSecond:
		fe.add("ratePerSecond", "more than "+strconv.FormatFloat(maxRatePerSecond, 'f', -1, 64))
	}
}

// maxConcurrencyKey bounds the length of a policy's concurrency key.
const maxConcurrencyKey = 256

// boundField is the field a refused overall bound is reported on: the one
// of maxInFlightTotal, maxInFlight and concurrencyKey the request set, in
// that order; "" if it set none (nothing to check).
func boundField(total, perKey, key bool) string {
	switch {
	case total:
		return "maxInFlightTotal"
	case perKey:
		return "maxInFlight"
	case key:
		return "concurrencyKey"
	}
	return ""
}

// checkConcurrency checks the concurrency key and overall bound of p as a
// request leaves it; keyGiven says whether the request set the key, field
// is where a refused bound is reported (see boundField).
func checkConcurrency(fe *fieldErrors, p *model.Policy, keyGiven bool, field string) {
	if p.Adaptive != nil && p.ConcurrencyKey != "" {
		// The adaptive limit is one limit for the policy; keys bound each
		// value by maxInFlight.
		fe.add("adaptive", "does not combine with concurrencyKey")
	}
	if keyGiven {
		switch k := p.ConcurrencyKey; {
		case len(k) > maxConcurrencyKey:
			fe.add("concurrencyKey", "longer than "+itoa(maxConcurrencyKey)+" bytes")
		default:
			if err := model.CheckConcurrencyKey(k); err != nil {
				fe.add("concurrencyKey", err.Error())
			}
		}
	}
	if field == "" {
		return
	}
	switch t := p.MaxInFlightTotal; {
	case t < 0:
		fe.add(field, "must not be negative")
	case t == 0:
	case p.ConcurrencyKey == "":
		fe.add(field, "maxInFlightTotal only with concurrencyKey")
	case t < p.MaxInFlight:
		fe.add(field, "maxInFlightTotal must be at least maxInFlight ("+itoa(p.MaxInFlight)+")")
	case t > maxMaxInFlightTotal:
		fe.add(field, "maxInFlightTotal more than "+itoa(maxMaxInFlightTotal))
	}
}

// checkLimitsKey refuses a limit schedule on a policy with a concurrency
// key: the schedule lowers one limit for the policy, keys bound each value.
func checkLimitsKey(fe *fieldErrors, p *model.Policy) {
	if len(p.Limits) > 0 && p.ConcurrencyKey != "" {
		fe.add("limits", "does not combine with concurrencyKey")
	}
}

// maxMaxInFlightTotal is the largest overall bound of a keyed policy.
const maxMaxInFlightTotal = 1_000_000

// checkBurst checks a burst given in a request; rate is the policy's rate
// after the request.
func checkBurst(fe *fieldErrors, burst int, rate float64) {
	switch {
	case rate == 0:
		fe.add("burst", "only with ratePerSecond")
	case burst < 1:
		fe.add("burst", "must be at least 1")
	case burst > maxBurst:
		fe.add("burst", "more than "+itoa(maxBurst))
	}
}

func (s *Server) checkName(fe *fieldErrors, field, name string) {
	n := utf8.RuneCountInString(name)
	switch {
	case n == 0:
		fe.add(field, "must not be empty")
	case n > s.cfg.MaxNameLen:
		fe.add(field, "longer than "+itoa(s.cfg.MaxNameLen)+" characters")
	}
}

func (s *Server) parseTimeout(fe *fieldErrors, field, v string) time.Duration {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		fe.add(field, "not a duration such as \"15m\" or \"90s\"")
	case d <= 0:
		fe.add(field, "must be positive")
	case d > s.cfg.MaxTokenTimeout:
		fe.add(field, "longer than "+s.cfg.MaxTokenTimeout.String())
	}
	return d
}

// setLabels replaces *dst by in, when given, after model.CheckLabels: labels are
// set whole ({} removes them all).
func setLabels(fe *fieldErrors, dst *map[string]string, in *map[string]string) {
	if in == nil {
		return
	}
	*fe = append(*fe, model.CheckLabels("labels", *in)...)
	*dst = nil
	if len(*in) > 0 {
		*dst = maps.Clone(*in)
	}
}
