package model

import (
	"testing"
	"time"
)

func TestPolicyThroughput(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
		want float64
		ok   bool
	}{
		{"unknown", Policy{MaxInFlight: 10}, 0, false},
		{"rate only", Policy{MaxInFlight: 10, RatePerSecond: 5}, 5, true},
		{"hold only", Policy{MaxInFlight: 10, HoldTime: 2 * time.Second}, 5, true},
		{"hold below rate", Policy{MaxInFlight: 10, HoldTime: 2 * time.Second, RatePerSecond: 50}, 5, true},
		{"rate below hold", Policy{MaxInFlight: 10, HoldTime: 100 * time.Millisecond, RatePerSecond: 50}, 50, true},
		{"adaptive limit", Policy{MaxInFlight: 10, Adaptive: &AdaptiveLimit{Min: 1, Max: 10}, EffectiveLimit: 4, HoldTime: time.Second}, 4, true},
	}
	for _, tc := range cases {
		got, ok := tc.p.Throughput()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Throughput() = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	p := Policy{MaxInFlight: 10, HoldTime: time.Second}
	if d, ok := p.DrainTime(100); !ok || d != 10*time.Second {
		t.Errorf("DrainTime(100) = %v, %v; want 10s", d, ok)
	}
}
