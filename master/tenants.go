package master

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// CreateTenant implements POST /v1/tenants (admin).
func (s *Server) CreateTenant(c echo.Context, _ api.CreateTenantParams) error {
	var in api.TenantCreate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	var fe fieldErrors
	s.checkName(&fe, "name", in.Name)
	if err := fe.err(); err != nil {
		return err
	}
	ctx := c.Request().Context()
	return s.idempotent(c, model.PrefixTenant, func(id string) (int, any, error) {
		t := &model.Tenant{ID: id, Name: in.Name, CreatedAt: s.now().UTC()}
		if err := s.store.TenantCreate(ctx, t); err != nil {
			return 0, nil, err
		}
		noteChange(ctx, auditChange{tenantID: t.ID, objectID: t.ID, after: t})
		return http.StatusCreated, s.tenantOut(t), nil
	}, func(id string) (int, any, error) {
		t, err := s.store.TenantGet(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, s.tenantOut(t), nil
	})
}

// GetTenant implements GET /v1/tenants/{id} (admin).
func (s *Server) GetTenant(c echo.Context, id api.ID) error {
	t, err := s.store.TenantGet(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.tenantOut(t))
}

// UpdateTenant implements PATCH /v1/tenants/{id} (admin): name, weight,
// quotas (absent ones keep their value) and targets (replaced as a whole;
// empty lists lift the restriction).
func (s *Server) UpdateTenant(c echo.Context, id api.ID) error {
	var in api.TenantUpdate
	if err := decodeBody(c, &in); err != nil {
		return err
	}
	ctx := c.Request().Context()
	old, err := s.store.TenantGet(ctx, id)
	if err != nil {
		return err
	}
	t := *old
	var fe fieldErrors
	if in.Name != nil {
		s.checkName(&fe, "name", *in.Name)
		t.Name = *in.Name
	}
	if in.Weight != nil {
		t.Weight = *in.Weight
	}
	if q := in.Quotas; q != nil {
		set := func(dst *int, v *int) {
			if v != nil {
				*dst = *v
			}
		}
		set(&t.Quotas.MaxSchedules, q.MaxSchedules)
		set(&t.Quotas.MaxEventsPerFire, q.MaxEventsPerFire)
		set(&t.Quotas.MaxEventsPerMinute, q.MaxEventsPerMinute)
		set(&t.Quotas.MaxEventsStored, q.MaxEventsStored)
		set(&t.Quotas.MaxCalendars, q.MaxCalendars)
		if t.Quotas.MaxEventsPerFire > s.cfg.MaxEventCount {
			fe.add("quotas.maxEventsPerFire", "at most the configured eventCount limit ("+itoa(s.cfg.MaxEventCount)+")")
		}
	}
	if in.Targets != nil {
		t.Targets = targetsIn(&fe, in.Targets)
	}
	if in.Notify != nil {
		ns, err := schedule.CheckNotify(notifyIn(in.Notify), s.limits())
		var se schedule.Errors
		switch {
		case errors.As(err, &se):
			fe = append(fe, fieldErrors(se)...)
		case err != nil:
			return err
		}
		t.Notify = ns
	}
	if err := fe.err(); err != nil {
		return err
	}
	t.Version = old.Version + 1
	if err := s.store.TenantUpdate(ctx, &t, old.Version); err != nil {
		return err
	}
	noteChange(ctx, auditChange{tenantID: t.ID, objectID: t.ID, version: t.Version, before: old, after: &t})
	return c.JSON(http.StatusOK, s.tenantOut(&t))
}

// targetsIn validates the lists of a PATCH; all empty lifts the restriction.
func targetsIn(fe *fieldErrors, in *api.TenantTargets) *model.TenantTargets {
	out := &model.TenantTargets{Hosts: deref(in.Hosts, nil), CIDRs: deref(in.Cidrs, nil), QueueURLPrefixes: deref(in.QueueUrlPrefixes, nil)}
	if len(out.Hosts)+len(out.CIDRs)+len(out.QueueURLPrefixes) == 0 {
		return nil
	}
	if _, err := netguard.NewTargetRule(out.Hosts, out.CIDRs, out.QueueURLPrefixes); err != nil {
		// The rule's error starts with the list and index: "cidrs[2]: ...".
		field, reason, _ := strings.Cut(err.Error(), ": ")
		fe.add("targets."+field, reason)
	}
	return out
}

// CreateAPIKey implements POST /v1/tenants/{id}/keys (admin). Only the hash
// of the key is stored; the clear key is in this answer only (and, sealed,
// in the idempotency record of a request that carried an Idempotency-Key, so
// that a retry gets the same key).
func (s *Server) CreateAPIKey(c echo.Context, tenantID api.ID, _ api.CreateAPIKeyParams) error {
	ctx := c.Request().Context()
	if _, err := s.store.TenantGet(ctx, tenantID); err != nil {
		return err
	}
	return s.idempotent(c, model.PrefixKey, func(id string) (int, any, error) {
		clear := newAPIKey()
		k := &model.APIKey{
			ID:        id,
			TenantID:  tenantID,
			Hash:      model.HashAPIKey(clear),
			Prefix:    clear[:len(prefixAPIKey)+6],
			CreatedAt: s.now().UTC(),
		}
		if err := s.store.APIKeyCreate(ctx, k); err != nil {
			return 0, nil, err
		}
		o := keyOut(k)
		// The prefix only: never the key nor its hash.
		noteChange(ctx, auditChange{tenantID: tenantID, objectID: k.ID, after: o})
		return http.StatusCreated, api.APIKeyCreated{
			Id: o.Id, TenantId: o.TenantId, Prefix: o.Prefix, CreatedAt: o.CreatedAt, Key: clear,
		}, nil
	}, nil)
}

// ListAPIKeys implements GET /v1/tenants/{id}/keys (admin).
func (s *Server) ListAPIKeys(c echo.Context, tenantID api.ID) error {
	ctx := c.Request().Context()
	if _, err := s.store.TenantGet(ctx, tenantID); err != nil {
		return err
	}
	keys, err := s.store.APIKeyList(ctx, tenantID)
	if err != nil {
		return err
	}
	out := api.APIKeyList{Items: make([]api.APIKey, len(keys))}
	for i, k := range keys {
		out.Items[i] = keyOut(k)
	}
	return c.JSON(http.StatusOK, out)
}

// RevokeAPIKey implements DELETE /v1/tenants/{id}/keys/{keyId} (admin).
func (s *Server) RevokeAPIKey(c echo.Context, tenantID api.ID, keyID string) error {
	if err := s.revokeKey(c.Request().Context(), tenantID, keyID); err != nil {
		return err
	}
	noteChange(c.Request().Context(), auditChange{tenantID: tenantID, objectID: keyID})
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) revokeKey(ctx context.Context, tenantID, keyID string) error {
	return s.store.APIKeyRevoke(ctx, tenantID, keyID, s.now().UTC())
}

// tenantOut shows the effective weight and quotas: the tenant's own, or
// the configured defaults.
func (s *Server) tenantOut(t *model.Tenant) api.Tenant {
	q := t.Quotas.Or(s.cfg.TenantQuotas)
	out := api.Tenant{
		Id: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, Weight: t.Weight,
		Quotas: api.TenantQuotas{
			MaxSchedules: &q.MaxSchedules, MaxEventsPerFire: &q.MaxEventsPerFire,
			MaxEventsPerMinute: &q.MaxEventsPerMinute, MaxEventsStored: &q.MaxEventsStored,
			MaxCalendars: &q.MaxCalendars,
		},
	}
	if out.Weight == 0 {
		out.Weight = s.cfg.TenantWeight
	}
	if g := t.Targets; g != nil {
		out.Targets = &api.TenantTargets{Hosts: nonNil(g.Hosts), Cidrs: nonNil(g.CIDRs), QueueUrlPrefixes: nonNil(g.QueueURLPrefixes)}
	}
	out.Notify = notifyOut(t.Notify)
	return out
}

// nonNil shows an empty list as [] rather than leaving it out.
func nonNil(v []string) *[]string {
	if v == nil {
		v = []string{}
	}
	return &v
}

func keyOut(k *model.APIKey) api.APIKey {
	return api.APIKey{Id: k.ID, TenantId: k.TenantID, PolicyId: strPtr(k.PolicyID), Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// ListTenants implements GET /v1/tenants (admin), ordered by id.
func (s *Server) ListTenants(c echo.Context, params api.ListTenantsParams) error {
	after, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	limit := s.pageSize(params.Limit)
	ts, err := s.store.TenantList(c.Request().Context(), &store.TenantListParams{After: after, Limit: min(limit+1, 1000)})
	if err != nil {
		return err
	}
	out := api.TenantList{Items: make([]api.Tenant, 0, min(len(ts), limit))}
	for i, t := range ts {
		if i == limit {
			break
		}
		out.Items = append(out.Items, s.tenantOut(t))
	}
	if len(ts) > limit || (len(ts) == limit && limit == 1000) {
		out.NextCursor = encodeCursor(ts[limit-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}
