package handler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/throttle"
)

// oneShardHeld holds shard 0 under fence 1.
type oneShardHeld struct{}

func (oneShardHeld) Held() map[int]int64      { return map[int]int64{0: 1} }
func (oneShardHeld) Owns(s int, f int64) bool { return s == 0 && f == 1 }
func (oneShardHeld) Changed() <-chan struct{} { return nil }
func (oneShardHeld) Refence(int)              {}

// quietThrottle hands on the events sent on out and is told of
// deliveries and of the events forwarded.
type quietThrottle struct {
	Throttle
	out chan throttle.Item
}

func (quietThrottle) Delivered(...string)                {}
func (t quietThrottle) Dispatched() <-chan throttle.Item { return t.out }
func (quietThrottle) Forwarded([]throttle.Item)          {}

// signalDeliverer reports each event it is given on got.
type signalDeliverer struct{ got chan string }

func (d signalDeliverer) Deliver(_ context.Context, evs []*model.Event) []delivery.Result {
	for _, e := range evs {
		d.got <- e.ID
	}
	return make([]delivery.Result, len(evs))
}

// The timer starts the delivery of the unthrottled events it launches
// itself: a wake-up of the timer is not also one of the dispatcher. Here
// no dispatcher runs, only the timer loop.
func TestTimerStartsDeliveriesItself(t *testing.T) {
	h, clock, got := loneLoopHandler(t, (*Handler).timerLoop)
	ev := wakeEvent(clock.Now(), "")
	h.schedule([]throttle.Item{{Event: ev, Shard: 0, Fence: 1}})
	wantDelivered(t, h, got, ev.ID, "a due unthrottled event was not delivered by the timer alone")
}

// So does the loop that takes the events that hold a token from the
// throttle.
func TestForwardStartsDeliveriesItself(t *testing.T) {
	h, clock, got := loneLoopHandler(t, (*Handler).forward)
	ev := wakeEvent(clock.Now(), "pol_a")
	h.thr.(quietThrottle).out <- throttle.Item{Event: ev, Shard: 0, Fence: 1, Policy: &model.Policy{ID: "pol_a"}}
	wantDelivered(t, h, got, ev.ID, "an event holding a token was not delivered by the forwarding loop alone")
}

// loneLoopHandler returns a handler holding shard 0 under fence 1 whose
// only running loop is loop (a method expression), and the
// channel its deliverer reports events on.
func loneLoopHandler(t *testing.T, loop func(*Handler)) (*Handler, *clockwork.FakeClock, chan string) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	got := make(chan string, 4)
	h, err := New(Config{LaunchGap: -1}, Deps{
		Store:      struct{ Store }{},
		Shards:     oneShardHeld{},
		Throttle:   quietThrottle{out: make(chan throttle.Item, 1)},
		Deliverers: map[model.TargetType]Deliverer{model.TargetHTTP: signalDeliverer{got: got}},
		Clock:      clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	h.stopCh, h.workCtx = stop, context.Background()
	h.owned.Store(&map[int]int64{0: 1})
	var loops sync.WaitGroup
	loops.Go(func() { loop(h) })
	t.Cleanup(func() {
		close(stop)
		loops.Wait()
		h.deliveries.Wait()
	})
	return h, clock, got
}

func wakeEvent(at time.Time, policy string) *model.Event {
	return &model.Event{ID: "ev.0", TenantID: "ten_a", ScheduleID: "sch_a", LaunchAt: at, PolicyID: policy,
		Status: model.EventScheduled, Fence: 1, Target: model.Target{Type: model.TargetHTTP, URL: "http://consumer.test/e"}}
}

func wantDelivered(t *testing.T, h *Handler, got <-chan string, id, msg string) {
	t.Helper()
	select {
	case g := <-got:
		if g != id {
			t.Fatalf("delivered %s, want %s", g, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s (%d queued for the dispatcher)", msg, h.queue.Len())
	}
}
