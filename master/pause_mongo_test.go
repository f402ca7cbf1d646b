package master_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/mongo"
	"github.com/schedulerd/schedulerd/store/mongo/mongotest"
)

// gatedStore holds ScheduleResumeDue's answer until gate closes, after
// telling read: the instance has read the due schedules.
type gatedStore struct {
	store.Driver
	read chan<- struct{}
	gate <-chan struct{}
}

func (g gatedStore) ScheduleResumeDue(ctx context.Context, p *store.ScheduleResumeDueParams) ([]*model.Schedule, error) {
	ss, err := g.Driver.ScheduleResumeDue(ctx, p)
	g.read <- struct{}{}
	<-g.gate
	return ss, err
}

// TestResumeDueOnTwoInstancesOnMongo: two instances, each with its own
// connection to one MongoDB-protocol store, both read a paused schedule
// due to resume; one resumes it, the other finds its version moved and
// leaves it, so each missed fire (misfire fire_all) is emitted once.
func TestResumeDueOnTwoInstancesOnMongo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts FerretDB")
	}
	ctx := context.Background()
	uri := mongotest.URI(t)
	clk := clockwork.NewFakeClockAt(pauseT0)
	read, gate := make(chan struct{}, 1), make(chan struct{})
	instance := func(name string, wrap func(store.Driver) store.Driver) (*master.Server, store.Driver) {
		// Only the first connection creates the indexes (FerretDB v1.24
		// panics when an existing index is created again).
		st, err := mongo.Open(ctx, uri, mongo.Options{SkipIndexes: name != "a"})
		if err != nil {
			t.Fatalf("mongo open: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		var d store.Driver = st
		if wrap != nil {
			d = wrap(st)
		}
		em, err := emitter.New(emitter.Config{Partitions: 4, Owner: name}, emitter.Deps{Store: d, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := master.New(master.Config{AdminKey: testAdminKey, Partitions: 4}, master.Deps{
			Store: d, Emitter: em, Clock: clk, Tokens: countingTokens{st: st, n: new(atomic.Int64)},
			Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		})
		if err != nil {
			t.Fatal(err)
		}
		return srv, st
	}
	a, st := instance("a", nil)
	b, _ := instance("b", func(d store.Driver) store.Driver { return gatedStore{Driver: d, read: read, gate: gate} })

	ts := httptest.NewServer(a.Handler())
	t.Cleanup(ts.Close)
	h := &harness{t: t, url: ts.URL, ctx: ctx}
	h.admin = h.client(testAdminKey)
	tenantID, c := h.tenant("acme")
	mf := client.MisfireFireAll
	s := h.schedule(c, client.ScheduleCreate{Name: "every-minute", Cron: ptr("* * * * *"), Target: httpTarget(), Misfire: &mf})
	resumeAt := pauseT0.Add(90 * time.Second) // 10:02
	p, err := c.PauseScheduleWithResponse(ctx, s.Id, client.PauseRequest{Until: &resumeAt})
	mustStatus(t, err, p.StatusCode(), p.Body, 200)
	clk.Advance(4 * time.Minute) // 10:04:30: the gap is 10:02, 10:03

	type result struct {
		n   int
		err error
	}
	bDone := make(chan result, 1)
	go func() {
		n, err := b.ResumeDue(ctx)
		bDone <- result{n, err}
	}()
	<-read // b has read the schedule as paused
	if n, err := a.ResumeDue(ctx); err != nil || n != 1 {
		t.Fatalf("instance a resumed %d, %v; want 1", n, err)
	}
	close(gate)
	if r := <-bDone; r.err != nil || r.n != 0 {
		t.Fatalf("instance b resumed %d, %v; want 0 (the version moved)", r.n, r.err)
	}

	got, err := st.ScheduleGet(ctx, tenantID, s.Id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != model.ScheduleActive || got.Version != 3 {
		t.Fatalf("schedule after both instances: state %s version %d, want active version 3 (create, pause, one resume)", got.State, got.Version)
	}
	fs, err := st.FireList(ctx, &store.FireListParams{TenantID: tenantID, ScheduleID: s.Id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	late := map[time.Time]int{}
	for _, f := range fs {
		if f.Decision == model.FireLate {
			late[f.FireTime]++
		}
	}
	want := map[time.Time]int{resumeAt: 1, resumeAt.Add(time.Minute): 1}
	if len(late) != len(want) || late[resumeAt] != 1 || late[resumeAt.Add(time.Minute)] != 1 {
		t.Fatalf("late fires %v, want %v", late, want)
	}
}
