package mongo

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

func TestTransitionRounds(t *testing.T) {
	tr := func(id string, requiresPrevious bool) store.EventTransition {
		return store.EventTransition{ID: id, RequiresPrevious: requiresPrevious}
	}
	for _, tc := range []struct {
		name string
		ts   []store.EventTransition
		want [][]int
	}{
		{"Empty", nil, nil},
		{"IndependentInOneRound", []store.EventTransition{tr("a", false), tr("b", false), tr("c", false)}, [][]int{{0, 1, 2}}},
		{"ReleaseThenStart", []store.EventTransition{tr("a", false), tr("b", true)}, [][]int{{0}, {1}}},
		{"ChainsDeepen", []store.EventTransition{tr("a", false), tr("b", true), tr("c", true), tr("d", false)}, [][]int{{0, 3}, {1}, {2}}},
		{"SameEventLater", []store.EventTransition{tr("a", false), tr("b", false), tr("a", false), tr("a", false)}, [][]int{{0, 1}, {2}, {3}}},
		{"RequiresPreviousOnFirst", []store.EventTransition{tr("a", true), tr("b", false)}, [][]int{{0, 1}}},
		{"SameEventAfterChain", []store.EventTransition{tr("a", false), tr("b", true), tr("b", false)}, [][]int{{0}, {1}, {2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := transitionRounds(tc.ts)
			if !slices.EqualFunc(got, tc.want, slices.Equal[[]int]) {
				t.Fatalf("transitionRounds: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCallError(t *testing.T) {
	notSent := fmt.Errorf("%w: %w: no server", model.ErrUnavailable, model.ErrNotApplied)
	lost := fmt.Errorf("%w: connection reset", model.ErrUnavailable)
	for _, tc := range []struct {
		name           string
		err            error
		applied        bool
		wantNotApplied bool
	}{
		{"NotSentNothingApplied", notSent, false, true},
		{"NotSentAfterAnAppliedRound", notSent, true, false},
		{"LostReply", lost, false, false},
		{"LostReplyAfterAnAppliedRound", lost, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := callError(tc.err, tc.applied)
			if !errors.Is(got, model.ErrUnavailable) {
				t.Fatalf("callError: got %v, want ErrUnavailable", got)
			}
			if errors.Is(got, model.ErrNotApplied) != tc.wantNotApplied {
				t.Fatalf("callError: got %v, ErrNotApplied want %v", got, tc.wantNotApplied)
			}
		})
	}
}
