package sqsdelivery_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/testkit/sqstest"
	"github.com/schedulerd/schedulerd/model"
)

// An event's trace context goes as the message attribute traceparent,
// with tracestate when it has one; an event without one sends none.
func TestDeliverCarriesTraceParent(t *testing.T) {
	d, _ := newDeliverer(t)
	client := sqstest.NewClient(t)
	queue := sqstest.CreateQueue(t, client, "traced")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, plain := testEvent("sch_t", 0, queue), testEvent("sch_t", 1, queue)
	const ts = "vendor=opaque"
	traced.TraceParent, traced.TraceState = tp, ts
	requireDelivered(t, d.Deliver(context.Background(), []*model.Event{traced, plain}), 2)
	for _, m := range receiveAll(t, client, queue, 2) {
		got, ok := m.MessageAttributes[delivery.TraceParent]
		state, stateOK := m.MessageAttributes[delivery.TraceState]
		id := aws.ToString(m.MessageAttributes["eventId"].StringValue)
		switch {
		case id == traced.ID && (!ok || aws.ToString(got.StringValue) != tp):
			t.Errorf("traced event: traceparent attribute %v, want %q", got.StringValue, tp)
		case id == traced.ID && (!stateOK || aws.ToString(state.StringValue) != ts):
			t.Errorf("traced event: tracestate attribute %v, want %q", state.StringValue, ts)
		case id == plain.ID && (ok || stateOK):
			t.Errorf("event without a trace context: traceparent attribute %q, tracestate %q, want none", aws.ToString(got.StringValue), aws.ToString(state.StringValue))
		}
	}
}
