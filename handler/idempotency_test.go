package handler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
)

// signalIdempotency forwards to the store and reports each finished delete,
// so that the test waits for the periodic job instead of sleeping.
type signalIdempotency struct {
	handler.IdempotencyStore
	done chan time.Time
}

func (s signalIdempotency) IdempotencyDeleteBefore(ctx context.Context, t time.Time) (int, error) {
	n, err := s.IdempotencyStore.IdempotencyDeleteBefore(ctx, t)
	select {
	case s.done <- t:
	default:
	}
	return n, err
}

func TestIdempotencyRetention(t *testing.T) {
	t.Run("TheRetentionJobDeletesOldRecords", func(t *testing.T) {
		st := openStore(t)
		ctx := context.Background()
		now := time.Now().UTC()
		recs := map[string]time.Time{
			"old":    now.Add(-25 * time.Hour),
			"older":  now.Add(-72 * time.Hour),
			"recent": now.Add(-23 * time.Hour),
			"new":    now,
		}
		for key, at := range recs {
			if _, err := st.IdempotencyPut(ctx, &model.IdempotencyRecord{TenantID: "t1", Key: key, RequestHash: "h",
				Status: 201, Body: []byte("sealed"), CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		sig := signalIdempotency{IdempotencyStore: st, done: make(chan time.Time, 1)}
		// The default retention (24h); the interval short so the job runs soon.
		startHandler(t, handler.Config{RetentionInterval: 20 * time.Millisecond},
			handler.Deps{Store: st, Shards: allShards(1), Idempotency: sig,
				Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Second)}})
		select {
		case <-sig.done:
		case <-time.After(10 * time.Second):
			t.Fatal("the retention job never deleted idempotency records")
		}
		for key, at := range recs {
			_, err := st.IdempotencyGet(ctx, "t1", key)
			gone := errors.Is(err, model.ErrNotFound)
			if err != nil && !gone {
				t.Fatal(err)
			}
			if want := now.Sub(at) > 24*time.Hour; gone != want {
				t.Errorf("record %q created %s ago: gone=%v, want %v", key, now.Sub(at), gone, want)
			}
		}
	})
	t.Run("OnlyTheOwnerOfShard0", func(t *testing.T) {
		st := openStore(t)
		ctx := context.Background()
		if _, err := st.IdempotencyPut(ctx, &model.IdempotencyRecord{TenantID: "t1", Key: "old", RequestHash: "h",
			Status: 201, Body: []byte("sealed"), CreatedAt: time.Now().Add(-48 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		deps := handler.Deps{Store: st, Shards: allShards(0), Idempotency: st,
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Second)}}
		deps.Throttle = newThrottle(t, handler.Config{Shards: testShards}, deps)
		h, err := handler.New(handler.Config{Shards: testShards}, deps)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := h.PurgeIdempotency(ctx); n != 0 || err != nil {
			t.Fatalf("an instance without shard 0 purged %d (%v)", n, err)
		}
		if _, err := st.IdempotencyGet(ctx, "t1", "old"); err != nil {
			t.Fatalf("record gone: %v", err)
		}
	})
	t.Run("ConfigRejectsNegativeRetention", func(t *testing.T) {
		_, err := handler.New(handler.Config{IdempotencyRetention: -time.Hour}, handler.Deps{})
		if err == nil || !strings.Contains(err.Error(), "IdempotencyRetention") {
			t.Fatalf("New with a negative IdempotencyRetention: %v", err)
		}
	})
}
