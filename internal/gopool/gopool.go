// Package gopool runs functions on goroutines that are kept after their
// function returns, for the next one. A goroutine that sends an HTTP request
// grows its stack several times on the way; a new goroutine for every
// delivery pays for that growth every time, a kept one once.
package gopool

import (
	"sync"
	"time"
)

// Pool starts functions at once on an idle kept goroutine, or on a new one
// when none is idle; it never makes the caller wait. A goroutine idle for
// the pool's idle time ends. The zero Pool is not usable; use New.
type Pool struct {
	idle time.Duration

	mu    sync.Mutex
	ready []chan func() // idle goroutines' inboxes, the most recently idle last

	// Test hooks, set before the first Go: a goroutine became idle; an
	// idle goroutine ended.
	onIdle, onRetire func()
	starts           int // goroutines started (test counter; guarded by mu)
}

// DefaultIdle is long enough to keep a pool's goroutines through the gaps
// of a steady trickle of work, and short enough to let a burst's go soon
// after it.
const DefaultIdle = 10 * time.Second

// New returns a pool whose goroutines end after idle without work
// (at least a millisecond).
func New(idle time.Duration) *Pool {
	return &Pool{idle: max(idle, time.Millisecond)}
}

// Go runs f on a goroutine of the pool, as the go statement would.
func (p *Pool) Go(f func()) {
	p.mu.Lock()
	if n := len(p.ready); n > 0 {
		inbox := p.ready[n-1]
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		inbox <- f // buffered: its goroutine waits on it, or is about to
		return
	}
	p.starts++
	p.mu.Unlock()
	go p.run(f)
}

// GoWith is Go with f counted in wg, as wg.Go does.
func (p *Pool) GoWith(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	p.Go(func() {
		defer wg.Done()
		f()
	})
}

func (p *Pool) run(f func()) {
	inbox := make(chan func(), 1)
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		idle.Reset(p.idle)
		p.mu.Lock()
		p.ready = append(p.ready, inbox)
		p.mu.Unlock()
		if p.onIdle != nil {
			p.onIdle()
		}
		select {
		case f = <-inbox:
		case <-idle.C:
			if !p.retire(inbox) {
				// Go took the inbox before the time was up.
				f = <-inbox
			} else if p.onRetire != nil {
				p.onRetire()
			}
		}
		if f == nil {
			return
		}
	}
}

// retire takes inbox out of the ready list; false when Go took it first.
func (p *Pool) retire(inbox chan func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.ready {
		if c == inbox {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			return true
		}
	}
	return false
}
