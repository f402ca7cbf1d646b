package throttle

import (
	"fmt"
	"testing"
	"time"
)

// finishOf pops every item of q, one each per (the policy's time per
// event, the clock moving with it), and returns when the last item of
// schedule s went.
func finishOf(q *Queue, now *time.Time, per time.Duration, s string) time.Duration {
	start := *now
	var last time.Duration
	for {
		it, ok := q.Pop()
		if !ok {
			return last
		}
		*now = now.Add(per)
		if it.Event.ScheduleID == s {
			last = now.Sub(start)
		}
	}
}

// Two schedules share a policy that drains 2 events a second: "bulk"
// launched 20 events first with an hour to go, "tight" 20 with 15 s. Round
// robin gives tight every other token and finishes it after 20 s, past its
// deadline; by slack it goes first and finishes after 10 s, and bulk still
// finishes within its hour.
func TestEDFAcrossSchedulesMeetsTheTightDeadline(t *testing.T) {
	const per = 500 * time.Millisecond
	for _, edf := range []bool{false, true} {
		now := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)
		loose, tight := now.Add(time.Hour), now.Add(15*time.Second)
		q := NewQueue()
		if edf {
			q.SetUrgency(Urgency{Now: func() time.Time { return now }, PerEvent: func() time.Duration { return per }})
		}
		for i := range 20 {
			q.Push(ev("bulk", i, 0, now, &loose))
		}
		for i := range 20 {
			q.Push(ev("tight", i, 0, now, &tight))
		}
		got := finishOf(q, &now, per, "tight")
		switch {
		case !edf && got <= 15*time.Second:
			t.Fatalf("round robin finished tight after %s: the case does not show a miss", got)
		case edf && got > 15*time.Second:
			t.Fatalf("by slack tight finished after %s, past its 15s deadline", got)
		}
		t.Logf("edf %v: tight finished after %s", edf, got)
	}
}

// Events without a deadline keep their turns while no schedule is at
// risk, and priority still comes first: an urgent low-priority schedule
// waits for a higher priority.
func TestEDFKeepsRoundRobinAndPriority(t *testing.T) {
	now := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)
	far := now.Add(time.Hour)
	soon := now.Add(time.Second)
	q := NewQueue()
	q.SetUrgency(Urgency{Now: func() time.Time { return now }, PerEvent: func() time.Duration { return time.Millisecond }})
	q.Push(ev("a", 0, 0, now, nil))
	q.Push(ev("a", 1, 0, now, nil))
	q.Push(ev("b", 0, 0, now, &far))
	q.Push(ev("b", 1, 0, now, &far))
	q.Push(ev("hi", 0, 5, now, nil))
	q.Push(ev("urgent", 0, -1, now, &soon))
	var order []string
	for {
		it, ok := q.Pop()
		if !ok {
			break
		}
		order = append(order, it.Event.ScheduleID)
	}
	want := []string{"hi", "a", "b", "a", "b", "urgent"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

// BenchmarkQueueUrgency is BenchmarkQueuePushPop's mix (50 schedules, 3
// priorities, 500 waiting) with deadlines: none, with urgency off (round
// robin), and ranked by slack (urgency on, a few schedules at risk).
func BenchmarkQueueUrgency(b *testing.B) {
	t0 := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		deadlines bool
		urgency   bool
	}{{"NoDeadlines", false, true}, {"DeadlinesRoundRobin", true, false}, {"DeadlinesBySlack", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			q := NewQueue()
			if tc.urgency {
				q.SetUrgency(Urgency{Now: func() time.Time { return t0 }, PerEvent: func() time.Duration { return time.Millisecond }})
			}
			items := make([]Item, 1000)
			for i := range items {
				var d *time.Time
				if tc.deadlines {
					// Schedules 0-4 have under a second to go: at risk.
					at := t0.Add(time.Duration(i%50) * 100 * time.Millisecond)
					d = &at
				}
				items[i] = ev(fmt.Sprint(i%50), i, i%3, t0, d)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.Push(items[i%len(items)])
				if q.Len() > 500 {
					q.Pop()
				}
			}
		})
	}
}
