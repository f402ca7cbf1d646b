package master_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
)

// TestLargeTriggerIsAcceptedWhileEmitting runs the real emitter with a low
// background threshold: the trigger answers 202 with the fire still being
// emitted, and the events all exist once the emitter reports the fire done.
func TestLargeTriggerIsAcceptedWhileEmitting(t *testing.T) {
	const n, above = 500, 100
	emitted := make(chan *model.Fire, 16)
	h := newHarness(t, func(_ *master.Config, d *master.Deps) {
		e, err := emitter.New(emitter.Config{Partitions: 4, Owner: "test", BackgroundThreshold: above, BackgroundChunk: 50},
			emitter.Deps{Store: d.Store.(emitter.Store), Emitted: emitted})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Stop)
		d.Emitter = e
	})
	_, c := h.tenant("acme")
	s := h.schedule(c, client.ScheduleCreate{Name: "big", Cron: ptr("0 0 1 1 *"), EventCount: ptr(n), Target: httpTarget()})

	r, err := c.TriggerScheduleWithResponse(h.ctx, s.Id, client.TriggerRequest{})
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusAccepted)
	f := r.JSON202
	if f.N != n || f.Emitting == nil || !*f.Emitting || f.Emitted == nil || *f.Emitted != 0 {
		t.Fatalf("large trigger answered %s, want emitting with 0 of %d emitted", r.Body, n)
	}

	for done := false; !done; {
		select {
		case got := <-emitted:
			done = got.ID == f.Id
		case <-t.Context().Done():
			t.Fatal("the fire's background emission never finished")
		}
	}
	g, err := c.GetFireWithResponse(h.ctx, f.Id)
	mustStatus(t, err, g.StatusCode(), g.Body, http.StatusOK)
	if g.JSON200.Counts.Waiting != n || (g.JSON200.Emitting != nil && *g.JSON200.Emitting) {
		t.Fatalf("fire after its emission: %s, want %d waiting events and not emitting", g.Body, n)
	}
}
