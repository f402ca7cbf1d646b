package master_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
)

// TestTargetAddressGuard checks that an http target whose host is an
// address literal the SSRF rule refuses is a 422 naming target.url on create
// and on update, with nothing written, under the same allow and deny lists
// the deliverer is given.
func TestTargetAddressGuard(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	denyLoopback := func(c *master.Config, _ *master.Deps) { c.TargetDenyCIDRs = loopback }
	loopbackForms := []string{
		"http://127.0.0.1/hook",
		"http://127.1/hook",
		"http://2130706433/hook",
		"http://0x7f000001/hook",
		"http://0177.0.0.1:8080/hook",
		"http://[::1]/hook",
		"http://[::ffff:127.0.0.1]/hook",
	}
	create := func(h *harness, c *client.ClientWithResponses, url string) *client.CreateScheduleResponse {
		t.Helper()
		r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{
			Name: "s", Cron: ptr("0 3 * * *"), Target: client.Target{Type: client.TargetTypeHttp, Url: ptr(url)},
		})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		return r
	}
	wantRefused := func(t *testing.T, r *client.CreateScheduleResponse, url string) {
		t.Helper()
		p := wantProblem(t, nil, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "target.url")
		if reason := reasonOf(p, "target.url"); !strings.Contains(reason, "refused address") {
			t.Fatalf("reason %q for %s does not say the address is refused", reason, url)
		}
	}
	wantNoSchedules := func(t *testing.T, h *harness, c *client.ClientWithResponses) {
		t.Helper()
		r, err := c.ListSchedulesWithResponse(h.ctx, nil)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if n := len(r.JSON200.Items); n != 0 {
			t.Fatalf("%d schedules stored after refusals", n)
		}
	}

	t.Run("RefusesMetadataAndThisHostByDefault", func(t *testing.T) {
		h := newHarness(t)
		_, c := h.tenant("acme")
		for _, url := range []string{
			"http://169.254.169.254/latest/meta-data/",
			"http://2852039166/latest/meta-data/",
			"http://0xa9fea9fe/",
			"http://169.254.43518/",
			"http://[::ffff:169.254.169.254]/",
			"http://[fd00:ec2::254]/",
			"http://100.100.100.200/",
			"http://0.0.0.0:8080/",
			"http://0/",
			"http://[::]/",
			"https://[fe80::1%25eth0]/",
			// IPv6 transition forms carrying loopback, private or metadata
			// IPv4 addresses.
			"http://[64:ff9b::7f00:1]/",
			"http://[64:ff9b::169.254.169.254]/",
			"http://[64:ff9b:1::a00:1]/",
			"http://[2002:c0a8:101::1]/",
			"http://[2001:0:7f00:1::]/",
			"http://[::7f00:1]/",
			"http://[::ffff:0:7f00:1]/",
		} {
			t.Run(url, func(t *testing.T) { wantRefused(t, create(h, c, url), url) })
		}
		wantNoSchedules(t, h, c)
	})

	t.Run("RefusesMetadataForBatchTargets", func(t *testing.T) {
		h := newHarness(t)
		_, c := h.tenant("acme")
		for _, url := range []string{"http://169.254.169.254/latest/meta-data/", "http://0xa9fea9fe/", "http://[fd00:ec2::254]/"} {
			r, err := c.CreateScheduleWithResponse(h.ctx, nil, client.ScheduleCreate{
				Name: "s", Cron: ptr("0 3 * * *"), Target: client.Target{Type: client.TargetTypeHttpBatch, Url: ptr(url)},
			})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			wantRefused(t, r, url)
		}
		wantNoSchedules(t, h, c)
	})

	t.Run("AcceptsLoopbackByDefault", func(t *testing.T) {
		h := newHarness(t)
		_, c := h.tenant("acme")
		for _, url := range loopbackForms {
			r := create(h, c, url)
			mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusCreated)
		}
	})

	t.Run("RefusesEveryLoopbackFormWhenDenied", func(t *testing.T) {
		h := newHarness(t, denyLoopback)
		_, c := h.tenant("acme")
		for _, url := range loopbackForms {
			t.Run(url, func(t *testing.T) { wantRefused(t, create(h, c, url), url) })
		}
		wantNoSchedules(t, h, c)
		r := create(h, c, "http://localhost:8080/hook") // a name: judged at dial time
		mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusCreated)
	})

	t.Run("AllowListOpensAHole", func(t *testing.T) {
		h := newHarness(t, func(c *master.Config, _ *master.Deps) {
			c.TargetDenyCIDRs = loopback
			c.TargetAllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		})
		_, c := h.tenant("acme")
		r := create(h, c, "http://127.1/hook")
		mustStatus(t, nil, r.StatusCode(), r.Body, http.StatusCreated)
		wantRefused(t, create(h, c, "http://127.2/hook"), "http://127.2/hook")
	})

	t.Run("RefusesOnUpdateLeavingTheScheduleAsItWas", func(t *testing.T) {
		h := newHarness(t, denyLoopback)
		tid, c := h.tenant("acme")
		s := h.cronSchedule(c, "nightly")
		r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{
			Target: &client.Target{Type: client.TargetTypeHttp, Url: ptr("http://0x7f000001/hook")},
		})
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusUnprocessableEntity, "target.url")
		if reason := reasonOf(p, "target.url"); !strings.Contains(reason, "127.0.0.1") {
			t.Fatalf("reason %q does not name the address the host denotes", reason)
		}
		stored := h.storedSchedule(tid, s.Id)
		if stored.Version != s.Version || stored.Target.URL != *s.Target.Url {
			t.Fatalf("stored version %d target %q, want version %d target %q", stored.Version, stored.Target.URL, s.Version, *s.Target.Url)
		}
		if n := h.em.savedCount(s.Id); n != 1 {
			t.Fatalf("emitter.Saved called %d times, want 1 (the create)", n)
		}
	})
}
