package handler_test

import (
	"sync"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
)

// attempt is one delivery attempt whose outcome the handler wrote.
type attempt struct {
	event  model.Event
	result delivery.Result
	status model.EventStatus
}

// attemptLog collects attempts through handler.Hooks.Attempted: a test
// waits on its length instead of on time.
type attemptLog struct {
	mu   sync.Mutex
	list []attempt
}

func (a *attemptLog) hook(e *model.Event, r delivery.Result, status model.EventStatus) {
	a.mu.Lock()
	a.list = append(a.list, attempt{*e, r, status})
	a.mu.Unlock()
}

func (a *attemptLog) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.list)
}

func (a *attemptLog) all() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.list...)
}
