package throttle

import "sync"

// eventSlots serialises, per event, this process's writes that take a token
// from an event: releases and timeout reclaims. Without it, two releases of
// one event (a consumer's retry racing its first call) both read it as
// holding, and with Config.EarlyDispatch the loser would already have sent
// the next event on a token that the winner gave elsewhere.
type eventSlots struct {
	mu sync.Mutex
	m  map[string]chan struct{} // closed when the holder lets go
}

// acquire takes the slots of ids, waiting while any is held. Holders let
// go once their store call returns, so the wait is bounded by it.
func (s *eventSlots) acquire(ids ...string) {
	for {
		s.mu.Lock()
		busy := s.busyLocked(ids)
		if busy == nil {
			s.takeLocked(ids)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		<-busy
	}
}

// tryAcquire takes the slots of ids if none is held.
func (s *eventSlots) tryAcquire(ids ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busyLocked(ids) != nil {
		return false
	}
	s.takeLocked(ids)
	return true
}

func (s *eventSlots) busyLocked(ids []string) chan struct{} {
	for _, id := range ids {
		if c, ok := s.m[id]; ok {
			return c
		}
	}
	return nil
}

func (s *eventSlots) takeLocked(ids []string) {
	if s.m == nil {
		s.m = map[string]chan struct{}{}
	}
	for _, id := range ids {
		s.m[id] = make(chan struct{})
	}
}

// release lets go of the slots of ids.
func (s *eventSlots) release(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if c, ok := s.m[id]; ok {
			close(c)
			delete(s.m, id)
		}
	}
}
