package throttle

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
)

// simEvent is one thing that happens in the simulation.
type simEvent struct {
	at   time.Time
	kind int // simArrive, simDone, simAnswer
	ok   bool
	sent time.Time // for simAnswer: when the request was sent
}

const (
	simArrive = iota // a request reaches the consumer
	simDone          // the consumer finished one
	simAnswer        // its answer reaches the scheduler
)

// simAnswerTime is how long an answer takes to reach the scheduler.
const simAnswerTime = time.Millisecond

type simQueue []simEvent

func (q simQueue) Len() int           { return len(q) }
func (q simQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q simQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simPhase is what the simulation counted at one capacity.
type simPhase struct {
	capacity  int
	converged time.Duration // from the change of capacity; -1 if never
	ok, busy  int           // answers after convergence
	measured  time.Duration // from convergence to the end of the phase
}

// simulate runs the controller of an adaptive policy (min 1, max 100)
// against a consumer that serves at most capacity requests of work (±10%)
// at once and answers 429 beyond it, for each capacity in turn over
// phase of simulated time. A token goes out as soon as the tokens out are
// under the limit and is free again when its answer arrives; transit is
// the time from there to the next request's arrival (the scheduler's
// token cycle). Converged means at most the capacity on the way down, at
// least 90% of it on the way up.
func simulate(seed uint64, capacity []int, phase, work, transit time.Duration) []simPhase {
	rng := rand.New(rand.NewPCG(seed, seed))
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 100}}, start)
	var q simQueue
	out, inFlight := 0, 0
	send := func() {
		for ; out < c.state.Limit; out++ {
			heap.Push(&q, simEvent{at: clock.Now().Add(transit), kind: simArrive, sent: clock.Now()})
		}
		c.tokensOut(out)
	}
	phases := make([]simPhase, len(capacity))
	for i, cp := range capacity {
		phases[i] = simPhase{capacity: cp, converged: -1}
	}
	send()
	for q.Len() > 0 {
		ev := heap.Pop(&q).(simEvent)
		if !ev.at.Before(start.Add(phase * time.Duration(len(capacity)))) {
			break
		}
		clock.Advance(ev.at.Sub(clock.Now()))
		now := clock.Now()
		i := int(now.Sub(start) / phase)
		p := &phases[i]
		since := now.Sub(start.Add(phase * time.Duration(i)))
		switch ev.kind {
		case simArrive:
			inFlight++
			if inFlight > p.capacity {
				inFlight--
				heap.Push(&q, simEvent{at: now.Add(simAnswerTime), kind: simAnswer, sent: ev.sent})
				if p.converged >= 0 {
					p.busy++
				}
				continue
			}
			w := work + time.Duration((rng.Float64()-0.5)*0.2*float64(work))
			heap.Push(&q, simEvent{at: now.Add(w), kind: simDone, sent: ev.sent})
		case simDone:
			inFlight--
			heap.Push(&q, simEvent{at: now.Add(simAnswerTime), kind: simAnswer, ok: true, sent: ev.sent})
			if p.converged >= 0 {
				p.ok++
			}
		case simAnswer:
			o := OutcomeOverloaded
			if ev.ok {
				o = OutcomeOK
			}
			c.observe(o, now.Sub(ev.sent), now)
			out--
			send()
		}
		if p.converged < 0 {
			l := c.state.Limit
			if (i > 0 && capacity[i-1] < p.capacity && l*10 >= p.capacity*9) || ((i == 0 || capacity[i-1] > p.capacity) && l <= p.capacity) {
				p.converged = since
			}
		}
	}
	for i := range phases {
		if phases[i].converged >= 0 {
			phases[i].measured = phase - phases[i].converged
		}
	}
	return phases
}

// TestAdaptiveSimulated: the scenario in simulated time, the
// consumer's capacity going 50 → 10 → 50 concurrent requests of 100 ms.
// Each way the limit converges within 10 s, and after convergence the
// consumer's goodput is at least 90% of its capacity with fewer than 5%
// 429s. The token cycle takes 3 ms (about what it takes on the test
// machine) and the answer 1 ms, so that a limit that stayed at the
// capacity all along would get 100/104 of it: the controller must lose at
// most 3 points more. THROTTLE_TEST_SEED changes the work times.
func TestAdaptiveSimulated(t *testing.T) {
	const work, transit, answer = 100 * time.Millisecond, 3 * time.Millisecond, simAnswerTime
	phases := simulate(testseed.Get(t, "THROTTLE_TEST_SEED", 1), []int{50, 10, 50}, 30*time.Second, work, transit)
	ideal := work.Seconds() / (work + transit + answer).Seconds()
	for i, p := range phases[1:] {
		if p.converged < 0 || p.converged > 10*time.Second {
			t.Errorf("phase %d (capacity %d): converged after %v, want at most 10s", i+1, p.capacity, p.converged)
			continue
		}
		full := float64(p.capacity) * p.measured.Seconds() / work.Seconds()
		good := float64(p.ok) / full
		share := float64(p.busy) / float64(max(p.ok+p.busy, 1))
		t.Logf("capacity %d: converged in %v; then goodput %.1f%%, 429s %.2f%%", p.capacity, p.converged, 100*good, 100*share)
		if good < 0.9 || good < ideal-0.03 {
			t.Errorf("capacity %d: goodput %.1f%% of the capacity after convergence, want at least 90%% and %.1f%% (the token cycle's bound less 3 points)",
				p.capacity, 100*good, 100*(ideal-0.03))
		}
		if share >= 0.05 {
			t.Errorf("capacity %d: %.1f%% 429s after convergence, want under 5%%", p.capacity, 100*share)
		}
	}
}

// simulateReleases runs the controller of an adaptive policy (min 1, max
// 20, no autoRelease) against a consumer that accepts every delivery at
// once, queues the work, does it with workers[i] workers during phase i
// (work each) and then releases the event. A token goes out when the
// tokens out are under the limit and comes back with the release. It
// returns the limit at the end of each phase and the most requests the
// consumer held at once in the last second of each.
func simulateReleases(workers []int, phase, work, transit time.Duration, ignore bool) (limits, held []int) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	c := newAIMD(&model.Policy{ID: "p", Adaptive: &model.AdaptiveLimit{Min: 1, Max: 20}}, start)
	var q simQueue
	out, busy := 0, 0
	var waiting []time.Time // accepted, not started: when each was accepted
	limits, held = make([]int, len(workers)), make([]int, len(workers))
	send := func() {
		for ; out < c.state.Limit; out++ {
			heap.Push(&q, simEvent{at: clock.Now().Add(transit), kind: simArrive, sent: clock.Now()})
		}
		c.tokensOut(out)
	}
	end := start.Add(phase * time.Duration(len(workers)))
	send()
	for q.Len() > 0 {
		ev := heap.Pop(&q).(simEvent)
		if !ev.at.Before(end) {
			break
		}
		clock.Advance(ev.at.Sub(clock.Now()))
		now := clock.Now()
		i := int(now.Sub(start) / phase)
		startWork := func() {
			for busy < workers[i] && len(waiting) > 0 {
				busy++
				heap.Push(&q, simEvent{at: now.Add(work), kind: simDone, sent: waiting[0]})
				waiting = waiting[1:]
			}
		}
		switch ev.kind {
		case simArrive:
			// Accepted: the answer is a 200 at once; the work waits.
			c.observe(OutcomeOK, simAnswerTime, now)
			waiting = append(waiting, now)
		case simDone:
			busy--
			if !ignore {
				c.observeRelease(now.Sub(ev.sent), now)
			}
			out--
			send()
		}
		startWork()
		if now.Sub(start.Add(phase*time.Duration(i))) > phase-time.Second {
			held[i] = max(held[i], busy+len(waiting))
		}
		limits[i] = c.state.Limit
	}
	return limits, held
}

// TestAdaptiveReleaseLatency: a consumer that takes every delivery at once
// and releases it when its workers have done it. Its workers go from 20
// to 5: the deliveries still all succeed, only the time to the release
// grows, and the limit comes down to about twice the workers (a window's
// release latency at most twice the best recent). It fails when the
// release latency is ignored (the limit stays at 20).
func TestAdaptiveReleaseLatency(t *testing.T) {
	const work = 100 * time.Millisecond
	for _, ignore := range []bool{false, true} {
		limits, held := simulateReleases([]int{20, 5}, 20*time.Second, work, 3*time.Millisecond, ignore)
		t.Logf("ignore=%v: limit %v at the end of each phase, the consumer held at most %v in its last second", ignore, limits, held)
		if ignore {
			if limits[1] != 20 {
				t.Errorf("without release latency the limit ended at %d, want 20 (nothing else says the consumer is slower)", limits[1])
			}
			continue
		}
		if limits[0] < 18 {
			t.Errorf("limit %d with 20 workers, want at least 18", limits[0])
		}
		if limits[1] > 2*5+2 || held[1] > 2*5+2 {
			t.Errorf("with 5 workers: limit %d, consumer held %d events at once, want at most %d", limits[1], held[1], 2*5+2)
		}
	}
}
