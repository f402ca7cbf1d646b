package throttle_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/throttletest"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/throttle"
)

// reclaimStore is what the release-after-reclaim scenario writes through.
type reclaimStore interface {
	throttle.ReleaseStore
	EventInsertMany(ctx context.Context, events []*model.Event) (int, error)
	EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error)
	PolicyCreate(ctx context.Context, p *model.Policy) error
	PolicyGetByID(ctx context.Context, id string) (*model.Policy, error)
	PolicyAcquireTokens(ctx context.Context, policyID string, want int) (int, error)
}

// TestReleaseAfterTokenTimeout pins what a consumer's late release does
// once the token timeout has reclaimed the token of its copy of the event,
// on the in-memory and the embedded store. A delivered event is finished by
// the reclaim (released, tokenTimedOut): a late release finds it finished
// and returns nothing. An event still delivering is retried: its late
// release returns nothing before the retry is sent, and once the retry holds
// the token, under the same fence or a newer one, the late release must not
// free it (that would let maxInFlight+1 events be worked on); the retry's own
// release does.
func TestReleaseAfterTokenTimeout(t *testing.T) {
	stores := map[string]func(t *testing.T) reclaimStore{
		"memory": func(t *testing.T) reclaimStore { return throttletest.NewMemStore() },
		"embedded": func(t *testing.T) reclaimStore {
			st, err := embedded.Open(t.TempDir(), embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Run("Delivered", func(t *testing.T) { releaseAfterReclaimDelivered(t, open(t)) })
			for _, retryFence := range []int64{3, 4} {
				t.Run("DeliveringRetryFence"+strconv.FormatInt(retryFence, 10), func(t *testing.T) {
					releaseAfterReclaimDelivering(t, open(t), retryFence)
				})
			}
		})
	}
}

var t0 = time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)

// sentCopy stores a throttled event of a policy of maxInFlight 1 as sent
// under fence 3 in its first attempt (status delivering or delivered, its
// token expiring at t0+1s) and returns the event as its consumer's release
// finds it then.
func sentCopy(t *testing.T, st reclaimStore, status model.EventStatus) *model.Event {
	t.Helper()
	ctx := context.Background()
	p := &model.Policy{ID: "pol_r", TenantID: "ten_a", Name: "r", MaxInFlight: 1, TokenTimeout: time.Second,
		Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := st.PolicyCreate(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PolicyAcquireTokens(ctx, p.ID, 1); n != 1 || err != nil {
		t.Fatalf("acquire: %d, %v", n, err)
	}
	exp := t0.Add(time.Second)
	e := &model.Event{ID: "ev_r", TenantID: "ten_a", ScheduleID: "sch_r", FireID: "sch_r.f", FireTime: t0,
		Count: 1, LaunchAt: t0, PolicyID: p.ID, MaxAttempts: 3, Status: status, Fence: 3,
		Target:       model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hook"},
		ReleaseToken: "secret", TokenExpiresAt: &exp, CreatedAt: t0, UpdatedAt: t0}
	if status == model.EventDelivered {
		e.Attempts, e.DeliveredAt = 1, &t0
	}
	if _, err := st.EventInsertMany(ctx, []*model.Event{e}); err != nil {
		t.Fatal(err)
	}
	got, err := st.EventGetByID(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// reclaim takes the expired token of e back as the timeout pass does.
func reclaim(t *testing.T, st reclaimStore, e *model.Event, now time.Time) {
	t.Helper()
	ctx := context.Background()
	res, err := st.EventTransition(ctx, []store.EventTransition{store.ReclaimToken(e, 3, now)})
	if err != nil || res[0] != nil {
		t.Fatalf("reclaim: %v, %v", err, res)
	}
	if err := st.PolicyReleaseTokens(ctx, e.PolicyID, 1, 1); err != nil {
		t.Fatal(err)
	}
}

func wantState(t *testing.T, st reclaimStore, id string, status model.EventStatus, inUse int) *model.Event {
	t.Helper()
	ctx := context.Background()
	e, err := st.EventGetByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.PolicyGetByID(ctx, "pol_r")
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != status || p.InUse != inUse {
		t.Fatalf("event %s (attempts %d), policy InUse %d; want %s and InUse %d", e.Status, e.Attempts, p.InUse, status, inUse)
	}
	return e
}

func releaseAfterReclaimDelivered(t *testing.T, st reclaimStore) {
	ctx := context.Background()
	copy1 := sentCopy(t, st, model.EventDelivered)
	reclaim(t, st, copy1, t0.Add(2*time.Second))
	e := wantState(t, st, copy1.ID, model.EventReleased, 0)
	if !e.TokenTimedOut {
		t.Fatal("reclaimed event not marked tokenTimedOut")
	}
	// The consumer's release, read before or after the reclaim.
	for _, read := range []*model.Event{copy1, e} {
		released, err := throttle.Release(ctx, st, read, t0.Add(3*time.Second))
		if released || err != nil {
			t.Fatalf("late release of a reclaimed delivered event (read as %s): released %v, %v", read.Status, released, err)
		}
	}
	e = wantState(t, st, copy1.ID, model.EventReleased, 0)
	if !e.TokenTimedOut || !e.FinishedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("late release changed the reclaimed event: tokenTimedOut %v, finishedAt %v", e.TokenTimedOut, e.FinishedAt)
	}
}

func releaseAfterReclaimDelivering(t *testing.T, st reclaimStore, retryFence int64) {
	ctx := context.Background()
	copy1 := sentCopy(t, st, model.EventDelivering)
	_, fence1, attempt1 := model.ParseDeliveryToken(model.DeliveryToken(copy1))
	reclaim(t, st, copy1, t0.Add(2*time.Second))
	retrying := wantState(t, st, copy1.ID, model.EventRetrying, 0)
	if !model.Superseded(retrying, fence1, attempt1) {
		t.Fatal("the first copy's token is not superseded by its retry")
	}

	// Before the retry is sent: nothing to release, nothing changes.
	for _, read := range []*model.Event{copy1, retrying} {
		if released, err := throttle.Release(ctx, st, read, t0.Add(3*time.Second)); released || err != nil {
			t.Fatalf("release before the retry is sent (read as %s): released %v, %v", read.Status, released, err)
		}
	}
	wantState(t, st, copy1.ID, model.EventRetrying, 0)

	// The retry is claimed and takes the token, under the same fence (the
	// instance kept the shard) or a newer one (another took it over).
	claimed, err := st.EventClaimDue(ctx, &store.EventClaimParams{Shard: copy1.Shard, Fence: retryFence, DueBefore: t0.Add(4 * time.Second), Limit: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim the retry: %v, %d events", err, len(claimed))
	}
	if n, err := st.PolicyAcquireTokens(ctx, copy1.PolicyID, 1); n != 1 || err != nil {
		t.Fatalf("acquire for the retry: %d, %v", n, err)
	}
	res, err := st.EventTransition(ctx, []store.EventTransition{store.StartDelivery(copy1.ID, retryFence, t0.Add(5*time.Second), t0.Add(4*time.Second))})
	if err != nil || res[0] != nil {
		t.Fatalf("start the retry: %v, %v", err, res)
	}
	copy2 := wantState(t, st, copy1.ID, model.EventDelivering, 1)
	if _, f, a := model.ParseDeliveryToken(model.DeliveryToken(copy2)); !model.Superseded(copy2, fence1, attempt1) || model.Superseded(copy2, f, a) {
		t.Fatalf("tokens: first copy %d/%d, retry %d/%d; only the first may be superseded", fence1, attempt1, f, a)
	}

	// The first copy's late release, as read before the reclaim (a
	// release racing the retry), while the retry is delivering and once it
	// is delivered: the retry keeps its token.
	if released, err := throttle.Release(ctx, st, copy1, t0.Add(4*time.Second)); released || err != nil {
		t.Fatalf("first copy's release took the delivering retry's token: released %v, %v", released, err)
	}
	stale := *copy1
	if err := throttle.Extend(ctx, st, &stale, t0.Add(time.Hour), t0.Add(4*time.Second)); !errors.Is(err, model.ErrConflict) {
		t.Fatalf("first copy's extend of the retry's token: %v, want ErrConflict", err)
	}
	if e := wantState(t, st, copy1.ID, model.EventDelivering, 1); !e.TokenExpiresAt.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("first copy's extend moved the retry's expiry to %v", e.TokenExpiresAt)
	}
	res, err = st.EventTransition(ctx, []store.EventTransition{store.Delivered(copy1.ID, retryFence, 2, t0.Add(4*time.Second))})
	if err != nil || res[0] != nil {
		t.Fatalf("record the retry delivered: %v, %v", err, res)
	}
	if released, err := throttle.Release(ctx, st, copy1, t0.Add(4*time.Second)); released || err != nil {
		t.Fatalf("first copy's release took the delivered retry's token: released %v, %v", released, err)
	}
	wantState(t, st, copy1.ID, model.EventDelivered, 1)

	// The retry's own release, as its consumer's call reads it, returns
	// the token.
	if released, err := throttle.Release(ctx, st, copy2, t0.Add(4*time.Second)); !released || err != nil {
		t.Fatalf("the retry's release: released %v, %v", released, err)
	}
	wantState(t, st, copy1.ID, model.EventReleased, 0)
}
