package throttle

import (
	"fmt"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func ev(schedule string, index, prio int, launch time.Time, deadline *time.Time) Item {
	return Item{Event: &model.Event{
		ID: fmt.Sprintf("%s.%d", schedule, index), ScheduleID: schedule, Index: index,
		Priority: prio, LaunchAt: launch, Deadline: deadline,
	}}
}

func TestQueue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)

	t.Run("BigScheduleDoesNotHoldBackAnotherByMoreThanOneTurn", func(t *testing.T) {
		q := NewQueue()
		for i := range 100_000 {
			q.Push(ev("A", i, 0, t0, nil))
		}
		// Some of A's events have gone already.
		for range 10 {
			q.Pop()
		}
		q.Push(ev("B", 0, 0, t0.Add(time.Second), nil))
		// One token cycle = one turn of the ring (2 schedules): B goes
		// within the next two tokens.
		got := q.PopN(2)
		if got[0].Event.ScheduleID != "B" && got[1].Event.ScheduleID != "B" {
			t.Fatalf("B's event did not go within one token cycle: got %s, %s", got[0].Event.ID, got[1].Event.ID)
		}
		if q.Len() != 100_000-12+1 {
			t.Fatalf("Len = %d", q.Len())
		}
	})

	t.Run("RoundRobinAcrossSchedules", func(t *testing.T) {
		q := NewQueue()
		for i := range 5 {
			q.Push(ev("A", i, 0, t0, nil))
		}
		for i := range 2 {
			q.Push(ev("B", i, 0, t0, nil))
		}
		q.Push(ev("C", 0, 0, t0, nil))
		var order string
		for q.Len() > 0 {
			it, _ := q.Pop()
			order += it.Event.ScheduleID
		}
		if order != "ABCABAAA" {
			t.Fatalf("order = %s, want ABCABAAA", order)
		}
	})

	t.Run("HigherPriorityFirst", func(t *testing.T) {
		q := NewQueue()
		for i := range 3 {
			q.Push(ev("low", i, 0, t0, nil))
		}
		q.Push(ev("neg", 0, -5, t0, nil))
		for i := range 2 {
			q.Push(ev("high", i, 10, t0.Add(time.Hour), nil))
		}
		q.Push(ev("mid", 0, 5, t0, nil))
		var order []string
		for q.Len() > 0 {
			it, _ := q.Pop()
			order = append(order, it.Event.ScheduleID)
		}
		want := []string{"high", "high", "mid", "low", "low", "low", "neg"}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("order = %v, want %v", order, want)
		}
	})

	t.Run("EarliestDeadlineFirstWithinSchedule", func(t *testing.T) {
		q := NewQueue()
		late := t0.Add(2 * time.Hour)
		early := t0.Add(time.Hour)
		q.Push(ev("A", 0, 0, t0, nil))                                 // no deadline: last
		q.Push(ev("A", 1, 0, t0, &late))                               // later deadline
		q.Push(ev("A", 2, 0, t0.Add(time.Minute), &early))             // earliest deadline, later launch
		q.Push(ev("A", 3, 0, t0, &early))                              // earliest deadline, earlier launch
		q.Push(ev("A", 4, 0, t0.Add(-time.Minute), (*time.Time)(nil))) // no deadline, earlier launch
		var order []int
		for q.Len() > 0 {
			it, _ := q.Pop()
			order = append(order, it.Event.Index)
		}
		if fmt.Sprint(order) != fmt.Sprint([]int{3, 2, 1, 4, 0}) {
			t.Fatalf("order = %v, want [3 2 1 4 0]", order)
		}
	})

	t.Run("DrainEmpties", func(t *testing.T) {
		q := NewQueue()
		for i := range 10 {
			q.Push(ev(fmt.Sprint(i%3), i, i%2, t0, nil))
		}
		if n := len(q.Drain()); n != 10 || q.Len() != 0 {
			t.Fatalf("Drain = %d, Len after = %d", n, q.Len())
		}
		if _, ok := q.Pop(); ok {
			t.Fatal("Pop on empty queue returned an item")
		}
	})
}

func BenchmarkQueuePushPop(b *testing.B) {
	t0 := time.Now()
	q := NewQueue()
	items := make([]Item, 1000)
	for i := range items {
		items[i] = ev(fmt.Sprint(i%50), i, i%3, t0, nil)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Push(items[i%len(items)])
		if q.Len() > 500 {
			q.Pop()
		}
	}
}
