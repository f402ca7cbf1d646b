package startstop

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

type svc struct{ Base }

func TestStopDrainsThenCancels(t *testing.T) {
	var s svc
	run, ok := s.StartInit(context.Background(), time.Hour)
	if !ok {
		t.Fatal("first StartInit must start")
	}
	if _, again := s.StartInit(context.Background(), time.Hour); again {
		t.Fatal("StartInit while running must not start again")
	}
	finished := make(chan struct{})
	s.Go(func() {
		<-s.Stopping() // drain: finish the work in hand, then return
		if run.Err() != nil {
			t.Error("run context cancelled before the drain ended")
		}
		close(finished)
	})
	s.Started()
	<-s.Ready()
	s.Stop(nil)
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned before the goroutine finished")
	}
	if run.Err() == nil {
		t.Fatal("run context not cancelled after Stop")
	}
	s.Stop(nil) // twice: no-op
}

func TestStopCancelsAfterDrainDeadline(t *testing.T) {
	var s svc
	run, _ := s.StartInit(context.Background(), time.Millisecond)
	s.Go(func() { <-run.Done() }) // ignores Stopping: only the deadline ends it
	s.Stop(nil)
	if run.Err() == nil {
		t.Fatal("run context must be cancelled once the drain deadline passed")
	}
}

func TestStopBeforeStartAndRestart(t *testing.T) {
	var s svc
	s.Stop(nil)
	if _, ok := s.StartInit(context.Background(), 0); !ok {
		t.Fatal("start after an early Stop must work")
	}
	s.Stop(nil)
	run, ok := s.StartInit(context.Background(), 0)
	if !ok || run.Err() != nil {
		t.Fatal("restart after Stop must give a live context")
	}
	select {
	case <-s.Stopping():
		t.Fatal("Stopping must be open again after a restart")
	default:
	}
	s.Stop(nil)
}

func TestDoRunsAsPartOfTheComponent(t *testing.T) {
	var s svc
	run, _ := s.StartInit(context.Background(), time.Hour)
	entered, finished := make(chan struct{}), make(chan struct{})
	go s.Do(func() {
		close(entered)
		<-s.Stopping() // drain: finish the work in hand, then return
		if run.Err() != nil {
			t.Error("run context cancelled before the drain ended")
		}
		close(finished)
	})
	<-entered
	s.Stop(nil)
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned before the work given to Do finished")
	}
	ran := false
	s.Do(func() { ran = true })
	if ran {
		t.Fatal("Do ran work after Stop began")
	}
}

// TestDoRacingStop starts and stops a component while Do is called: any
// work Do ran has finished when Stop returns.
func TestDoRacingStop(t *testing.T) {
	var s svc
	for range 2000 {
		s.StartInit(context.Background(), time.Hour)
		var ran, finished atomic.Bool
		called := make(chan struct{})
		go func() {
			defer close(called)
			s.Do(func() {
				ran.Store(true)
				runtime.Gosched()
				finished.Store(true)
			})
		}()
		s.Stop(nil)
		if ran.Load() && !finished.Load() {
			t.Fatal("Stop returned while work given to Do ran")
		}
		<-called
	}
}
