package gopool

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
)

// within fails the test when ch is not closed or sent on within d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

func (p *Pool) started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

func TestIdleGoroutineIsReused(t *testing.T) {
	p := New(time.Minute)
	idle := make(chan struct{}, 1)
	p.onIdle = func() { idle <- struct{}{} }
	for i := range 100 {
		ran := make(chan struct{})
		p.Go(func() { close(ran) })
		within(t, ran, 10*time.Second, "function "+strconv.Itoa(i))
		within(t, idle, 10*time.Second, "idle after "+strconv.Itoa(i))
	}
	if n := p.started(); n != 1 {
		t.Fatalf("%d goroutines started for 100 functions one after another, want 1", n)
	}
}

// Go never waits for a busy goroutine: n functions that each wait for
// all n to have started all run.
func TestGoNeverWaits(t *testing.T) {
	const n = 50
	p := New(time.Minute)
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	for range n {
		p.Go(func() {
			started.Done()
			<-release
		})
	}
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	within(t, all, 10*time.Second, "all functions running at once")
	close(release)
	if got := p.started(); got != n {
		t.Fatalf("%d goroutines for %d functions running at once, want %d", got, n, n)
	}
}

func TestIdleGoroutineEnds(t *testing.T) {
	p := New(time.Millisecond)
	retired := make(chan struct{}, 1)
	p.onRetire = func() { retired <- struct{}{} }
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	within(t, ran, 10*time.Second, "function")
	within(t, retired, 10*time.Second, "idle goroutine's end")
	p.mu.Lock()
	left := len(p.ready)
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d idle goroutines listed after the only one ended", left)
	}
	again := make(chan struct{})
	p.Go(func() { close(again) })
	within(t, again, 10*time.Second, "function after the end")
	if n := p.started(); n != 2 {
		t.Fatalf("%d goroutines started, want 2 (the first ended)", n)
	}
}

// Every function runs exactly once while idle goroutines end at random
// moments around new work (GOPOOL_SEED picks the timing).
func TestEveryFunctionRunsOnce(t *testing.T) {
	seed := testseed.Get(t, "GOPOOL_SEED", 1)
	rng := rand.New(rand.NewPCG(seed, seed))
	const n = 2000
	p := New(time.Millisecond)
	var runs [n]atomic.Int32
	var done sync.WaitGroup
	done.Add(n)
	for i := range n {
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond) // around the idle time
		}
		p.Go(func() {
			runs[i].Add(1)
			done.Done()
		})
	}
	all := make(chan struct{})
	go func() { done.Wait(); close(all) }()
	within(t, all, 30*time.Second, "all functions (seed "+strconv.FormatUint(seed, 10)+")")
	for i := range runs {
		if c := runs[i].Load(); c != 1 {
			t.Fatalf("function %d ran %d times, want 1 (seed %d)", i, c, seed)
		}
	}
}
