package handler_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

type timed struct {
	*embedded.Store
	claimN, claimT, trN, trT, trEv atomic.Int64
}

func (s *timed) EventClaimDue(ctx context.Context, p *store.EventClaimParams) ([]*model.Event, error) {
	t := time.Now()
	r, err := s.Store.EventClaimDue(ctx, p)
	s.claimN.Add(1)
	s.claimT.Add(int64(time.Since(t)))
	return r, err
}

func (s *timed) EventTransition(ctx context.Context, ts []store.EventTransition) ([]error, error) {
	t := time.Now()
	r, err := s.Store.EventTransition(ctx, ts)
	s.trN.Add(1)
	s.trEv.Add(int64(len(ts)))
	s.trT.Add(int64(time.Since(t)))
	return r, err
}
