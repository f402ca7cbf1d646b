package app

import (
	"math"
	"runtime"
	"slices"
	"testing"
	"time"
)

const mib = 1 << 20

// The cap follows the median marked heap of the window, not a burst in it;
// half the last heap when the live heap grew; the ceiling while the window
// is short, when the cap would pass it, and with the collector off.
func TestHeapCapLimit(t *testing.T) {
	steady := func(last uint64) []uint64 {
		w := []uint64{26 * mib, 28 * mib, 27 * mib, 29 * mib, 26 * mib, 30 * mib, 27 * mib, 28 * mib}
		return append(w, last)
	}
	capOf := func(typical, other uint64, gcPercent int) int64 {
		goal := float64(typical) * (1 + float64(gcPercent)/100)
		return int64(goal + goal/heapCapSlack + float64(other))
	}
	for _, tc := range []struct {
		name      string
		window    []uint64
		gcPercent int
		ceiling   int64
		want      int64
	}{
		{"burst in the last collection", steady(40 * mib), 400, math.MaxInt64, capOf(28*mib, 8*mib, 400)},
		{"burst earlier", []uint64{26 * mib, 28 * mib, 40 * mib, 29 * mib, 26 * mib, 30 * mib, 27 * mib, 28 * mib, 27 * mib}, 400, math.MaxInt64, capOf(28*mib, 8*mib, 400)},
		{"live heap tripled", steady(90 * mib), 400, math.MaxInt64, capOf(45*mib, 8*mib, 400)},
		{"GOGC 100", steady(28 * mib), 100, math.MaxInt64, capOf(28*mib, 8*mib, 100)},
		{"under the ceiling", steady(28 * mib), 400, 100 * mib, 100 * mib},
		{"window short", steady(40 * mib)[1:], 400, math.MaxInt64, math.MaxInt64},
		{"collector off", steady(40 * mib), -1, 2 << 30, 2 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heapCapLimit(tc.window, 8*mib, tc.gcPercent, tc.ceiling); got != tc.want {
				t.Errorf("heapCapLimit = %d MiB, want %d MiB", got/mib, tc.want/mib)
			}
		})
	}
}

// Each observation moves the window on by one collection and sets its
// limit; stop puts the ceiling back once and ends the observations.
func TestHeapCapObserve(t *testing.T) {
	marks := []uint64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110}
	var i int
	var set []int64
	h := &heapCap{gcPercent: 400, ceiling: math.MaxInt64,
		read: func() (uint64, uint64) { i++; return marks[i-1] * mib, 0 },
		set:  func(n int64) { set = append(set, n) }}
	for range marks {
		if !h.observe() {
			t.Fatal("observe stopped before stop")
		}
	}
	if want := marks[len(marks)-heapCapWindow:]; !slices.Equal(h.window, scaled(want)) {
		t.Errorf("window %v, want the last %d collections", h.window, heapCapWindow)
	}
	if len(set) != len(marks) || set[heapCapWindow-2] != math.MaxInt64 || set[len(set)-1] == math.MaxInt64 {
		t.Fatalf("limits set %v: want the ceiling until the window fills, then a cap", set)
	}
	h.stop()
	h.stop()
	if h.observe() {
		t.Error("observe after stop")
	}
	if n := len(set); n != len(marks)+1 || set[n-1] != math.MaxInt64 {
		t.Errorf("after stop, limits set %v: want the ceiling once more", set[len(marks):])
	}
}

func scaled(v []uint64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = x * mib
	}
	return out
}

// A collection runs the observation, and it arms itself for the next one.
func TestHeapCapArmed(t *testing.T) {
	seen := make(chan struct{}, 1)
	h := &heapCap{gcPercent: 400, ceiling: math.MaxInt64,
		read: func() (uint64, uint64) { return mib, 0 },
		set: func(int64) {
			select {
			case seen <- struct{}{}:
			default:
			}
		}}
	armHeapCap(h)
	defer h.stop()
	for n := range 3 {
		deadline := time.After(10 * time.Second)
		for waiting := true; waiting; {
			runtime.GC()
			select {
			case <-seen:
				waiting = false
			case <-deadline:
				t.Fatalf("no observation after collection %d", n+1)
			default:
				runtime.Gosched()
			}
		}
	}
}
