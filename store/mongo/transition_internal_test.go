package mongo

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

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

// TestTransitionTokenExpiry checks the reclaim's guard on each clock: on
// the server's, a token expired by the caller's t means expired by $$NOW
// moved by t's distance from the process's clock, with the token required
// to exist (an $expr matches a missing field); elsewhere the stored
// instant is compared with t's.
func TestTransitionTokenExpiry(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	by := clock.Now().Add(-90 * time.Second)
	tr := store.EventTransition{ID: "e1", From: model.EventDelivering, To: model.EventRetrying, TokenExpiredBy: &by}
	for _, tc := range []struct {
		name string
		caps serverCaps
		want bson.D
	}{
		{"ServerClock", serverCaps{serverClock: true}, bson.D{
			{Key: "_id", Value: "e1"}, {Key: "status", Value: "delivering"},
			{Key: "tokenExpiresAt", Value: bson.D{{Key: "$exists", Value: true}}},
			{Key: "$expr", Value: bson.D{{Key: "$lte", Value: bson.A{"$tokenExpiresAt",
				bson.D{{Key: "$add", Value: bson.A{nowNanos, int64(-90 * time.Second)}}}}}}},
		}},
		{"ClientClock", serverCaps{ferret: true}, bson.D{
			{Key: "_id", Value: "e1"}, {Key: "status", Value: "delivering"},
			{Key: "tokenExpiresAt", Value: bson.D{{Key: "$lte", Value: by.UnixNano()}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{caps: tc.caps, opts: Options{Clock: clock}}
			filter, _ := s.transitionWrite(&tr, bson.NewObjectID())
			if got, want := fmt.Sprint(filter), fmt.Sprint(tc.want); got != want {
				t.Fatalf("filter\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestTransitionKeepsFinishedDate checks retention's TTL date: a
// transition that leaves an event released without a new finishedAt (a
// delivery recorded after the consumer's release) neither moves nor drops
// the date the release set.
func TestTransitionKeepsFinishedDate(t *testing.T) {
	released := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later := released.Add(time.Hour)
	s := &Store{opts: Options{Clock: clockwork.NewFakeClockAt(later)}}
	touches := func(tr store.EventTransition) bool {
		_, update := s.transitionWrite(&tr, bson.NewObjectID())
		for _, op := range update.(bson.D) {
			for _, f := range op.Value.(bson.D) {
				if f.Key == fieldFinishedDate {
					return true
				}
			}
		}
		return false
	}
	if !touches(store.Acknowledge("e1", model.EventScheduled, released)) {
		t.Fatal("the release sets no finishedDate")
	}
	if touches(store.DeliveredAfterRelease("e1", 1, released.Add(-time.Second), later)) {
		t.Fatal("recording the delivery of a released event changes its finishedDate")
	}
}

// TestTransitionTokenStamp checks how a transition stamps a token's
// expiry: on the server's clock, a pipeline update that sets it to $$NOW
// moved by its distance from the process's clock (the other values
// literal); elsewhere the caller's instant.
func TestTransitionTokenStamp(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	exp := clock.Now().Add(time.Minute)
	tr := store.StartDelivery("e1", 3, exp, clock.Now())
	nonce := bson.NewObjectID()
	for _, tc := range []struct {
		name string
		caps serverCaps
		want any
	}{
		{"ServerClock", serverCaps{serverClock: true}, mongo.Pipeline{{{Key: "$set", Value: bson.D{
			{Key: "status", Value: bson.D{{Key: "$literal", Value: "delivering"}}},
			{Key: "txn", Value: bson.D{{Key: "$literal", Value: nonce}}},
			{Key: "tokenExpiresAt", Value: bson.D{{Key: "$add", Value: bson.A{nowNanos, int64(time.Minute)}}}},
			{Key: "updatedAt", Value: bson.D{{Key: "$literal", Value: clock.Now().UnixNano()}}},
		}}}}},
		{"ClientClock", serverCaps{ferret: true}, bson.D{{Key: "$set", Value: bson.D{
			{Key: "status", Value: "delivering"}, {Key: "txn", Value: nonce},
			{Key: "tokenExpiresAt", Value: exp.UnixNano()}, {Key: "updatedAt", Value: clock.Now().UnixNano()},
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{caps: tc.caps, opts: Options{Clock: clock}}
			_, update := s.transitionWrite(&tr, nonce)
			if got, want := fmt.Sprint(update), fmt.Sprint(tc.want); got != want {
				t.Fatalf("update\n got %s\nwant %s", got, want)
			}
		})
	}
}
