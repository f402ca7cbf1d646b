package master_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// patchTenant changes a tenant through the admin API and returns it.
func (h *harness) patchTenant(id string, body client.TenantUpdate) client.Tenant {
	h.t.Helper()
	r, err := h.admin.UpdateTenantWithResponse(h.ctx, id, body)
	mustStatus(h.t, err, r.StatusCode(), r.Body, http.StatusOK)
	return *r.JSON200
}

func wantReason(t *testing.T, p client.Problem, field, want string) {
	t.Helper()
	if got := reasonOf(p, field); !strings.Contains(got, want) {
		t.Fatalf("reason of %s = %q, want it to contain %q", field, got, want)
	}
}

func TestTenantQuotas(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) {
		c.TenantQuotas = model.TenantQuotas{MaxSchedules: 50} // the rest: guard.DefaultTenantQuotas
		c.QuotaCountTTL = -1                                  // events inserted by the test count at once
		c.TenantWeight = 2
	})

	t.Run("GetShowsEffectiveQuotas", func(t *testing.T) {
		id, _ := h.tenant("defaults")
		r, err := h.admin.GetTenantWithResponse(h.ctx, id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		got, def := r.JSON200, guard.DefaultTenantQuotas()
		if got.Weight != 2 || *got.Quotas.MaxSchedules != 50 || *got.Quotas.MaxEventsPerFire != def.MaxEventsPerFire ||
			*got.Quotas.MaxEventsPerMinute != def.MaxEventsPerMinute || *got.Quotas.MaxEventsStored != def.MaxEventsStored || got.Targets != nil {
			t.Fatalf("tenant %s", r.Body)
		}
	})

	t.Run("PatchKeepsWhatItDoesNotSet", func(t *testing.T) {
		id, _ := h.tenant("patched")
		h.patchTenant(id, client.TenantUpdate{Weight: ptr(7), Quotas: &client.TenantQuotas{MaxEventsPerMinute: ptr(600)}})
		got := h.patchTenant(id, client.TenantUpdate{Name: ptr("renamed"), Quotas: &client.TenantQuotas{MaxEventsStored: ptr(900)}})
		if got.Name != "renamed" || got.Weight != 7 || *got.Quotas.MaxEventsPerMinute != 600 || *got.Quotas.MaxEventsStored != 900 ||
			*got.Quotas.MaxSchedules != 50 {
			t.Fatalf("after two patches: %+v %+v", got, got.Quotas)
		}
		stored, err := h.st.TenantGet(h.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// Only what the admin set is stored: defaults stay configurable.
		if stored.Quotas != (model.TenantQuotas{MaxEventsPerMinute: 600, MaxEventsStored: 900}) || stored.Weight != 7 {
			t.Fatalf("stored %+v", stored)
		}
	})

	t.Run("PatchRefusesBadValues", func(t *testing.T) {
		id, _ := h.tenant("bad")
		r, err := h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxEventsPerFire: ptr(master.DefaultMaxEventCount + 1)}})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "quotas.maxEventsPerFire")
		r, err = h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Targets: &client.TenantTargets{Cidrs: &[]string{"203.0.113.0/24", "10.0.0.0/33"}}})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "targets.cidrs[1]")
		r, err = h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Targets: &client.TenantTargets{Hosts: &[]string{"a.*.com"}}})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "targets.hosts[0]")
		r, err = h.admin.UpdateTenantWithResponse(h.ctx, id, client.TenantUpdate{Weight: ptr(0)})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "")
		r, err = h.admin.UpdateTenantWithResponse(h.ctx, "tnt_nope", client.TenantUpdate{Weight: ptr(3)})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusNotFound, "")
	})

	t.Run("MaxSchedules", func(t *testing.T) {
		id, c := h.tenant("few")
		h.patchTenant(id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxSchedules: ptr(2)}})
		h.cronSchedule(c, "one")
		h.cronSchedule(c, "two")
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "three", Cron: ptr("0 3 * * *"), Target: httpTarget()})
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "maxSchedules")
		wantReason(t, p, "maxSchedules", "the tenant has 2 schedules, its maxSchedules quota (2)")
		// Another tenant is not limited by it.
		_, other := h.tenant("other")
		h.cronSchedule(other, "three")
	})

	t.Run("MaxEventsPerFire", func(t *testing.T) {
		id, c := h.tenant("small-fires")
		h.patchTenant(id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxEventsPerFire: ptr(10)}})
		const reason = "over the tenant's maxEventsPerFire quota (10)"
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "big", Cron: ptr("0 3 * * *"), EventCount: ptr(11), Target: httpTarget()})
		wantReason(t, wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "eventCount"), "eventCount", reason)

		s := h.schedule(c, client.ScheduleCreate{Name: "ten", Cron: ptr("0 3 * * *"), EventCount: ptr(10), Target: httpTarget()})
		u, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{EventCount: ptr(11)})
		wantReason(t, wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "eventCount"), "eventCount", reason)

		// Lowered after the schedule was saved: trigger and resume refuse it.
		p, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{})
		mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
		h.patchTenant(id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxEventsPerFire: ptr(5)}})
		tr, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
		wantReason(t, wantProblem(t, err, tr.HTTPResponse, tr.Body, http.StatusUnprocessableEntity, "eventCount"), "eventCount", "quota (5)")
		rr, err := c.ResumeScheduleWithResponse(h.ctx, s.Id)
		wantReason(t, wantProblem(t, err, rr.HTTPResponse, rr.Body, http.StatusUnprocessableEntity, "eventCount"), "eventCount", "quota (5)")
		if st := h.storedSchedule(id, s.Id).State; st != model.SchedulePaused {
			t.Fatalf("state %s after a refused resume, want paused", st)
		}
	})

	t.Run("MaxEventsStored", func(t *testing.T) {
		id, c := h.tenant("full")
		s := h.schedule(c, client.ScheduleCreate{Name: "s", Cron: ptr("0 3 * * *"), EventCount: ptr(1), Target: httpTarget()})
		h.patchTenant(id, client.TenantUpdate{Quotas: &client.TenantQuotas{MaxEventsStored: ptr(5)}})
		for range 3 {
			h.insertEvent(id, s.Id, "", model.EventPending)
		}
		h.insertEvent(id, s.Id, "", model.EventReleased) // retained events count
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "two", Cron: ptr("0 3 * * *"), EventCount: ptr(2), Target: httpTarget()})
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusTooManyRequests, "maxEventsStored")
		wantReason(t, p, "maxEventsStored", "the tenant stores 4 events; 2 more would pass its maxEventsStored quota (5)")

		h.insertEvent(id, s.Id, "", model.EventPending)
		h.insertEvent(id, s.Id, "", model.EventPending)
		tr, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
		p = wantProblem(t, err, tr.HTTPResponse, tr.Body, http.StatusTooManyRequests, "maxEventsStored")
		wantReason(t, p, "maxEventsStored", "stores more than 5 events")

		// Events of other tenants do not count.
		_, other := h.tenant("empty")
		h.schedule(other, client.ScheduleCreate{Name: "two", Cron: ptr("0 3 * * *"), EventCount: ptr(2), Target: httpTarget()})
	})
}

func TestTenantTargets(t *testing.T) {
	h := newHarness(t)
	names, c := h.tenant("names-only")
	h.patchTenant(names, client.TenantUpdate{Targets: &client.TenantTargets{
		Hosts:            &[]string{"*.example.com", "hooks.partner.io"},
		QueueUrlPrefixes: &[]string{"https://sqs.eu-west-1.amazonaws.com/123456789012/"},
	}})
	ranges, rc := h.tenant("ranges")
	got := h.patchTenant(ranges, client.TenantUpdate{Targets: &client.TenantTargets{Cidrs: &[]string{"203.0.113.0/24"}}})
	if got.Targets == nil || len(*got.Targets.Cidrs) != 1 || len(*got.Targets.Hosts) != 0 {
		t.Fatalf("targets shown %+v", got.Targets)
	}
	web := func(u string) client.Target { return client.Target{Type: client.TargetTypeHttp, Url: &u} }
	queue := func(u string) client.Target { return client.Target{Type: client.TargetTypeSqs, QueueUrl: &u} }
	batch := func(u string) client.Target { return client.Target{Type: client.TargetTypeHttpBatch, Url: &u} }
	cases := []struct {
		name   string
		c      *client.ClientWithResponses
		target client.Target
		field  string // "": accepted
	}{
		{"SubdomainPattern", c, web("https://a.b.example.com/hook"), ""},
		{"ExactHost", c, web("https://HOOKS.partner.io/x"), ""},
		{"PatternIsNotTheApex", c, web("https://example.com/hook"), "target.url"},
		{"OtherHost", c, web("https://example.org/hook"), "target.url"},
		{"LookalikeSuffix", c, web("https://evilexample.com/hook"), "target.url"},
		{"AddressWithoutRanges", c, web("http://203.0.113.7/hook"), "target.url"},
		{"BatchSubdomainPattern", c, batch("https://a.b.example.com/batch"), ""},
		{"BatchOtherHost", c, batch("https://example.org/batch"), "target.url"},
		{"BatchAddressInRange", rc, batch("http://203.0.113.7/batch"), ""},
		{"BatchAddressOutOfRange", rc, batch("http://198.51.100.7/batch"), "target.url"},
		{"QueueUnderPrefix", c, queue("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"), ""},
		{"QueueOfAnotherAccount", c, queue("https://sqs.eu-west-1.amazonaws.com/210987654321/jobs"), "target.queueUrl"},
		{"AddressInRange", rc, web("http://203.0.113.7/hook"), ""},
		{"AddressOutOfRange", rc, web("http://198.51.100.7/hook"), "target.url"},
		{"InetAtonFormOutOfRange", rc, web("http://3325256711/hook"), "target.url"}, // 198.51.100.7
		// Judged by delivery on its resolved addresses.
		{"NameWithRanges", rc, web("https://consumer.example.net/hook"), ""},
		{"QueueWithoutPrefixes", rc, queue("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"), "target.queueUrl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: tc.name, Cron: ptr("0 3 * * *"), Target: tc.target})
			if tc.field == "" {
				mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
				return
			}
			p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, tc.field)
			wantReason(t, p, tc.field, "not among the tenant's allowed targets")
		})
	}

	t.Run("UpdateToAnotherTargetRefused", func(t *testing.T) {
		s := h.schedule(c, client.ScheduleCreate{Name: "u", Cron: ptr("0 3 * * *"), Target: web("https://ok.example.com/h")})
		u, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Target: ptr(web("https://elsewhere.net/h"))})
		wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "target.url")
	})
	t.Run("EmptyListsLiftTheRestriction", func(t *testing.T) {
		id, c := h.tenant("lifted")
		h.patchTenant(id, client.TenantUpdate{Targets: &client.TenantTargets{Hosts: &[]string{"only.example.com"}}})
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "x", Cron: ptr("0 3 * * *"), Target: web("https://other.net/h")})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "target.url")
		if got := h.patchTenant(id, client.TenantUpdate{Targets: &client.TenantTargets{}}); got.Targets != nil {
			t.Fatalf("targets after {}: %+v", got.Targets)
		}
		h.schedule(c, client.ScheduleCreate{Name: "x", Cron: ptr("0 3 * * *"), Target: web("https://other.net/h")})
	})
	t.Run("SSRFRuleStillApplies", func(t *testing.T) {
		id, c := h.tenant("metadata")
		h.patchTenant(id, client.TenantUpdate{Targets: &client.TenantTargets{Cidrs: &[]string{"169.254.0.0/16"}}})
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "x", Cron: ptr("0 3 * * *"), Target: web("http://169.254.169.254/")})
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "target.url")
	})
}

func TestOneOffInThePast(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.CatchUpLimit = time.Hour })
	_, c := h.tenant("late")
	old := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)

	r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "late", RunAt: &old, Target: httpTarget()})
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "runAt")
	wantReason(t, p, "runAt", "older than the catch-up limit (1h0m0s)")
	r, err = c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "late", RunAt: &old, Misfire: ptr(client.MisfireSkip), Target: httpTarget()})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "runAt")

	s := h.schedule(c, client.ScheduleCreate{Name: "anyway", RunAt: &old, EventCount: ptr(2), Misfire: ptr(client.MisfireFireAll), Target: httpTarget()})
	if h.em.savedCount(s.Id) != 1 {
		t.Fatalf("the accepted one-off was handed to the emitter %d times, want 1", h.em.savedCount(s.Id))
	}
	recent := time.Now().Add(-30 * time.Minute).UTC().Truncate(time.Second)
	h.schedule(c, client.ScheduleCreate{Name: "recent", RunAt: &recent, Target: httpTarget()})

	// Renaming it later is not setting runAt: accepted.
	u, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Name: ptr("renamed"), Misfire: ptr(client.MisfireFireOnce)})
	mustStatus(t, err, u.StatusCode(), u.Body, http.StatusOK)
	// Moving it to another old instant is.
	older := old.Add(-time.Hour)
	u, err = c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{RunAt: &older})
	wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusUnprocessableEntity, "runAt")
}

// fakeDisk is a guard.Space whose free space the test sets.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) Usage() (free, total uint64, err error) { return d.free.Load(), 1_000_000, nil }

// diskGuard is the disk guard over disk with a threshold of minFreeBytes.
func diskGuard(t *testing.T, disk guard.Space, minFreeBytes int64) *guard.Disk {
	t.Helper()
	g, err := guard.NewDisk(disk, minFreeBytes, 0)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDiskGuard(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(500_000)
	// Threshold: the smaller of 1000 bytes and 5% of 1,000,000.
	dg := diskGuard(t, disk, 1000)
	h := newHarness(t, func(_ *master.Config, d *master.Deps) { d.Disk = dg })
	tid, c := h.tenant("disk")
	s := h.cronSchedule(c, "before")
	if ok, reason := dg.DiskStatus(); !ok || !strings.HasPrefix(reason, "ok") {
		t.Fatalf("DiskStatus with room = %v %q", ok, reason)
	}

	disk.free.Store(999)
	ok, reason := dg.DiskStatus()
	if ok || !strings.Contains(reason, "below the threshold of 1000 B") {
		t.Fatalf("DiskStatus when low = %v %q, want refused, naming the threshold", ok, reason)
	}
	r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "after", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusInsufficientStorage, "")
	if p.Detail == nil || !strings.Contains(*p.Detail, "below the threshold") {
		t.Fatalf("507 without the reason: %s", r.Body)
	}
	tr, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
	wantProblem(t, err, tr.HTTPResponse, tr.Body, http.StatusInsufficientStorage, "")
	u, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{EventCount: ptr(5)})
	wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusInsufficientStorage, "")

	// Releases, reads, pauses and deletes go on.
	e := h.insertEvent(tid, s.Id, "", model.EventDelivered)
	rel, err := h.client("").ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
	mustStatus(t, err, rel.StatusCode(), rel.Body, http.StatusOK)
	g, err := c.GetScheduleWithResponse(h.ctx, s.Id)
	mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
	pa, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{})
	mustStatus(t, err, pa.StatusCode(), pa.Body, http.StatusOK)
	rs, err := c.ResumeScheduleWithResponse(h.ctx, s.Id)
	wantProblem(t, err, rs.HTTPResponse, rs.Body, http.StatusInsufficientStorage, "")

	// Above the threshold but short of what the write needs
	// (guard.WriteNeed): a single create and a trigger are refused too, a
	// smaller fire passes.
	disk.free.Store(1000 + 4<<10)
	r, err = c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "after", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	p = wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusInsufficientStorage, "")
	if p.Detail == nil || !strings.Contains(*p.Detail, "with this write of about") {
		t.Fatalf("507 without the write's size: %s", r.Body)
	}
	big, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{EventCount: ptr(50)})
	wantProblem(t, err, big.HTTPResponse, big.Body, http.StatusInsufficientStorage, "")

	// Room for the threshold and the write.
	disk.free.Store(1000 + 16<<10)
	h.cronSchedule(c, "after")
}

// TestTenantQuotaDefaults: the quotas the master applies to a tenant
// without its own are guard.TenantQuotaDefaults, as the emitter's.
func TestTenantQuotaDefaults(t *testing.T) {
	t.Run("SameAsTheMasterApplies", func(t *testing.T) {
		configured := model.TenantQuotas{MaxSchedules: 3}
		h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.TenantQuotas = configured })
		id, _ := h.tenant("q")
		r, err := h.admin.GetTenantWithResponse(h.ctx, id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		want := guard.TenantQuotaDefaults(configured, master.DefaultMaxEventCount)
		q := r.JSON200.Quotas
		if *q.MaxSchedules != want.MaxSchedules || *q.MaxEventsPerMinute != want.MaxEventsPerMinute || *q.MaxEventsStored != want.MaxEventsStored {
			t.Fatalf("the API shows %+v, want %+v", q, want)
		}
	})
}

// Within QuotaCountTTL the quotas use the tenant's counted figures plus what
// this server let through since, not a new count of the store.
func TestQuotaCountsAreCached(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) {
		c.TenantQuotas = model.TenantQuotas{MaxSchedules: 3}
		c.QuotaCountTTL = time.Hour
	})
	id, c := h.tenant("acme")
	h.schedule(c, client.ScheduleCreate{Name: "a", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	h.schedule(c, client.ScheduleCreate{Name: "b", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	// A schedule written behind the server's back is not seen before the
	// next count: the third create still passes.
	now := time.Now().UTC()
	hidden := &model.Schedule{
		ID: "sch_hidden", TenantID: id, Name: "hidden", Cron: "0 3 * * *", Timezone: "UTC", EventCount: 1,
		Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/x"}, MaxAttempts: 5,
		Misfire: model.MisfireFireOnce, Overlap: model.OverlapAllow, State: model.ScheduleActive,
		Partition: model.PartitionOf("sch_hidden", 4), Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	if err := storetest.CreateSchedule(h.ctx, h.st, hidden, nil); err != nil {
		t.Fatal(err)
	}
	h.schedule(c, client.ScheduleCreate{Name: "c", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	// The server's own three creates are counted without a new count.
	r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{Name: "d", Cron: ptr("0 3 * * *"), Target: httpTarget()})
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "maxSchedules")
}
