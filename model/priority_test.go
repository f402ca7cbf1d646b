package model

import "testing"

func TestPriorityClass(t *testing.T) {
	for p, want := range map[int]string{-100: "low", -1: "low", 0: "default", 1: "high", 1 << 30: "high"} {
		if got := PriorityClass(p); got != want {
			t.Errorf("PriorityClass(%d) = %q, want %q", p, got, want)
		}
	}
}
