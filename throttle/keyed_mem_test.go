package throttle

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/schedulerd/schedulerd/model"
)

// customer is a payload whose /customerId is k.
func customer(k string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"customerId":%q}`, k))
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkKeyedBytesPerKey measures what an active key value costs the
// owner of a keyed policy: its entry in the queue's round robin (one
// waiting event) and in the holders (one token out), not counting the
// events themselves; and what is left once every key went idle.
func BenchmarkKeyedBytesPerKey(b *testing.B) {
	const keys = 20_000
	p := &model.Policy{ConcurrencyKey: "/customerId", MaxInFlight: 1}
	waiting := make([]Item, keys)
	keyOfWaiting := make([]string, keys)
	for i := range waiting {
		k := fmt.Sprint("customer-", i)
		waiting[i] = Item{Event: &model.Event{ID: fmt.Sprint("w", i), Payload: customer(k)}}
		keyOfWaiting[i] = k
	}
	heldIDs := make([]string, keys)
	for i := range heldIDs {
		heldIDs[i] = fmt.Sprint("h", i)
	}
	for range b.N {
		q := NewKeyedQueue(func(e *model.Event) string { return keyOf(p, e) })
		h := holders{loaded: true, byID: map[string]string{}, perKey: map[string]int{}}
		before := heapInUse()
		for i, it := range waiting {
			q.Push(it)
			h.add(heldIDs[i], keyOfWaiting[i])
		}
		active := heapInUse()
		for q.Len() > 0 {
			q.Pop()
		}
		for _, id := range heldIDs {
			h.remove(id)
		}
		idle := heapInUse()
		b.ReportMetric(float64(int64(active)-int64(before))/keys, "B/active-key")
		b.ReportMetric(float64(int64(idle)-int64(before))/keys, "B/idle-key")
		runtime.KeepAlive(q)
		runtime.KeepAlive(&h)
	}
	// Allocations of a key going active (one event waits, gets its token)
	// and idle again, in a queue that already serves other keys.
	q := NewKeyedQueue(func(e *model.Event) string { return keyOf(p, e) })
	h := holders{loaded: true, byID: map[string]string{}, perKey: map[string]int{}}
	q.Push(Item{Event: &model.Event{ID: "other", Payload: customer("other")}})
	h.add("other-held", "other")
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		it := waiting[i%keys]
		i++
		q.Push(it)
		got, k, _ := q.PopEligible(func(k string) bool { return k != "other" })
		h.add(got.Event.ID, k)
		h.remove(got.Event.ID)
	})
	b.ReportMetric(allocs, "allocs/activation")
}

// TestKeyedIdleKeysDropped: once a key has nothing waiting and nothing out,
// neither the queue nor the holders keep anything of it.
func TestKeyedIdleKeysDropped(t *testing.T) {
	p := &model.Policy{ConcurrencyKey: "/customerId", MaxInFlight: 1}
	q := NewKeyedQueue(func(e *model.Event) string { return keyOf(p, e) })
	h := holders{loaded: true, byID: map[string]string{}, perKey: map[string]int{}}
	for i := range 100 {
		k := fmt.Sprint("c", i%10)
		q.Push(Item{Event: &model.Event{ID: fmt.Sprint(i), Payload: customer(k), Priority: i % 3}})
	}
	for q.Len() > 0 {
		it, k, ok := q.PopEligible(func(string) bool { return true })
		if !ok {
			t.Fatal("nothing eligible while events wait")
		}
		h.add(it.Event.ID, k)
	}
	if len(q.levels) != 0 || len(q.prios) != 0 {
		t.Fatalf("empty queue keeps %d levels, %d priorities", len(q.levels), len(q.prios))
	}
	if len(h.perKey) != 10 {
		t.Fatalf("%d keys hold tokens, want 10", len(h.perKey))
	}
	for i := range 100 {
		h.remove(fmt.Sprint(i))
	}
	if len(h.perKey) != 0 || len(h.byID) != 0 {
		t.Fatalf("holders keep %d keys, %d events after every release", len(h.perKey), len(h.byID))
	}
}
