package handler

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/throttle"
)

// delivered is a delivered batch of n events (throttled ones hold a token
// of a policy).
func delivered(prefix string, n int, throttled bool) *outcomes {
	o := &outcomes{}
	for i := range n {
		it := throttle.Item{Event: &model.Event{ID: fmt.Sprintf("%s.%d", prefix, i)}}
		if throttled {
			it.Policy = &model.Policy{ID: "pol_a"}
		}
		o.items = append(o.items, it)
		o.results = append(o.results, delivery.Result{})
		o.ts = append(o.ts, store.EventTransition{ID: it.Event.ID})
	}
	return o
}

// takeAsync runs b.take(max) and delivers its batch.
func takeAsync(b *outbox, max int) <-chan *outcomes {
	ch := make(chan *outcomes, 1)
	go func() {
		o, _ := b.take(max)
		ch <- o
	}()
	return ch
}

// within waits for a batch; it fails the test if none comes (the take is
// still holding back).
func within(t *testing.T, ch <-chan *outcomes, what string) *outcomes {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: take still waiting", what)
		return nil
	}
}

// holdBack is how long take would wait now for more outcomes.
func holdBack(b *outbox, max int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.holdBack(max)
}

// Outcomes of unthrottled deliveries made one at a time share one write:
// take holds the first back (the linger here is an hour) until the queued
// events make a full write, then writes them together.
func TestOutboxLingerGroupsUnthrottledOutcomes(t *testing.T) {
	b := newOutbox(1000, time.Hour, nil)
	b.put(delivered("a", 1, false))
	if d := holdBack(b, 3); d <= 0 || d > time.Hour {
		t.Fatalf("one unthrottled outcome queued: take would wait %v, want up to the linger (1h)", d)
	}
	b.put(delivered("b", 1, false))
	b.put(delivered("c", 1, false)) // 3 queued: a full write
	if d := holdBack(b, 3); d > 0 {
		t.Fatalf("a full write queued: take would still wait %v", d)
	}
	o := within(t, takeAsync(b, 3), "a full write queued")
	if len(o.items) != 3 || o.items[0].Event.ID != "a.0" || o.items[2].Event.ID != "c.0" {
		t.Fatalf("take returned %d outcomes; want the 3 queued in order", len(o.items))
	}
	if len(o.ts) != 3 || len(o.results) != 3 {
		t.Fatalf("merged batch has %d transitions and %d results for %d items", len(o.ts), len(o.results), len(o.items))
	}
	if b.waiting != 0 || b.events != 3 {
		t.Fatalf("after the take: %d queued, %d queued or being written; want 0 and 3", b.waiting, b.events)
	}
}

// The linger ends: a lone outcome is written once it has waited linger.
func TestOutboxLingerEnds(t *testing.T) {
	b := newOutbox(1000, 5*time.Millisecond, nil)
	put := time.Now()
	b.put(delivered("a", 1, false))
	o := within(t, takeAsync(b, 500), "lone outcome")
	if len(o.items) != 1 {
		t.Fatalf("take returned %d outcomes, want 1", len(o.items))
	}
	if waited := time.Since(put); waited < 5*time.Millisecond {
		t.Fatalf("a lone unthrottled outcome was taken after %v, before its linger of 5ms", waited)
	}
}

// Outcomes of throttled events (their tokens wait for the write), a
// closing box, and a box without linger are written at once.
func TestOutboxNoLinger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger time.Duration
		batch  []*outcomes
		close  bool
	}{
		{"throttled", time.Hour, []*outcomes{delivered("a", 1, false), delivered("p", 1, true)}, false},
		{"closing", time.Hour, []*outcomes{delivered("a", 1, false)}, true},
		{"linger off", -1, []*outcomes{delivered("a", 1, false)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newOutbox(1000, tc.linger, nil)
			n := 0
			for _, o := range tc.batch {
				b.put(o)
				n += len(o.items)
			}
			if tc.close {
				b.close()
			}
			o := within(t, takeAsync(b, 500), tc.name)
			if len(o.items) != n {
				t.Fatalf("take returned %d outcomes, want %d", len(o.items), n)
			}
		})
	}
}

// While due events wait for a delivery slot, unthrottled outcomes give way
// to their sending, full writes too, for up to ten lingers and while the
// box is at most three quarters full; throttled ones (their tokens wait) do not.
func TestOutboxGivesWayToSending(t *testing.T) {
	var busy atomic.Bool
	newBox := func() *outbox {
		busy.Store(true)
		return newOutbox(10, time.Hour, busy.Load)
	}
	t.Run("HoldsFullWriteWhileBusy", func(t *testing.T) {
		b := newBox()
		b.put(delivered("a", 3, false)) // a full write of 3
		if d := holdBack(b, 3); d <= 0 {
			t.Fatalf("due events wait: a full write would go now; want it held")
		}
		busy.Store(false)
		if d := holdBack(b, 3); d > 0 {
			t.Fatalf("nothing waits any more: a full write would still wait %v", d)
		}
	})
	t.Run("WrittenWhenSendingEnds", func(t *testing.T) {
		b := newBox()
		b.put(delivered("a", 3, false))
		ch := takeAsync(b, 3)
		holding(t, b)
		busy.Store(false)
		b.put(delivered("b", 1, false)) // the last delivery's outcome
		if o := within(t, ch, "sending ended"); len(o.items) != 3 {
			t.Fatalf("take returned %d outcomes, want the full write of 3", len(o.items))
		}
	})
	t.Run("AtMostTenLingers", func(t *testing.T) {
		b := newBox()
		b.put(delivered("a", 3, false))
		b.mu.Lock()
		b.q[0].put = time.Now().Add(-busyLingers * b.linger)
		b.mu.Unlock()
		if d := holdBack(b, 3); d > 0 {
			t.Fatalf("held for ten lingers already: would wait %v more", d)
		}
	})
	t.Run("FullerThanThreeQuartersWrites", func(t *testing.T) {
		b := newBox()
		b.put(delivered("a", 7, false)) // three quarters of 10, rounded down
		if d := holdBack(b, 3); d <= 0 {
			t.Fatalf("box three quarters full: a full write would go now; want it held")
		}
		b.put(delivered("b", 1, false))
		if d := holdBack(b, 3); d > 0 {
			t.Fatalf("box more than three quarters full: would wait %v", d)
		}
	})
	t.Run("ThrottledNotHeld", func(t *testing.T) {
		b := newBox()
		b.put(delivered("p", 1, true))
		if d := holdBack(b, 3); d > 0 {
			t.Fatalf("a throttled outcome would wait %v while due events wait", d)
		}
	})
}

// holding waits until a take holds b's outcomes back (its timer armed).
func holding(t *testing.T, b *outbox) {
	t.Helper()
	for start := time.Now(); ; runtime.Gosched() {
		b.mu.Lock()
		armed := b.timer != nil
		b.mu.Unlock()
		if armed {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("take never held the outcomes back")
		}
	}
}
