package finish

import (
	"context"
	"time"

	"github.com/schedulerd/schedulerd/internal/startstop"
)

// Service runs Sweep every Interval on the finisher's clock.
type Service struct {
	startstop.Base
	f *Finisher
}

// NewService returns the background service of f.
func NewService(f *Finisher) *Service { return &Service{f: f} }

// Start sweeps at once and then every Interval. It returns at once.
func (s *Service) Start(ctx context.Context) error {
	run, ok := s.StartInit(ctx, 5*time.Second)
	if !ok {
		return nil
	}
	s.Go(func() {
		t := s.f.deps.Clock.NewTicker(s.f.cfg.Interval)
		defer t.Stop()
		for {
			s.Do(func() {
				if _, err := s.f.Sweep(run); err != nil && run.Err() == nil {
					s.f.log.Warn().Err(err).Msg("finisher sweep failed")
				}
			})
			select {
			case <-s.Stopping():
				return
			case <-run.Done():
				return
			case <-t.Chan():
			}
		}
	})
	s.Started()
	return nil
}

// Stop ends the sweeps and waits for one in progress.
func (s *Service) Stop() { s.Base.Stop(nil) }
