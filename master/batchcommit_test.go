package master_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// fireWriteFault fails, while failing is set, every store write that
// carries fires: FireInsertMany, and a ScheduleCreateMany with an item
// that has Fires (which then writes nothing, as a failed commit).
type fireWriteFault struct {
	*embedded.Store
	failing atomic.Bool
}

func (f *fireWriteFault) ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error) {
	if f.failing.Load() {
		for _, it := range items {
			if len(it.Fires) > 0 {
				return nil, model.ErrUnavailable
			}
		}
	}
	return f.Store.ScheduleCreateMany(ctx, items)
}

func (f *fireWriteFault) FireInsertMany(ctx context.Context, fs []store.FireNew) ([]bool, int, error) {
	if f.failing.Load() {
		return nil, 0, model.ErrUnavailable
	}
	return f.Store.FireInsertMany(ctx, fs)
}

// fixedQuotas gives every tenant the same maxEventsPerMinute.
type fixedQuotas int

func (q fixedQuotas) TenantQuotas(context.Context, string) (model.TenantQuotas, error) {
	return model.TenantQuotas{MaxEventsPerMinute: int(q)}, nil
}

// TestBatchWriteFailureLeavesNothing checks that a batch of one-offs whose
// fires cannot be written leaves neither schedules nor fires, that the
// per-minute quota their planned fires took is given back (a retry within
// the same minute is emitted in full), and that an item stored by an
// earlier attempt (a conflict, recovered) gives back the room its plan took.
func TestBatchWriteFailureLeavesNothing(t *testing.T) {
	var st *fireWriteFault
	clock := clockwork.NewFakeClockAt(time.Now())
	h := newHarness(t, func(_ *master.Config, d *master.Deps) {
		st = &fireWriteFault{Store: d.Store.(*embedded.Store)}
		em, err := emitter.New(emitter.Config{Partitions: 4, Owner: "test"},
			emitter.Deps{Store: st, Clock: clock, Quotas: fixedQuotas(6)})
		if err != nil {
			t.Fatal(err)
		}
		d.Store, d.Emitter = st, em
	})
	tenantID, c := h.tenant("acme")

	runAt := clock.Now().Add(time.Hour).UTC().Truncate(time.Second)
	item := func(name, key string) string {
		k := ""
		if key != "" {
			k = `"idempotencyKey":"` + key + `",`
		}
		return `{` + k + `"name":"` + name + `","runAt":"` + runAt.Format(time.RFC3339) +
			`","eventCount":3,"target":{"type":"http","url":"https://consumer.example.com/hook"}}`
	}
	body := `{"items":[` + item("a", "") + `,` + item("b", "") + `]}`
	listed := func() []*model.Schedule {
		t.Helper()
		ss, err := st.ScheduleList(h.ctx, &store.ScheduleListParams{TenantID: tenantID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	// emitted fails unless each schedule's one fire was emitted now with
	// its 3 events written.
	emitted := func(ss []*model.Schedule) {
		t.Helper()
		for _, s := range ss {
			f, err := st.FireGet(h.ctx, tenantID, model.FireID(s.ID, 1, runAt))
			if err != nil {
				t.Fatalf("fire of %s: %v", s.Name, err)
			}
			if f.Decision != model.FireEmitted || f.Remaining != 0 || strings.Contains(f.Note, "deferred") {
				t.Fatalf("fire of %s: decision %s, remaining %d, note %q; want emitted in full", s.Name, f.Decision, f.Remaining, f.Note)
			}
			if counts, err := st.EventCountByFire(h.ctx, f.ID); err != nil || counts[model.EventPending] != 3 {
				t.Fatalf("events of %s: %v (%v), want 3 pending", s.Name, counts, err)
			}
		}
	}

	st.failing.Store(true)
	r, err := c.CreateSchedulesBatchWithBodyWithResponse(h.ctx, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() < 500 || !strings.HasPrefix(r.HTTPResponse.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("failed write answered %d %s: %s", r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body)
	}
	if ss := listed(); len(ss) != 0 {
		t.Fatalf("a failed batch left %d schedules (%s first)", len(ss), ss[0].Name)
	}
	if n, err := st.EventCountByTenant(h.ctx, tenantID, 0); err != nil || n != 0 {
		t.Fatalf("a failed batch left %d events (%v)", n, err)
	}

	// Same minute, quota 6: the retry's 6 events fit only if the failed
	// attempt gave its room back.
	st.failing.Store(false)
	res := postBatch(t, h, c, body)
	if res.Created != 2 {
		t.Fatalf("retry created %d of 2: %+v", res.Created, res.Items)
	}
	ss := listed()
	if len(ss) != 2 {
		t.Fatalf("%d schedules after the retry, want 2", len(ss))
	}
	emitted(ss)

	// Next minute: a keyed item takes 3 of 6. Its record lost, the same
	// item again conflicts with its schedule and is recovered; the room
	// its plan took goes back, so 3 more events still fit this minute.
	clock.Advance(time.Minute)
	res = postBatch(t, h, c, `{"items":[`+item("k", "k1")+`]}`)
	if res.Created != 1 {
		t.Fatalf("keyed item: %+v", res.Items[0])
	}
	if _, err := st.IdempotencyDeleteBefore(h.ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	res = postBatch(t, h, c, `{"items":[`+item("k", "k1")+`]}`)
	if res.Created != 1 || res.Items[0].Replayed == nil || !*res.Items[0].Replayed {
		t.Fatalf("recovered item: %+v", res.Items[0])
	}
	res = postBatch(t, h, c, `{"items":[`+item("c", "")+`]}`)
	if res.Created != 1 {
		t.Fatalf("item c: %+v", res.Items[0])
	}
	ss = listed()
	if len(ss) != 4 {
		t.Fatalf("%d schedules, want 4", len(ss))
	}
	emitted(ss)
}
