// Package startstop gives every background component one lifecycle shape:
//
//	Start(ctx) error  starts the work and returns once it runs (again: no-op)
//	Ready() <-chan struct{}  closed once the component does its work
//	Stop()  stops taking new work, drains what is in hand until the
//	        component's Config.DrainTimeout, then cancels the rest and waits;
//	        safe twice and before Start
//
// A component embeds Base and calls StartInit, Started and Exited; its run
// loops watch Stopping (finish what is in hand) and the run context (drop
// everything).
package startstop

import (
	"context"
	"sync"
	"time"
)

// Service is the shape app stops in one loop.
type Service interface {
	Start(ctx context.Context) error
	Ready() <-chan struct{}
	Stop()
}

// Base holds the lifecycle state. The zero value is ready to use.
type Base struct {
	mu       sync.Mutex
	ready    chan struct{}
	stopping chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc
	drain    time.Duration
	running  bool
	wg       sync.WaitGroup
}

func (b *Base) init() {
	if b.ready == nil {
		b.ready = make(chan struct{})
		b.stopping = make(chan struct{})
	}
}

// StartInit begins a start. It returns ok=false when the component already
// runs; otherwise the context the run must use, cancelled when the drain
// deadline passes or Stop ends. drain is the component's drain deadline.
func (b *Base) StartInit(ctx context.Context, drain time.Duration) (run context.Context, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return nil, false
	}
	b.init()
	select {
	case <-b.stopping: // stopped before: a fresh cycle
		b.ready = make(chan struct{})
		b.stopping = make(chan struct{})
	default:
	}
	run, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan struct{})
	b.drain = drain
	b.running = true
	return run, true
}

// Go runs f as part of the component; Stop waits for every f to return.
func (b *Base) Go(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// Do runs f in the calling goroutine as part of the component, so that
// Stop waits for it, unless Stop has begun: then f does not run. A
// scheduler's job runs so, and keeps the scheduler's singleton mode.
func (b *Base) Do(f func()) {
	b.mu.Lock()
	b.init()
	select {
	case <-b.stopping:
		b.mu.Unlock()
		return
	default:
	}
	// Added under mu, which Stop holds to close stopping: Stop's wait
	// either counts f or f does not run.
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	f()
}

// Started marks the component ready (closes Ready).
func (b *Base) Started() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	select {
	case <-b.ready:
	default:
		close(b.ready)
	}
}

// Ready is closed once the component has started.
func (b *Base) Ready() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.ready
}

// Stopping is closed when Stop begins: take no new work, finish what is in
// hand.
func (b *Base) Stopping() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.stopping
}

// Stop closes Stopping, waits for the goroutines started with Go until the
// drain deadline, then cancels the run context and waits for them to return.
// before, when set, runs after Stopping is closed and before the wait (for
// example to shut a scheduler down). Safe twice and before Start.
func (b *Base) Stop(before func()) {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return
	}
	b.running = false
	close(b.stopping)
	cancel, drain := b.cancel, b.drain
	b.mu.Unlock()

	if before != nil {
		before()
	}
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	if drain > 0 {
		t := time.NewTimer(drain)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	cancel()
	<-done
}
