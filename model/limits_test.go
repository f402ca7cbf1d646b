package model_test

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func TestEffectiveLimit(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	hold := &model.PolicyHold{Until: now.Add(time.Hour), MaxInFlight: 2}
	rule := model.Cap{MaxInFlight: 5, Rule: 1, RatePerSecond: 3, Next: now.Add(2 * time.Hour)}
	cases := []struct {
		name   string
		p      model.Policy
		c      model.Cap
		limit  int
		source string
	}{
		{"own", model.Policy{MaxInFlight: 10}, model.NoCap, 10, model.LimitSourcePolicy},
		{"adaptive", model.Policy{MaxInFlight: 10, Adaptive: &model.AdaptiveLimit{Min: 1, Max: 10}, EffectiveLimit: 7}, model.NoCap, 7, model.LimitSourceAdaptive},
		{"rule", model.Policy{MaxInFlight: 10}, rule, 5, "limits[1]"},
		{"rule above own", model.Policy{MaxInFlight: 4}, rule, 4, model.LimitSourcePolicy},
		{"stop", model.Policy{MaxInFlight: 4}, model.Cap{MaxInFlight: 0, Rule: 0}, 0, "limits[0]"},
		{"hold", model.Policy{MaxInFlight: 10, Hold: hold}, rule, 2, model.LimitSourceHold},
		{"hold ended", model.Policy{MaxInFlight: 10, Hold: &model.PolicyHold{Until: now, MaxInFlight: 0}}, model.NoCap, 10, model.LimitSourcePolicy},
	}
	for _, c := range cases {
		if l, s := c.p.Effective(c.c, now); l != c.limit || s != c.source {
			t.Errorf("%s: Effective = %d %q; want %d %q", c.name, l, s, c.limit, c.source)
		}
	}
	p := model.Policy{MaxInFlight: 10, Hold: hold, RatePerSecond: 8, Burst: 16}
	if got := p.NextChange(rule, now); !got.Equal(hold.Until) {
		t.Errorf("NextChange = %v; want the hold's end", got)
	}
	if r, b := p.EffectiveRate(rule); r != 3 || b != 3 {
		t.Errorf("EffectiveRate = %g %d; want the rule's 3 with its default burst", r, b)
	}
	if r, b := p.EffectiveRate(model.NoCap); r != 8 || b != 16 {
		t.Errorf("EffectiveRate without a rule = %g %d", r, b)
	}
}
