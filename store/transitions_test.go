package store

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

func TestReclaimToken(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		status       model.EventStatus
		attempts     int
		wantTo       model.EventStatus
		wantAttempts int
		wantTimedOut bool
		wantFinished bool
		wantLaunch   bool
	}{
		{"DeliveredIsReleasedTimedOut", model.EventDelivered, 1, model.EventReleased, 0, true, true, false},
		{"DeliveringIsRetriedNow", model.EventDelivering, 1, model.EventRetrying, 2, false, false, true},
		{"DeliveringOnLastAttemptIsDead", model.EventDelivering, 2, model.EventDead, 3, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := ReclaimToken(&model.Event{ID: "e1", Status: tc.status, Attempts: tc.attempts}, 3, now)
			if tr.ID != "e1" || tr.From != tc.status || tr.To != tc.wantTo || tr.Attempts != tc.wantAttempts ||
				tr.TokenTimedOut != tc.wantTimedOut || !tr.ClearToken {
				t.Fatalf("got %+v", tr)
			}
			if tr.TokenExpiredBy == nil || !tr.TokenExpiredBy.Equal(now) {
				t.Fatalf("TokenExpiredBy = %v, want %v: a token renewed after the read must stay", tr.TokenExpiredBy, now)
			}
			if (tr.FinishedAt != nil) != tc.wantFinished || tc.wantLaunch != tr.LaunchAt.Equal(now) {
				t.Fatalf("FinishedAt %v LaunchAt %v", tr.FinishedAt, tr.LaunchAt)
			}
		})
	}
}

func TestTokenTransitions(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	until := now.Add(time.Minute)
	start := StartDelivery("e1", 7, until, now)
	if start.From != model.EventScheduled || start.To != model.EventDelivering || start.Fence != 7 ||
		start.TokenExpiresAt == nil || !start.TokenExpiresAt.Equal(until) || start.RequiresPrevious {
		t.Fatalf("StartDelivery: %+v", start)
	}
	if !start.AfterPrevious().RequiresPrevious || start.RequiresPrevious {
		t.Fatal("AfterPrevious must set RequiresPrevious on a copy only")
	}
	back := HandBack("e1", 7, now)
	if back.From != model.EventDelivering || back.To != model.EventPending || !back.ClearToken || back.Fence != 7 {
		t.Fatalf("HandBack: %+v", back)
	}
	rel := Release("e1", model.EventDelivered, 0, 0, now)
	if rel.To != model.EventReleased || !rel.ClearToken || rel.FinishedAt == nil || rel.Fence != 0 || rel.AttemptsAtMost != nil {
		t.Fatalf("Release: %+v", rel)
	}
	// The release of attempt 3 under fence 7: delivered has counted the
	// attempt, delivering not yet; tried again from the other status, it is
	// still attempt 3's.
	for _, c := range []struct {
		from model.EventStatus
		want int
	}{{model.EventDelivered, 3}, {model.EventDelivering, 2}} {
		r := Release("e1", c.from, 7, 3, now)
		if r.Fence != 7 || r.AttemptsAtMost == nil || *r.AttemptsAtMost != c.want {
			t.Fatalf("Release from %s of attempt 3: %+v", c.from, r)
		}
		other := model.EventDelivering
		if c.from == model.EventDelivering {
			other = model.EventDelivered
		}
		again := r.ReleaseFrom(other)
		if again.From != other || again.Fence != 7 || *again.AttemptsAtMost != 5-c.want || !again.FinishedAt.Equal(now) {
			t.Fatalf("ReleaseFrom(%s) of %+v: %+v", other, r, again)
		}
	}
	ack := Acknowledge("e1", model.EventRetrying, now)
	if ack.From != model.EventRetrying || ack.To != model.EventReleased || ack.ClearToken || ack.FinishedAt == nil {
		t.Fatalf("Acknowledge: %+v", ack)
	}
	ext := ExtendToken("e1", model.EventDelivered, 0, 0, until, now)
	if ext.From != model.EventDelivered || ext.To != model.EventDelivered || !ext.TokenExpiresAt.Equal(until) || ext.AttemptsAtMost != nil {
		t.Fatalf("ExtendToken: %+v", ext)
	}
	if ext := ExtendToken("e1", model.EventDelivering, 7, 3, until, now); ext.Fence != 7 || ext.AttemptsAtMost == nil || *ext.AttemptsAtMost != 2 {
		t.Fatalf("ExtendToken of attempt 3 under fence 7 while delivering: %+v", ext)
	}
	red := Redrive("e1", now)
	if red.From != model.EventDead || red.To != model.EventPending || !red.ResetAttempts || !red.ClearOutcome || !red.ClearToken || !red.LaunchAt.Equal(now) {
		t.Fatalf("Redrive: %+v", red)
	}
	retry := Retry("e1", model.EventScheduled, 3, 0, until, "boom", false, now)
	if retry.To != model.EventRetrying || retry.Attempts != 0 || retry.ClearToken || retry.FinishedAt != nil || !retry.LaunchAt.Equal(until) {
		t.Fatalf("Retry: %+v", retry)
	}
	dead := Dead("e1", model.EventDelivering, 3, 5, "boom", true, now)
	if dead.To != model.EventDead || dead.Attempts != 5 || !dead.ClearToken || dead.FinishedAt == nil || dead.LastError != "boom" {
		t.Fatalf("Dead: %+v", dead)
	}
}

func TestTransitionConflicts(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	earlier, later := now.Add(-time.Minute), now.Add(time.Minute)
	two := 2
	stored := model.Event{ID: "e1", Status: model.EventDelivering, Fence: 7, Attempts: 2, TokenExpiresAt: &now}
	for _, tc := range []struct {
		name string
		t    EventTransition
		want bool
	}{
		{"Matches", EventTransition{From: model.EventDelivering, Fence: 7}, false},
		{"AnyFence", EventTransition{From: model.EventDelivering}, false},
		{"OtherStatus", EventTransition{From: model.EventScheduled, Fence: 7}, true},
		{"OtherFence", EventTransition{From: model.EventDelivering, Fence: 8}, true},
		{"TokenExpiredByNow", EventTransition{From: model.EventDelivering, TokenExpiredBy: &now}, false},
		{"TokenRenewedAfterRead", EventTransition{From: model.EventDelivering, TokenExpiredBy: &earlier}, true},
		{"AttemptsAtMostTwo", EventTransition{From: model.EventDelivering, AttemptsAtMost: &two}, false},
		{"LaterAttempt", EventTransition{From: model.EventDelivering, AttemptsAtMost: new(int)}, true},
	} {
		if got := tc.t.Conflicts(&stored); got != tc.want {
			t.Errorf("%s: Conflicts = %v, want %v", tc.name, got, tc.want)
		}
	}
	noToken := stored
	noToken.TokenExpiresAt = nil
	if tr := (EventTransition{From: model.EventDelivering, TokenExpiredBy: &later}); !tr.Conflicts(&noToken) {
		t.Error("TokenExpiredBy must conflict with an event that holds no token")
	}
}

func TestTransitionApply(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	until, launch := now.Add(time.Minute), now.Add(time.Hour)
	e := model.Event{ID: "e1", Status: model.EventDelivering, Attempts: 1, LastError: "503", LaunchAt: now, UpdatedAt: now}
	tr := EventTransition{To: model.EventDelivered, Attempts: 2, TokenExpiresAt: &until, DeliveredAt: &now, At: until}
	tr.Apply(&e)
	if e.Status != model.EventDelivered || e.Attempts != 2 || e.LastError != "503" || !e.LaunchAt.Equal(now) ||
		!e.TokenExpiresAt.Equal(until) || !e.DeliveredAt.Equal(now) || e.FinishedAt != nil || !e.UpdatedAt.Equal(until) {
		t.Fatalf("after delivered: %+v", e)
	}
	until = until.Add(time.Hour) // the caller's value changes; the event must not
	if !e.TokenExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatal("Apply shared the transition's TokenExpiresAt with the event")
	}
	e.TokenTimedOut = true
	redrive := Redrive("e1", launch)
	redrive.Apply(&e)
	if e.Status != model.EventPending || e.Attempts != 0 || e.TokenExpiresAt != nil || e.DeliveredAt != nil ||
		e.FinishedAt != nil || e.TokenTimedOut || !e.LaunchAt.Equal(launch) || e.LastError != "503" {
		t.Fatalf("after redrive: %+v", e)
	}
}
