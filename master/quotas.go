package master

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// DiskGuard says whether the disk the store writes to has room for a write
// of about need bytes (guard.WriteNeed), and if not why (*guard.Disk).
type DiskGuard interface {
	DiskStatusFor(need uint64) (ok bool, reason string)
}

// tenantRules are a tenant's effective quotas and its target rule (nil:
// any target).
type tenantRules struct {
	quotas  model.TenantQuotas
	targets *netguard.TargetRule
}

// rulesOf loads the tenant's quotas, with the configured defaults for the
// ones it does not set, and its target rule.
func (s *Server) rulesOf(ctx context.Context, tenantID string) (*tenantRules, error) {
	t, err := s.store.TenantGet(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	r := &tenantRules{quotas: t.Quotas.Or(s.cfg.TenantQuotas)}
	if t.Targets != nil {
		// Validated when the admin set them; failing here means the stored
		// tenant was changed by hand.
		if r.targets, err = netguard.NewTargetRule(t.Targets.Hosts, t.Targets.CIDRs, t.Targets.QueueURLPrefixes); err != nil {
			return nil, fmt.Errorf("tenant %s: stored targets: %w", tenantID, err)
		}
	}
	return r, nil
}

// limitsFor are the limits of a schedule of a tenant with rules r: the
// configured ones, the tenant's maxEventsPerFire and its target rule on top
// of the SSRF rule.
func (s *Server) limitsFor(r *tenantRules) schedule.Limits {
	lim := s.limits()
	lim.MaxEventsPerFire = r.quotas.MaxEventsPerFire
	lim.CatchUpLimit = s.cfg.CatchUpLimit
	if r.targets != nil {
		rule := r.targets
		lim.CheckTargetHost = func(host string) error {
			if err := s.guard.CheckHost(host); err != nil {
				return err
			}
			return rule.CheckHost(host)
		}
		lim.CheckQueueURL = rule.CheckQueueURL
	}
	return lim
}

// quotaProblem is a refusal of tenant tenantID naming the quota field, its
// figure (reason) and how to raise it.
func quotaProblem(status int, tenantID, field, reason string) *problem {
	reason += "; " + raiseQuota(tenantID, field)
	return &problem{status: status, kind: "quota", title: "Tenant quota exceeded", detail: field + ": " + reason,
		fields: []api.FieldProblem{{Field: field, Reason: reason}}}
}

// raiseQuota tells how the quota name of tenant tenantID is raised: for the
// tenant through the admin API, for every tenant that sets none through the
// server setting of its default (the flags of app.Options).
func raiseQuota(tenantID, name string) string {
	var flag string
	switch name {
	case "maxSchedules":
		flag = "-tenant-max-schedules (SCHEDULER_TENANT_MAX_SCHEDULES)"
	case "maxEventsPerFire":
		flag = "-tenant-max-events-per-fire (SCHEDULER_TENANT_MAX_EVENTS_PER_FIRE)"
	case "maxEventsStored":
		flag = "-tenant-max-events-stored (SCHEDULER_TENANT_MAX_EVENTS_STORED)"
	case "maxCalendars":
		return "an admin raises it with PATCH /v1/tenants/" + tenantID + ` {"quotas":{"maxCalendars":<n>}}`
	}
	return "an admin raises it with PATCH /v1/tenants/" + tenantID + ` {"quotas":{"` + name + `":<n>}}` +
		", or for every tenant without its own with the server flag " + flag
}

// overPerFireQuota is the reason given for an eventCount over the
// maxEventsPerFire quota q of tenant tenantID.
func overPerFireQuota(tenantID string, q int) string {
	return schedule.OverPerFireQuota(q) + "; " + raiseQuota(tenantID, "maxEventsPerFire")
}

// checkSchedulesQuota refuses a new schedule, with its events first
// events, when the tenant has maxSchedules already or the events would pass
// maxEventsStored; a schedule let through is added to the tenant's usage.
// Concurrent creates on several instances can each pass the check, so the
// quota may be passed by their number.
func (s *Server) checkSchedulesQuota(ctx context.Context, tenantID string, r *tenantRules, events int) error {
	return s.reserve(ctx, tenantID, r, 1, events, func(u usage) error {
		if err := schedulesQuota(tenantID, u.schedules, r.quotas.MaxSchedules); err != nil {
			return err
		}
		return storedQuota(tenantID, u.events, events, r.quotas.MaxEventsStored)
	})
}

// schedulesQuota refuses one more schedule to tenant tenantID with n of
// quota q.
func schedulesQuota(tenantID string, n, q int) error {
	if n >= q {
		return quotaProblem(http.StatusUnprocessableEntity, tenantID, "maxSchedules",
			"the tenant has "+strconv.Itoa(n)+" schedules, its maxSchedules quota ("+strconv.Itoa(q)+")")
	}
	return nil
}

// checkPerFire refuses to fire (trigger, resume) a schedule whose eventCount
// is over the tenant's maxEventsPerFire, which may have been lowered since
// the schedule was saved.
func checkPerFire(m *model.Schedule, r *tenantRules) error {
	if q := r.quotas.MaxEventsPerFire; m.EventCount > q {
		return invalid("eventCount", overPerFireQuota(m.TenantID, q))
	}
	return nil
}

// checkStoredQuota refuses adding events events to a tenant whose stored
// events would pass maxEventsStored; what it lets through is added to the
// tenant's usage.
func (s *Server) checkStoredQuota(ctx context.Context, tenantID string, r *tenantRules, events int) error {
	return s.reserve(ctx, tenantID, r, 0, events, func(u usage) error {
		return storedQuota(tenantID, u.events, events, r.quotas.MaxEventsStored)
	})
}

// storedQuota refuses events more events to tenant tenantID storing n
// (counted up to q+1) of quota q.
func storedQuota(tenantID string, n, events, q int) error {
	if n+events <= q {
		return nil
	}
	figure := strconv.Itoa(n)
	if n > q {
		figure = "more than " + strconv.Itoa(q)
	}
	return quotaProblem(http.StatusTooManyRequests, tenantID, "maxEventsStored",
		"the tenant stores "+figure+" events; "+strconv.Itoa(events)+" more would pass its maxEventsStored quota ("+strconv.Itoa(q)+")")
}

// checkDisk refuses a write that adds schedules or events while the disk
// guard says the disk is nearly full.
func (s *Server) checkDisk() error { return s.checkDiskFor(0) }

// checkDiskFor is checkDisk for a write of about need bytes.
func (s *Server) checkDiskFor(need uint64) error {
	if s.disk == nil {
		return nil
	}
	if ok, reason := s.disk.DiskStatusFor(need); !ok {
		return &problem{status: http.StatusInsufficientStorage, kind: "insufficient-storage", title: "Insufficient Storage", detail: reason}
	}
	return nil
}
