package throttle

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func TestAIMD(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newC := func() *aimd {
		return newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 2, Max: 10}}, at)
	}

	t.Run("StartsAtMax", func(t *testing.T) {
		c := newC()
		if c.state.Limit != 10 || c.state.Reason != LimitReasonStart {
			t.Fatalf("state = %+v, want limit 10 reason start", c.state)
		}
	})
	t.Run("DecreasesOncePerWindow", func(t *testing.T) {
		c := newC()
		st, changed := c.observe(OutcomeOverloaded, 0, at)
		if !changed || st.Limit != 9 || st.Reason != LimitReasonOverloaded {
			t.Fatalf("after a 429: %+v changed=%v, want 9 overloaded", st, changed)
		}
		if _, changed := c.observe(OutcomeOverloaded, 0, at); changed {
			t.Fatal("a second signal in the same window lowered the limit again")
		}
	})
	t.Run("LateSignalsOfTheOldLimitIgnored", func(t *testing.T) {
		c := newC()
		c.observe(OutcomeOK, time.Millisecond, at)
		c.observe(OutcomeOverloaded, 0, at) // 10 → 9
		for i := 0; i < 8; i++ {
			if _, changed := c.observe(OutcomeOverloaded, 0, at); changed {
				t.Fatalf("answer %d sent under the old limit lowered the new one", i)
			}
		}
		if st, changed := c.observe(OutcomeOK, 0, at); changed || st.Limit != 9 {
			t.Fatalf("state %+v changed=%v at the end of the window after the decrease", st, changed)
		}
		if st, changed := c.observe(OutcomeOverloaded, 0, at); !changed || st.Limit != 8 {
			t.Fatalf("a signal in the next window: %+v changed=%v, want 8", st, changed)
		}
	})
	t.Run("NeverBelowMin", func(t *testing.T) {
		c := newC()
		for i := 0; i < 200; i++ {
			c.observe(OutcomeTimeout, 0, at)
		}
		if c.state.Limit != 2 {
			t.Fatalf("limit = %d, want min 2", c.state.Limit)
		}
	})
	t.Run("IncreasesByOnePerHealthyWindow", func(t *testing.T) {
		c := newC()
		c.observe(OutcomeOverloaded, 0, at) // 9; the next window follows a decrease
		for i := 0; i < 9; i++ {
			c.observe(OutcomeOK, time.Millisecond, at)
		}
		if c.state.Limit != 9 {
			t.Fatalf("limit = %d after the window of the decrease, want 9", c.state.Limit)
		}
		for i := 0; i < 9; i++ {
			c.observe(OutcomeOK, time.Millisecond, at)
		}
		if c.state.Limit != 10 || c.state.Reason != LimitReasonHealthy {
			t.Fatalf("state = %+v after a healthy window, want 10 healthy", c.state)
		}
		for i := 0; i < 100; i++ {
			c.observe(OutcomeOK, time.Millisecond, at)
		}
		if c.state.Limit != 10 {
			t.Fatalf("limit = %d, want max 10", c.state.Limit)
		}
	})
	t.Run("ServerErrorShare", func(t *testing.T) {
		c := newC()
		if _, changed := c.observe(OutcomeServerError, 0, at); changed {
			t.Fatal("one 5xx in a window of 10 lowered the limit")
		}
		if st, changed := c.observe(OutcomeServerError, 0, at); !changed || st.Reason != LimitReasonServerError {
			t.Fatalf("two 5xx in a window of 10: %+v changed=%v, want a decrease", st, changed)
		}
	})
	t.Run("LatencyGrowth", func(t *testing.T) {
		c := newC()
		for i := 0; i < 10; i++ {
			c.observe(OutcomeOK, 10*time.Millisecond, at)
		}
		// Already at max: no increase; best window is 10ms.
		var st LimitState
		var changed bool
		for i := 0; i < 10; i++ {
			st, changed = c.observe(OutcomeOK, 30*time.Millisecond, at)
		}
		if !changed || st.Reason != LimitReasonLatency || st.Limit != 9 {
			t.Fatalf("window at 3x the best latency: %+v changed=%v, want 9 latency", st, changed)
		}
	})
	t.Run("OtherFailuresAreNoSignal", func(t *testing.T) {
		c := newC()
		for i := 0; i < 30; i++ {
			if _, changed := c.observe(OutcomeOther, 0, at); changed {
				t.Fatal("a failure that says nothing of capacity moved the limit")
			}
		}
	})
	t.Run("Backlog", func(t *testing.T) {
		c := newC()
		if st, changed := c.backlog(5, 50, at); !changed || st.Limit != 9 || st.Reason != LimitReasonBacklog {
			t.Fatalf("growing backlog: %+v changed=%v, want 9 backlog", st, changed)
		}
		if _, changed := c.backlog(50, 40, at); changed {
			t.Fatal("a shrinking backlog moved the limit")
		}
		if st, changed := c.backlog(40, 0, at); !changed || st.Limit != 10 {
			t.Fatalf("empty queue: %+v changed=%v, want 10", st, changed)
		}
	})
	t.Run("StartsAtPersistedLimit", func(t *testing.T) {
		c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 2, Max: 10}, EffectiveLimit: 4, LimitReason: LimitReasonTimeout, LimitChangedAt: at}, at.Add(time.Hour))
		if c.state.Limit != 4 || c.state.Reason != LimitReasonTimeout || !c.state.ChangedAt.Equal(at) {
			t.Fatalf("state = %+v, want the persisted 4 timeout", c.state)
		}
	})
	t.Run("ResizedByPolicyUpdate", func(t *testing.T) {
		var s adaptiveSet
		p := &model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 2, Max: 10}}
		s.of(p, at)
		p2 := &model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 4}}
		if c := s.of(p2, at); c.state.Limit != 4 {
			t.Fatalf("limit = %d after max lowered to 4", c.state.Limit)
		}
		if s.of(&model.Policy{ID: "p"}, at) != nil || s.get("p") != nil {
			t.Fatal("a policy no longer adaptive kept its controller")
		}
	})
}
