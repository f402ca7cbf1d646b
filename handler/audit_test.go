package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/handler"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// signalAudit forwards to the store and reports each finished delete, so
// that the test waits for the periodic job instead of sleeping.
type signalAudit struct {
	handler.AuditStore
	done chan struct{}
}

func (s signalAudit) AuditDeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	n, err := s.AuditStore.AuditDeleteBefore(ctx, t, limit)
	select {
	case s.done <- struct{}{}:
	default:
	}
	return n, err
}

func TestAuditRetention(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	var ids model.IDSource
	ages := map[string]time.Duration{}
	var recs []*model.AuditRecord
	// Oldest first, as the master makes them: ids begin with their second.
	for _, age := range []time.Duration{400 * 24 * time.Hour, 31 * 24 * time.Hour, 29 * 24 * time.Hour, 10 * 24 * time.Hour, 0} {
		at := now.Add(-age)
		r := &model.AuditRecord{ID: ids.New("t1", model.AuditIDPrefix, at), At: at, TenantID: "t1", Action: "updateSchedule"}
		ages[r.ID] = age
		recs = append(recs, r)
	}
	if err := st.AuditAppend(ctx, recs); err != nil {
		t.Fatal(err)
	}
	sig := signalAudit{AuditStore: st, done: make(chan struct{}, 1)}
	startHandler(t, handler.Config{RetentionInterval: 20 * time.Millisecond, AuditRetention: 30 * 24 * time.Hour},
		handler.Deps{Store: st, Shards: allShards(1), Audit: sig,
			Deliverers: map[model.TargetType]handler.Deliverer{model.TargetHTTP: httpDeliverer(t, time.Second)}})
	select {
	case <-sig.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the retention job never deleted audit records")
	}
	left, err := st.AuditList(ctx, &store.AuditListParams{TenantID: "t1", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, r := range left {
		kept[r.ID] = true
	}
	for id, age := range ages {
		if want := age < 30*24*time.Hour; kept[id] != want {
			t.Errorf("record %s ago: kept %v, want %v", age, kept[id], want)
		}
	}
}
