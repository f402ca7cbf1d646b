package master_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
)

// TestDiskGuardCountsTheBatchWrite: with free space above the threshold
// but not enough for a large batch's write, the batch answers 507 (not the
// store's 503 once the disk fills up), and a small one still goes through.
func TestDiskGuardCountsTheBatchWrite(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(500_000)
	g := diskGuard(t, disk, 1000) // below 5% of the fake 1,000,000
	h := newHarness(t, func(_ *master.Config, d *master.Deps) { d.Disk = g })
	_, c := h.tenant("disk-need")
	batch := func(n int) client.ScheduleBatchCreate {
		var b client.ScheduleBatchCreate
		for i := range n {
			b.Items = append(b.Items, client.ScheduleBatchItem{Name: fmt.Sprintf("s%d-%d", n, i), Cron: ptr("0 3 * * *"), Target: httpTarget()})
		}
		return b
	}
	r, err := c.CreateSchedulesBatchWithResponse(h.ctx, batch(100))
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusInsufficientStorage, "")
	if p.Detail == nil || !strings.Contains(*p.Detail, "with this write of about") {
		t.Fatalf("507 without the write's size: %s", r.Body)
	}
	l, err := c.ListSchedulesWithResponse(h.ctx, nil)
	mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
	if n := len(l.JSON200.Items); n != 0 {
		t.Fatalf("%d schedules stored by the refused batch", n)
	}
	r, err = c.CreateSchedulesBatchWithResponse(h.ctx, batch(10))
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
}
