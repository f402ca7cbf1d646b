package sqsdelivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/sqstest"
	"github.com/schedulerd/schedulerd/model"
)

func TestBacklog(t *testing.T) {
	d, _ := newDeliverer(t)
	client := sqstest.NewClient(t)
	ctx := context.Background()
	queue := sqstest.CreateQueue(t, client, "backlog")

	if n, err := d.Backlog(ctx, queue); err != nil || n != 0 {
		t.Fatalf("empty queue: Backlog = %d, %v; want 0", n, err)
	}
	events := make([]*model.Event, 7)
	for i := range events {
		events[i] = testEvent("sch_b", i, queue)
	}
	requireDelivered(t, d.Deliver(ctx, events), 7)
	// The count is approximate: a message just sent may not be counted yet.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := d.Backlog(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		if n == 7 {
			break
		}
		if n > 7 || time.Now().After(deadline) {
			t.Fatalf("after 7 sends: Backlog = %d; want 7", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := d.Backlog(ctx, queue+"-missing"); err == nil {
		t.Fatal("Backlog of a missing queue did not fail")
	}
}
