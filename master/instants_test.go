package master_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
)

// TestInstantsKeepMilliseconds: runAt, startAt and endAt keep their
// sub-second part from the request to the store and back, and a one-off's
// preview is its fire instant (runAt rounded up to the millisecond).
func TestInstantsKeepMilliseconds(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("acme")
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 2)

	runAt := day.Add(12*time.Hour + 479*time.Millisecond + 500*time.Microsecond)
	one := h.schedule(c, client.ScheduleCreate{Name: "once", RunAt: &runAt, Timezone: ptr("Europe/Berlin"), Target: httpTarget()})
	if one.RunAt == nil || !one.RunAt.Equal(runAt) {
		t.Fatalf("created runAt %v, want %s", one.RunAt, runAt)
	}
	if st := h.storedSchedule(tid, one.Id); st.RunAt == nil || !st.RunAt.Equal(runAt) {
		t.Fatalf("stored runAt %v, want %s", st.RunAt, runAt)
	}
	g, err := c.GetScheduleWithResponse(h.ctx, one.Id)
	mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
	if g.JSON200.RunAt == nil || !g.JSON200.RunAt.Equal(runAt) {
		t.Fatalf("read runAt %v, want %s", g.JSON200.RunAt, runAt)
	}
	p, err := c.PreviewScheduleWithResponse(h.ctx, one.Id, nil)
	mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
	fire := day.Add(12*time.Hour + 480*time.Millisecond)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	wantLocal := fire.In(berlin).Format("2006-01-02T15:04:05") + ".48" + fire.In(berlin).Format("Z07:00")
	if ft := p.JSON200.FireTimes; len(ft) != 1 || !ft[0].Utc.Equal(fire) || ft[0].Local != wantLocal {
		t.Fatalf("preview %+v, want %s / %s", ft, fire, wantLocal)
	}

	startAt, endAt := day.Add(time.Millisecond), day.Add(72*time.Hour+999*time.Millisecond)
	cr := h.schedule(c, client.ScheduleCreate{Name: "window", Cron: ptr("0 3 * * *"), StartAt: &startAt, EndAt: &endAt, Target: httpTarget()})
	st := h.storedSchedule(tid, cr.Id)
	if st.StartAt == nil || !st.StartAt.Equal(startAt) || st.EndAt == nil || !st.EndAt.Equal(endAt) {
		t.Fatalf("stored startAt %v endAt %v, want %s %s", st.StartAt, st.EndAt, startAt, endAt)
	}
	if cr.StartAt == nil || !cr.StartAt.Equal(startAt) || cr.EndAt == nil || !cr.EndAt.Equal(endAt) {
		t.Fatalf("created startAt %v endAt %v, want %s %s", cr.StartAt, cr.EndAt, startAt, endAt)
	}
}
