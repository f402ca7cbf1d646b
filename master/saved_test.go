package master_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
)

// TestSavedGetsTheCompiledKeys checks that every path that has the emitter
// emit a saved schedule hands it the children keys of the schedule's
// current expression, so that the emitter never parses it again.
func TestSavedGetsTheCompiledKeys(t *testing.T) {
	// The retried create below waits this long for the failed first
	// attempt's record before it finishes that attempt's work.
	h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.IdempotencyWait = 50 * time.Millisecond })
	_, c := h.tenant("acme")
	mondayFriday := []string{"W:1:03@00", "W:5:03@00"}

	s := h.schedule(c, client.ScheduleCreate{Name: "twice", Cron: ptr("0 3 * * 1,5"), Target: httpTarget()})
	t.Run("Create", func(t *testing.T) {
		if got := h.em.keysGiven(s.Id); !reflect.DeepEqual(got, [][]string{mondayFriday}) {
			t.Fatalf("keys given %q, want %q", got, mondayFriday)
		}
	})

	t.Run("Update", func(t *testing.T) {
		r, err := c.UpdateScheduleWithResponse(h.ctx, s.Id, client.ScheduleUpdate{Cron: ptr("30 4 * * 2")})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		got := h.em.keysGiven(s.Id)
		if want := []string{"W:2:04@30"}; len(got) != 2 || !reflect.DeepEqual(got[1], want) {
			t.Fatalf("keys given %q, want %q last", got, want)
		}
	})

	t.Run("PauseThenResume", func(t *testing.T) {
		p, err := c.PauseScheduleWithResponse(h.ctx, s.Id, client.PauseRequest{})
		mustStatus(t, err, p.StatusCode(), p.Body, http.StatusOK)
		r, err := c.ResumeScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		got := h.em.keysGiven(s.Id)
		if want := []string{"W:2:04@30"}; len(got) != 3 || !reflect.DeepEqual(got[2], want) {
			t.Fatalf("keys given %q, want %q last", got, want)
		}
		if r.JSON200.Children != 1 || len(r.JSON200.NextFireTimes) != 5 {
			t.Fatalf("resumed %s", r.Body)
		}
	})

	t.Run("ResumeOfAnActiveSchedule", func(t *testing.T) {
		r, err := c.ResumeScheduleWithResponse(h.ctx, s.Id)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		got := h.em.keysGiven(s.Id)
		if want := []string{"W:2:04@30"}; len(got) != 4 || !reflect.DeepEqual(got[3], want) {
			t.Fatalf("keys given %q, want %q last", got, want)
		}
	})

	t.Run("RetriedCreateAfterFailedEmission", func(t *testing.T) {
		body := client.ScheduleCreate{Name: "retried", Cron: ptr("0 3 * * 1,5"), Target: httpTarget()}
		params := &client.CreateScheduleParams{IdempotencyKey: ptr("keys-retry")}
		h.em.mu.Lock()
		h.em.failSaved = 1
		h.em.mu.Unlock()
		r, err := c.CreateScheduleWithResponse(h.ctx, params, body)
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusServiceUnavailable, "")
		again, err := c.CreateScheduleWithResponse(h.ctx, params, body)
		mustStatus(t, err, again.StatusCode(), again.Body, http.StatusCreated)
		if got := h.em.keysGiven(again.JSON201.Id); !reflect.DeepEqual(got, [][]string{mondayFriday, mondayFriday}) {
			t.Fatalf("keys given %q, want %q twice", got, mondayFriday)
		}
		if again.JSON201.Children != 2 {
			t.Fatalf("retried create answered %s", again.Body)
		}
	})

	t.Run("OneOffGetsNone", func(t *testing.T) {
		o := h.schedule(c, client.ScheduleCreate{Name: "once", RunAt: ptr(time.Now().Add(time.Hour).UTC()), Target: httpTarget()})
		if got := h.em.keysGiven(o.Id); !reflect.DeepEqual(got, [][]string{nil}) {
			t.Fatalf("keys given %q, want none", got)
		}
	})
}
