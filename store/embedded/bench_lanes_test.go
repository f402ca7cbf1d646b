package embedded

import (
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// BenchmarkDriverClaimLanes claims 1,000 events of one shard that holds a
// fire of 100,000 events of one tenant due at one instant, alone or with
// 100 other tenants' 10 events each, or skipping the fire's policy; or
// 100,000 events of that policy in 1,000 schedules' fires of 100, which
// take turns. Each op is one EventClaimDue; the claimed events go back to
// pending untimed, so every claim sees the same backlog.
func BenchmarkDriverClaimLanes(b *testing.B) {
	for _, bc := range []struct {
		name      string
		tenants   int
		skip      []string
		schedules int
	}{
		{"tenants=1", 1, nil, 1},
		{"tenants=101", 101, nil, 1},
		{"tenants=101/skip-fire", 101, []string{"hot"}, 1},
		{"tenants=1/schedules=1000", 1, nil, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openBench(b)
			ctx := b.Context()
			mkIn := func(scheduleID, tenant, policy string, n int) []*model.Event {
				fireID := model.FireID(scheduleID, 1, base())
				out := make([]*model.Event, n)
				for i := range out {
					out[i] = &model.Event{ID: model.EventID(fireID, i), TenantID: tenant, ScheduleID: scheduleID, FireID: fireID,
						FireTime: base(), Index: i, Count: n, LaunchAt: base(), PolicyID: policy,
						Target: model.Target{Type: model.TargetHTTP, URL: "https://consumer.example.com/hooks/nightly"}, MaxAttempts: 5,
						Status: model.EventPending, CreatedAt: base(), UpdatedAt: base()}
				}
				return out
			}
			mk := func(tenant, policy string, n int) []*model.Event { return mkIn("s-"+tenant, tenant, policy, n) }
			var fire []*model.Event
			for k := range bc.schedules {
				fire = append(fire, mkIn(fmt.Sprintf("s-big-%04d", k), "big", "hot", benchEvents/bc.schedules)...)
			}
			for i := 0; i < len(fire); i += benchBatch {
				if _, err := s.EventInsertMany(ctx, fire[i:i+benchBatch]); err != nil {
					b.Fatal(err)
				}
			}
			for k := 1; k < bc.tenants; k++ {
				if _, err := s.EventInsertMany(ctx, mk(fmt.Sprintf("tenant-%03d", k), "", 10)); err != nil {
					b.Fatal(err)
				}
			}
			p := &store.EventClaimParams{Fence: 1, DueBefore: base().Add(time.Minute), Limit: benchBatch, SkipPolicies: bc.skip}
			claimed := 0
			for b.Loop() {
				got, err := s.EventClaimDue(ctx, p)
				if err != nil || len(got) == 0 {
					b.Fatalf("EventClaimDue: %d, %v", len(got), err)
				}
				claimed += len(got)
				b.StopTimer()
				ts := make([]store.EventTransition, len(got))
				for i, e := range got {
					ts[i] = store.EventTransition{ID: e.ID, From: model.EventScheduled, Fence: 1, To: model.EventPending}
				}
				if _, err := s.EventTransition(ctx, ts); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
