package throttle

import (
	"slices"
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
		st, changed := c.observe(OutcomeTimeout, 0, at)
		if !changed || st.Limit != 9 || st.Reason != LimitReasonTimeout {
			t.Fatalf("after a timeout: %+v changed=%v, want 9 timeout", st, changed)
		}
		if _, changed := c.observe(OutcomeTimeout, 0, at); changed {
			t.Fatal("a second timeout in the same window lowered the limit again")
		}
	})
	t.Run("LateSignalsOfTheOldLimitIgnored", func(t *testing.T) {
		c := newC()
		c.observe(OutcomeOK, time.Millisecond, at)
		c.observe(OutcomeTimeout, 0, at) // 10 → 9
		for i := 0; i < 8; i++ {
			if _, changed := c.observe(OutcomeTimeout, 0, at); changed {
				t.Fatalf("answer %d sent under the old limit lowered the new one", i)
			}
		}
		if st, changed := c.observe(OutcomeOK, 0, at); changed || st.Limit != 9 {
			t.Fatalf("state %+v changed=%v at the end of the window after the decrease", st, changed)
		}
		if st, changed := c.observe(OutcomeTimeout, 0, at); !changed || st.Limit != 8 {
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
	// healthy feeds one window of successes with the limit's worth of
	// tokens out and returns the limit after it.
	healthy := func(c *aimd) int {
		c.tokensOut(c.state.Limit)
		for range c.state.Limit {
			c.observe(OutcomeOK, time.Millisecond, at)
		}
		return c.state.Limit
	}
	t.Run("HoldsBelowTheLevelThatFailed", func(t *testing.T) {
		c := newC()
		c.observe(OutcomeOverloaded, 0, at) // 10 → 9; the next window follows a decrease
		if l := healthy(c); l != 9 {
			t.Fatalf("limit = %d after the window of the decrease, want 9", l)
		}
		// Two healthy windows at 9, then 10 is tried again.
		if l := healthy(c); l != 9 {
			t.Fatalf("limit = %d after one healthy window below the failed 10, want 9 (held)", l)
		}
		if l := healthy(c); l != 10 || c.state.Reason != LimitReasonHealthy {
			t.Fatalf("state = %+v after two healthy windows at 9, want 10 healthy", c.state)
		}
		// 10 fails again: held twice as long.
		c.observe(OutcomeOverloaded, 0, at)
		healthy(c) // the window of the decrease
		for i := range 3 {
			if l := healthy(c); l != 9 {
				t.Fatalf("limit = %d after %d healthy windows below 10 failing twice, want 9", l, i+1)
			}
		}
		if l := healthy(c); l != 10 {
			t.Fatalf("limit = %d after four healthy windows, want 10", l)
		}
		for range 100 {
			healthy(c)
		}
		if c.state.Limit != 10 {
			t.Fatalf("limit = %d, want max 10", c.state.Limit)
		}
	})
	t.Run("BeyondTheFailedLevelFasterAndFaster", func(t *testing.T) {
		c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 100}, EffectiveLimit: 20}, at)
		c.observe(OutcomeOverloaded, 0, at) // 20 → 19: the consumer failed at 20
		healthy(c)                          // the window of the decrease
		var got []int
		for range 8 {
			got = append(got, healthy(c))
		}
		// Held at 19 for two windows, 20 again, then +1, +2, and from
		// there an eighth of the limit: +2 (23/8), +3, +3, +3.
		want := []int{19, 20, 21, 23, 25, 28, 31, 34}
		if !slices.Equal(got, want) {
			t.Fatalf("limits after healthy windows = %v, want %v", got, want)
		}
	})
	t.Run("BackHalfwayTowardsTheFailedLevel", func(t *testing.T) {
		c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 100}, EffectiveLimit: 50}, at)
		c.observe(OutcomeTimeout, 0, at) // 50 → 45 (×0.9)
		healthy(c)
		var got []int
		for range 6 {
			got = append(got, healthy(c))
		}
		if want := []int{47, 48, 49, 49, 50, 51}; !slices.Equal(got, want) {
			t.Fatalf("limits after healthy windows = %v, want %v", got, want)
		}
	})
	t.Run("OneLessPerOverloadDownToTimesPointNine", func(t *testing.T) {
		c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 100}, EffectiveLimit: 50}, at)
		for i := 1; i <= 3; i++ {
			if st, changed := c.observe(OutcomeOverloaded, 0, at); !changed || st.Limit != 50-i {
				t.Fatalf("429 number %d at 50: %+v changed=%v, want %d", i, st, changed, 50-i)
			}
		}
		for range 20 {
			c.observe(OutcomeOverloaded, 0, at)
		}
		if c.state.Limit != 45 {
			t.Fatalf("limit = %d after 23 429s in a window that began at 50, want 45 (×0.9)", c.state.Limit)
		}
		c.tokensOut(45)
		for range 45 - 22 {
			c.observe(OutcomeOK, time.Millisecond, at)
		}
		// The consumer failed at 46: held at 45 for two windows.
		if l := healthy(c); l != 45 {
			t.Fatalf("limit = %d after a healthy window, want 45 (held)", l)
		}
		if l := healthy(c); l != 46 {
			t.Fatalf("limit = %d after two healthy windows, want 46", l)
		}
	})
	t.Run("TimeoutOncePerWindow", func(t *testing.T) {
		c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 100}, EffectiveLimit: 50}, at)
		c.observe(OutcomeTimeout, 0, at)
		for range 20 {
			c.observe(OutcomeTimeout, 0, at)
		}
		if c.state.Limit != 45 {
			t.Fatalf("limit = %d after timeouts in one window at 50, want 45", c.state.Limit)
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
		c.tokensOut(4)
		if _, changed := c.backlog(40, 0, at); changed {
			t.Fatal("an empty queue raised the limit of 9 with 4 tokens out")
		}
		c.tokensOut(5)
		if st, changed := c.backlog(40, 0, at); !changed || st.Limit != 10 {
			t.Fatalf("empty queue, 5 of 9 tokens out: %+v changed=%v, want 10", st, changed)
		}
	})
	t.Run("GrowsOnlyWhenPushed", func(t *testing.T) {
		// A window of successes says the consumer takes more only if
		// the tokens out came near the limit: half of it.
		c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 100}, EffectiveLimit: 20}, at)
		window := func() int {
			for range c.state.Limit {
				c.observe(OutcomeOK, time.Millisecond, at)
			}
			return c.state.Limit
		}
		for i := range 20 {
			c.tokensOut(i % 10) // up to 9 out, then back to 0
			if l := window(); l != 20 {
				t.Fatalf("limit = %d after %d windows with at most 9 of 20 tokens out, want 20", l, i+1)
			}
		}
		// 10 out once in the window, even if fewer at its end.
		c.tokensOut(10)
		c.tokensOut(3)
		if l := window(); l != 21 {
			t.Fatalf("limit = %d after a window that reached 10 of 20 tokens out, want 21", l)
		}
		// The peak is the window's: the next one, at 3 out, holds.
		if l := window(); l != 21 {
			t.Fatalf("limit = %d after a window with 3 of 21 out, want 21", l)
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
