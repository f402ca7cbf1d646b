package throttle

import (
	"container/heap"
	"sort"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// Item is one event waiting in (or leaving) a policy bucket.
type Item struct {
	Event *model.Event
	// Shard and Fence say under which queue-shard lease the event was
	// claimed; every write about it carries the fence.
	Shard int
	Fence int64
	// Policy is set by the throttle when the item got a token.
	Policy *model.Policy
	// TokenAt is when the item was granted its token (acquired from the
	// store, a gift, or handed over by a release); zero until then. The
	// wait from LaunchAt to TokenAt is the policy's doing, not lateness.
	TokenAt time.Time
	// Recheck asks the deliverer to read the event's status before sending
	// it (an overdue event taken over from a previous owner of its shard,
	// which may have delivered it: see handler.Config.TakeoverGrace).
	Recheck bool
	// Started, if not nil, is closed once the store write that moves the
	// event to delivering has returned. Config.EarlyDispatch sends an event
	// before that write is durable; the deliverer waits for Started before
	// it writes the delivery's outcome, which would otherwise find the
	// event still scheduled and be lost.
	Started <-chan struct{}
	// from is the bucket the item was taken from for a token, which
	// counts it in transit until it is forwarded (see transit.go).
	from *bucket
}

// Queue orders the waiting events of one policy: higher Priority first;
// within a priority, the schedule most at risk of missing its deadline
// first when one is (see SetUrgency and pick), else round-robin across
// schedules (one event per schedule per turn, so a schedule with 100,000
// waiting events delays another schedule's event by at most one turn of
// the ring); within a schedule, earliest deadline first, then earliest
// launch, then index.
//
// Queue is not safe for concurrent use.
type Queue struct {
	// keyOf names the ring entry of an event: its schedule, or its
	// concurrency key value for a keyed policy (see NewKeyedQueue).
	keyOf  func(*model.Event) string
	levels map[int]*level
	prios  []int // priorities with waiting events, highest first
	n      int
	urg    Urgency
}

// Urgency is what the queue needs to rank schedules by slack: the time
// now and the policy's time per event (1 / Policy.Throughput; 0 when not
// known yet).
type Urgency struct {
	Now      func() time.Time
	PerEvent func() time.Duration
}

// SetUrgency turns on the earliest-deadline-first order across schedules
// (see pick); without it the queue round-robins.
func (q *Queue) SetUrgency(u Urgency) { q.urg = u }

type level struct {
	ring  ring
	byKey map[string]*schedQ
	n     int // items
	dl    int // items with a deadline
}

type schedQ struct {
	key   string
	items itemHeap
}

// NewQueue returns an empty queue.
func NewQueue() *Queue { return NewKeyedQueue(nil) }

// NewKeyedQueue returns an empty queue whose round robin runs across the
// values of keyOf instead of schedules (nil: schedules).
func NewKeyedQueue(keyOf func(*model.Event) string) *Queue {
	if keyOf == nil {
		keyOf = func(e *model.Event) string { return e.ScheduleID }
	}
	return &Queue{keyOf: keyOf, levels: map[int]*level{}}
}

// Len is the number of waiting items.
func (q *Queue) Len() int { return q.n }

// Push adds an item.
func (q *Queue) Push(it Item) {
	p := it.Event.Priority
	lv := q.levels[p]
	if lv == nil {
		lv = &level{byKey: map[string]*schedQ{}}
		q.levels[p] = lv
		i := sort.Search(len(q.prios), func(i int) bool { return q.prios[i] < p })
		q.prios = append(q.prios, 0)
		copy(q.prios[i+1:], q.prios[i:])
		q.prios[i] = p
	}
	k := q.keyOf(it.Event)
	sq := lv.byKey[k]
	if sq == nil {
		// A schedule that had nothing waiting joins the end of the ring:
		// it is served within one turn. It costs nothing once empty.
		sq = &schedQ{key: k}
		lv.byKey[sq.key] = sq
		lv.ring.push(sq)
	}
	heap.Push(&sq.items, it)
	q.n++
	lv.n++
	if it.Event.Deadline != nil {
		lv.dl++
	}
}

// slack is how long sq's earliest deadline leaves once its waiting events
// are drained at per each: its deadline - now - waiting × per. ok is false
// when nothing of sq has a deadline.
func (sq *schedQ) slack(now time.Time, per time.Duration) (time.Duration, bool) {
	if sq.items.Len() == 0 || sq.items[0].Event.Deadline == nil {
		return 0, false
	}
	return sq.items[0].Event.Deadline.Sub(now) - time.Duration(sq.items.Len())*per, true
}

// moreUrgent is the one order across schedules: slack a before slack b,
// the earlier turn of the ring on a tie (ia, ib: ring positions).
func moreUrgent(a time.Duration, ia int, b time.Duration, ib int) bool {
	if a != b {
		return a < b
	}
	return ia < ib
}

// pick removes from lv's ring and returns the schedule queue whose item
// goes next among those ok accepts (nil: all). With SetUrgency, a
// schedule is urgent when its slack is less than the time the whole level
// takes to drain (round robin could then make it miss), or, while the
// policy's time per event is unknown, whenever it has a deadline; the
// most urgent (moreUrgent) goes first. Otherwise the ring turns. Events
// without a deadline are never urgent: they are served when no schedule
// is, in ring order.
func (q *Queue) pick(lv *level, ok func(string) bool) *schedQ {
	if q.urg.Now != nil && lv.dl > 0 {
		now, per := q.urg.Now(), time.Duration(0)
		if q.urg.PerEvent != nil {
			per = q.urg.PerEvent()
		}
		horizon := time.Duration(lv.n) * per
		best, bestSlack := -1, time.Duration(0)
		for i := lv.ring.head; i < len(lv.ring.buf); i++ {
			sq := lv.ring.buf[i]
			if ok != nil && !ok(sq.key) {
				continue
			}
			s, has := sq.slack(now, per)
			if !has || per > 0 && s >= horizon {
				continue
			}
			if best < 0 || moreUrgent(s, i, bestSlack, best) {
				best, bestSlack = i, s
			}
		}
		if best >= 0 {
			return lv.ring.take(best)
		}
	}
	for range lv.ring.len() {
		sq := lv.ring.pop()
		if ok == nil || ok(sq.key) {
			return sq
		}
		lv.ring.push(sq)
	}
	return nil
}

// popFrom pops the next item of sq, at level p (index pi in q.prios),
// keeping the counts and the ring.
func (q *Queue) popFrom(lv *level, sq *schedQ, p, pi int) Item {
	it := heap.Pop(&sq.items).(Item)
	q.n--
	lv.n--
	if it.Event.Deadline != nil {
		lv.dl--
	}
	if sq.items.Len() > 0 {
		lv.ring.push(sq)
	} else {
		delete(lv.byKey, sq.key)
	}
	if lv.ring.len() == 0 {
		delete(q.levels, p)
		q.prios = append(q.prios[:pi:pi], q.prios[pi+1:]...)
	}
	return it
}

// Pop removes and returns the next item; ok is false when the queue is empty.
func (q *Queue) Pop() (it Item, ok bool) {
	if q.n == 0 {
		return Item{}, false
	}
	p := q.prios[0]
	lv := q.levels[p]
	return q.popFrom(lv, q.pick(lv, nil), p, 0), true
}

// PopEligible removes and returns the next item whose ring key ok accepts,
// with that key: the highest priority with such an item, and within it the
// first such key in ring order (keys passed over keep their turn). It looks
// at each waiting key at most once.
func (q *Queue) PopEligible(ok func(key string) bool) (it Item, key string, found bool) {
	for pi := 0; pi < len(q.prios); pi++ {
		p := q.prios[pi]
		lv := q.levels[p]
		if sq := q.pick(lv, ok); sq != nil {
			return q.popFrom(lv, sq, p, pi), sq.key, true
		}
	}
	return Item{}, "", false
}

// CountEligible is how many waiting items PopEligible could hand out, up
// to limit, if each key k may take room(k) more. It looks at every waiting
// key.
func (q *Queue) CountEligible(room func(key string) int, limit int) int {
	n := 0
	seen := map[string]int{} // a key waits at several priorities
	for _, lv := range q.levels {
		for k, sq := range lv.byKey {
			r, ok := seen[k]
			if !ok {
				r = room(k)
			}
			take := max(0, min(r, sq.items.Len()))
			seen[k] = r - take
			n += take
			if n >= limit {
				return limit
			}
		}
	}
	return n
}

// PopN removes up to n items in order.
func (q *Queue) PopN(n int) []Item {
	if n > q.n {
		n = q.n
	}
	out := make([]Item, 0, n)
	for range n {
		it, _ := q.Pop()
		out = append(out, it)
	}
	return out
}

// Oldest returns the earliest LaunchAt of the waiting items per priority.
// It looks at every item: call it now and then, not per event.
func (q *Queue) Oldest() map[int]time.Time {
	out := make(map[int]time.Time, len(q.levels))
	for p, lv := range q.levels {
		var first time.Time
		for _, sq := range lv.byKey {
			for _, it := range sq.items {
				if first.IsZero() || it.Event.LaunchAt.Before(first) {
					first = it.Event.LaunchAt
				}
			}
		}
		out[p] = first
	}
	return out
}

// Drain removes and returns every item (in no particular order).
func (q *Queue) Drain() []Item {
	out := make([]Item, 0, q.n)
	for _, lv := range q.levels {
		for _, sq := range lv.byKey {
			out = append(out, sq.items...)
		}
	}
	q.levels = map[int]*level{}
	q.prios = nil
	q.n = 0
	return out
}

// ring is a FIFO of schedule queues.
type ring struct {
	buf  []*schedQ
	head int
}

func (r *ring) len() int { return len(r.buf) - r.head }

func (r *ring) push(s *schedQ) { r.buf = append(r.buf, s) }

// take removes and returns the entry at index i of buf (head <= i).
func (r *ring) take(i int) *schedQ {
	s := r.buf[i]
	copy(r.buf[i:], r.buf[i+1:])
	r.buf[len(r.buf)-1] = nil
	r.buf = r.buf[:len(r.buf)-1]
	return s
}

func (r *ring) pop() *schedQ {
	s := r.buf[r.head]
	r.buf[r.head] = nil
	r.head++
	if r.head > 64 && r.head*2 >= len(r.buf) {
		n := copy(r.buf, r.buf[r.head:])
		clear(r.buf[n:])
		r.buf = r.buf[:n]
		r.head = 0
	}
	return s
}

// itemHeap orders one schedule's items: earliest deadline first (events
// without a deadline last), then launch time, then index.
type itemHeap []Item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	a, b := h[i].Event, h[j].Event
	switch {
	case a.Deadline != nil && b.Deadline != nil:
		if !a.Deadline.Equal(*b.Deadline) {
			return a.Deadline.Before(*b.Deadline)
		}
	case a.Deadline != nil:
		return true
	case b.Deadline != nil:
		return false
	}
	if !a.LaunchAt.Equal(b.LaunchAt) {
		return a.LaunchAt.Before(b.LaunchAt)
	}
	if a.Index != b.Index {
		return a.Index < b.Index
	}
	return a.ID < b.ID
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(Item)) }
func (h *itemHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = Item{}
	*h = old[:n-1]
	return it
}
