package app

import (
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
)

// The collector counts what is allocated while it marks as marked, so a
// collection that overlaps a burst of allocation (a claim of thousands of
// events, a large commit) ends with a marked heap well above the live one,
// and the next heap goal, (1 + GOGC/100) times it, follows: at GOGC 400 a
// burst of 10 MiB during a mark lets the heap grow 50 MiB more. The longer
// a workload runs, the more collections it has and the larger the largest
// of these bursts, so a process's peak would grow with the length of what
// it does rather than with what it holds. The heap cap keeps the goal at
// (1 + GOGC/100) times the marked heap typical of the last collections
// instead, through the soft memory limit, under the limit in force.

// heapCapWindow is the number of collections whose marked heaps make the
// typical one.
const heapCapWindow = 9

// heapCapSlack is the share of the capped goal added for the room the
// heap's spans leave unused and the headroom (3%) the runtime keeps below
// the goal that the soft memory limit makes: both count against the limit
// and not against the goal; the unused room read right after a collection,
// before the sweep, is more than it is later.
const heapCapSlack = 8 // 1/8

// heapCapLimit returns the soft memory limit that caps the heap goal after
// the collections whose marked heaps are window (oldest first): typical is
// their median, or half the last if that is more (a live heap that doubled
// is not a burst), times 1 + gcPercent/100, with heapCapSlack more, plus
// other, the runtime's memory besides the heap (stacks, metadata). Ceiling
// (the limit in force) when that is lower, or while the window is short of
// heapCapWindow.
func heapCapLimit(window []uint64, other uint64, gcPercent int, ceiling int64) int64 {
	if len(window) < heapCapWindow || gcPercent < 0 {
		return ceiling
	}
	sorted := slices.Sorted(slices.Values(window))
	typical := max(sorted[len(sorted)/2], window[len(window)-1]/2)
	goal := float64(typical) * (1 + float64(gcPercent)/100)
	limit := goal + goal/heapCapSlack + float64(other)
	if limit >= float64(ceiling) {
		return ceiling
	}
	return int64(limit)
}

// heapCap sets the soft memory limit after each collection (heapCapLimit).
type heapCap struct {
	gcPercent int
	ceiling   int64
	read      func() (marked, other uint64)
	set       func(int64)

	mu      sync.Mutex
	window  []uint64
	stopped bool
}

// observe takes the marked heap and the other memory after a collection
// and sets the limit; false once stopped.
func (h *heapCap) observe() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	marked, other := h.read()
	if len(h.window) == heapCapWindow {
		h.window = slices.Delete(h.window, 0, 1)
	}
	h.window = append(h.window, marked)
	h.set(heapCapLimit(h.window, other, h.gcPercent, h.ceiling))
	return true
}

// stop ends the observations and puts the ceiling back.
func (h *heapCap) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		h.set(h.ceiling)
	}
}

// CapHeap keeps the heap goal at 1 + GOGC/100 times the marked heap typical
// of the recent collections (see heapCapLimit), below the soft memory
// limit of mem, after each collection until the returned func is called.
// Nothing is done with the collector off (GCPercent < 0).
func CapHeap(mem MemorySettings) (stop func()) {
	if mem.GCPercent < 0 {
		return func() {}
	}
	h := &heapCap{gcPercent: mem.GCPercent, ceiling: mem.Limit, read: readHeapMemory,
		set: func(n int64) { debug.SetMemoryLimit(n) }}
	armHeapCap(h)
	return h.stop
}

// armHeapCap has h observe after the next collection, and so on while it
// runs: a cleanup runs once the collection found its object unreachable.
func armHeapCap(h *heapCap) {
	sentinel := new(heapCapSentinel)
	runtime.AddCleanup(sentinel, func(h *heapCap) {
		if h.observe() {
			armHeapCap(h)
		}
	}, h)
}

// heapCapSentinel is big enough not to be a tiny allocation, whose
// cleanups may never run.
type heapCapSentinel struct {
	_ [2]*byte
}

// readHeapMemory returns the heap marked by the last collection and the
// runtime's memory besides the heap (stacks, metadata).
func readHeapMemory() (marked, other uint64) {
	names := []string{
		"/gc/heap/live:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
	}
	s := make([]rtmetrics.Sample, len(names))
	for i, name := range names {
		s[i].Name = name
	}
	rtmetrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == rtmetrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	heap := v[2] + v[3] + v[4] + v[5]
	if v[1] > heap {
		other = v[1] - heap
	}
	return v[0], other
}
