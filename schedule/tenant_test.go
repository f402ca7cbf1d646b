package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// Tenant limits: the per-fire quota, the tenant's target rule and a
// one-off's runAt against the catch-up limit.
func TestCompileTenantLimits(t *testing.T) {
	tenantLimits := func() schedule.Limits {
		lim := testLimits()
		lim.MaxEventsPerFire = 10
		lim.CatchUpLimit = time.Hour
		lim.CheckQueueURL = func(u string) error {
			if u != "https://sqs.eu-west-1.amazonaws.com/123456789012/allowed" {
				return errors.New("queue URL is not among the tenant's allowed targets")
			}
			return nil
		}
		return lim
	}
	oneOff := func(at time.Time, misfire model.MisfirePolicy) func(*schedule.Spec) {
		return func(s *schedule.Spec) { s.Cron, s.RunAt, s.Misfire = nil, &at, misfire }
	}
	sqs := func(u string) func(*schedule.Spec) {
		return func(s *schedule.Spec) { s.Target = schedule.Target{Type: model.TargetSQS, QueueURL: &u} }
	}
	refused := []struct {
		name          string
		mutate        func(*schedule.Spec)
		field, reason string
	}{
		{"EventCountOverQuota", func(s *schedule.Spec) { s.EventCount = 11 }, "eventCount", "over the tenant's maxEventsPerFire quota (10)"},
		// The configured ceiling keeps its own message.
		{"EventCountOverCeiling", func(s *schedule.Spec) { s.EventCount = 1001 }, "eventCount", "must be between 1 and 1000"},
		{"QueueOutsideTenantTargets", sqs("https://sqs.eu-west-1.amazonaws.com/123456789012/other"), "target.queueUrl",
			"queue URL is not among the tenant's allowed targets"},
		{"OneOffOlderThanCatchUp", oneOff(testNow.Add(-61*time.Minute), model.MisfireFireOnce), "runAt",
			"older than the catch-up limit (1h0m0s): it would never fire; set misfire to fire_all to fire it at once"},
		{"OneOffOlderThanCatchUpSkip", oneOff(testNow.Add(-48*time.Hour), model.MisfireSkip), "runAt",
			"older than the catch-up limit (1h0m0s): it would never fire; set misfire to fire_all to fire it at once"},
	}
	for _, tc := range refused {
		t.Run("Refuses"+tc.name, func(t *testing.T) {
			sp := valid()
			tc.mutate(&sp)
			_, err := schedule.Compile(sp, tenantLimits(), testNow)
			var fe schedule.Errors
			if !errors.As(err, &fe) || len(fe) != 1 {
				t.Fatalf("want one failed field, got %v", err)
			}
			if got := fe.Reasons(tc.field); len(got) != 1 || got[0] != tc.reason {
				t.Fatalf("reasons of %s: %q, want %q", tc.field, got, tc.reason)
			}
		})
	}
	accepted := []struct {
		name   string
		mutate func(*schedule.Spec)
		lim    func(*schedule.Limits)
	}{
		{"EventCountAtQuota", func(s *schedule.Spec) { s.EventCount = 10 }, nil},
		{"EventCountWithoutQuota", func(s *schedule.Spec) { s.EventCount = 1000 }, func(l *schedule.Limits) { l.MaxEventsPerFire = 0 }},
		{"QueueInsideTenantTargets", sqs("https://sqs.eu-west-1.amazonaws.com/123456789012/allowed"), nil},
		{"OneOffPastWithinCatchUp", oneOff(testNow.Add(-59*time.Minute), model.MisfireFireOnce), nil},
		{"OneOffPastFireAll", oneOff(testNow.Add(-30*24*time.Hour), model.MisfireFireAll), nil},
		{"OneOffPastWithoutLimit", oneOff(testNow.Add(-30*24*time.Hour), model.MisfireFireOnce), func(l *schedule.Limits) { l.CatchUpLimit = 0 }},
	}
	for _, tc := range accepted {
		t.Run("Accepts"+tc.name, func(t *testing.T) {
			sp := valid()
			tc.mutate(&sp)
			lim := tenantLimits()
			if tc.lim != nil {
				tc.lim(&lim)
			}
			if _, err := schedule.Compile(sp, lim, testNow); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}
