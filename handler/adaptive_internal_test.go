package handler

import (
	"context"
	"errors"
	"testing"
)

type fakeBacklog struct {
	n   map[string]int
	err error
}

func (f *fakeBacklog) Backlog(_ context.Context, queueURL string) (int, error) {
	return f.n[queueURL], f.err
}

type backlogCall struct {
	policy    string
	prev, cur int
}

type fakeBacklogThrottle struct {
	Throttle
	calls []backlogCall
	gone  map[string]bool // policies it keeps no limit for
}

func (f *fakeBacklogThrottle) ObserveBacklog(policyID string, prev, cur int) bool {
	f.calls = append(f.calls, backlogCall{policyID, prev, cur})
	return !f.gone[policyID]
}

func TestPollBacklogs(t *testing.T) {
	ctx := context.Background()
	sqs := &fakeBacklog{n: map[string]int{"q1": 7}}
	thr := &fakeBacklogThrottle{}
	h := &Handler{deps: Deps{Backlogs: sqs}, thr: thr}

	if err := h.pollBacklogs(ctx); err != nil || len(thr.calls) != 0 {
		t.Fatalf("nothing seen: err %v calls %v", err, thr.calls)
	}
	h.backlogs.seen("p", "q1")
	if err := h.pollBacklogs(ctx); err != nil {
		t.Fatal(err)
	}
	sqs.n["q1"] = 30
	if err := h.pollBacklogs(ctx); err != nil {
		t.Fatal(err)
	}
	want := []backlogCall{{"p", 7, 7}, {"p", 7, 30}}
	if len(thr.calls) != len(want) || thr.calls[0] != want[0] || thr.calls[1] != want[1] {
		t.Fatalf("calls = %v, want %v (the first reading is its own previous one)", thr.calls, want)
	}
	sqs.err = errors.New("denied")
	if err := h.pollBacklogs(ctx); err == nil {
		t.Fatal("a failed read was not reported")
	}
	// A policy the throttle keeps no limit for (deleted) is read no more.
	sqs.err = nil
	h.backlogs.seen("p", "q1")
	thr.gone = map[string]bool{"p": true}
	n := len(thr.calls)
	if err := h.pollBacklogs(ctx); err != nil || len(thr.calls) != n+1 {
		t.Fatalf("err %v, calls %v: the queue was not read", err, thr.calls[n:])
	}
	n++
	if err := h.pollBacklogs(ctx); err != nil || len(thr.calls) != n {
		t.Fatalf("err %v; the queue of a policy without a limit was read again: %v", err, thr.calls[n-1:])
	}
	if len(h.backlogs.m) != 0 {
		t.Fatalf("backlogs kept %v", h.backlogs.m)
	}
}
