package sqsdelivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/sqsdelivery"
	"github.com/schedulerd/schedulerd/internal/testkit/sqstest"
	"github.com/schedulerd/schedulerd/model"
)

func TestMain(m *testing.M) { sqstest.Main(m) }

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// countingClient counts the SQS operations the deliverer sends.
type countingClient struct {
	next    sqs.HTTPClient
	batches atomic.Int64
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessageBatch" {
		c.batches.Add(1)
	}
	return c.next.Do(r)
}

// newDeliverer returns a Deliverer for the shared local-aws-sqs server with
// static credentials, and the counter of its SendMessageBatch calls.
func newDeliverer(t *testing.T) (*sqsdelivery.Deliverer, *countingClient) {
	t.Helper()
	counter := &countingClient{next: http.DefaultClient}
	d, err := sqsdelivery.New(context.Background(), sqsdelivery.Config{
		Region:         sqstest.Region,
		Endpoint:       sqstest.Endpoint(t),
		ReleaseBaseURL: "https://scheduler.example/",
		LoadOptions: []func(*config.LoadOptions) error{
			config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
			})),
		},
		ClientOptions: []func(*sqs.Options){func(o *sqs.Options) { o.HTTPClient = counter }},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d, counter
}

func testEvent(scheduleID string, i int, queueURL string) *model.Event {
	fireID := scheduleID + ".1772366400.v1"
	return &model.Event{
		ID:           model.EventID(fireID, i),
		ScheduleID:   scheduleID,
		FireID:       fireID,
		FireTime:     testNow,
		Index:        i,
		Count:        25,
		Target:       model.Target{Type: model.TargetSQS, QueueURL: queueURL},
		Payload:      json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`),
		ReleaseToken: "tok-" + strconv.Itoa(i),
	}
}

// receiveAll reads messages from queueURL until it has want of them. The
// messages were sent before it is called, so it asks without waiting first
// and long-polls only when a receive came back empty (the emulator holds a
// long poll for its full wait time even when it has messages).
func receiveAll(t *testing.T, client *sqs.Client, queueURL string, want int) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []types.Message
	var wait int32
	for len(got) < want {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             wait,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			// local-aws-sqs 2.0.2 reads only this older field for system
			// attributes such as MessageGroupId.
			//lint:ignore SA1019 needed by the emulator; real SQS reads either.
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage after %d of %d messages: %v", len(got), want, err)
		}
		got = append(got, out.Messages...)
		wait = 0
		if len(out.Messages) == 0 {
			wait = 1
		}
	}
	if len(got) != want {
		t.Fatalf("received %d messages, want %d", len(got), want)
	}
	return got
}

// requireDelivered fails the test unless every result is a success.
func requireDelivered(t *testing.T, results []delivery.Result, n int) {
	t.Helper()
	if len(results) != n {
		t.Fatalf("got %d results, want %d", len(results), n)
	}
	for i, res := range results {
		if res.Err != nil {
			t.Fatalf("event %d: %v", i, res.Err)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   sqsdelivery.Config
		field string
	}{
		{"RejectsRelativeEndpoint", sqsdelivery.Config{Region: "us-east-1", Endpoint: "localhost:9324"}, "Endpoint"},
		{"RejectsBadReleaseBaseURL", sqsdelivery.Config{Region: "us-east-1", ReleaseBaseURL: "scheduler"}, "ReleaseBaseURL"},
		{"RejectsNegativeConcurrency", sqsdelivery.Config{Region: "us-east-1", Concurrency: -1}, "Concurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqsdelivery.New(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New error = %v, want one naming %s", err, tc.field)
			}
		})
	}
	t.Run("RequiresRegionFromSomewhere", func(t *testing.T) {
		t.Setenv("AWS_REGION", "")
		t.Setenv("AWS_DEFAULT_REGION", "")
		t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
		t.Setenv("AWS_PROFILE", "")
		_, err := sqsdelivery.New(context.Background(), sqsdelivery.Config{})
		if err == nil || !strings.Contains(err.Error(), "Region") {
			t.Fatalf("New error = %v, want one naming Region", err)
		}
	})
	t.Run("TakesRegionFromEnvironment", func(t *testing.T) {
		t.Setenv("AWS_REGION", "eu-west-1")
		if _, err := sqsdelivery.New(context.Background(), sqsdelivery.Config{}); err != nil {
			t.Fatalf("New: %v", err)
		}
	})
}

func TestDeliver(t *testing.T) {
	d, counter := newDeliverer(t)
	client := sqstest.NewClient(t)
	ctx := context.Background()

	t.Run("SendsTwentyFiveEventsInThreeBatches", func(t *testing.T) {
		queue := sqstest.CreateQueue(t, client, "std")
		events := make([]*model.Event, 25)
		for i := range events {
			events[i] = testEvent("sch_1", i, queue)
		}
		before := counter.batches.Load()
		requireDelivered(t, d.Deliver(ctx, events), 25)
		if n := counter.batches.Load() - before; n != 3 {
			t.Errorf("%d SendMessageBatch calls, want 3", n)
		}

		seen := make(map[string]bool)
		for _, m := range receiveAll(t, client, queue, 25) {
			var msg delivery.Message
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil {
				t.Fatalf("body %q is not a delivery.Message: %v", aws.ToString(m.Body), err)
			}
			if seen[msg.EventID] {
				t.Errorf("event %s received twice", msg.EventID)
			}
			seen[msg.EventID] = true
			e := events[msg.Index]
			want := delivery.NewMessage(e, "https://scheduler.example")
			if msg.EventID != e.ID || msg.FireID != e.FireID || !msg.FireTime.Equal(testNow) || msg.Count != 25 ||
				msg.Attempt != 1 || string(msg.Payload) != string(e.Payload) || msg.Release != want.Release {
				t.Errorf("message %+v does not match event %s", msg, e.ID)
			}
			if got := aws.ToString(m.MessageAttributes[sqsdelivery.AttributeEventID].StringValue); got != e.ID {
				t.Errorf("eventId attribute = %q, want %q", got, e.ID)
			}
			if got := aws.ToString(m.MessageAttributes[sqsdelivery.AttributeScheduleID].StringValue); got != "sch_1" {
				t.Errorf("scheduleId attribute = %q, want sch_1", got)
			}
			if dt := aws.ToString(m.MessageAttributes[sqsdelivery.AttributeEventID].DataType); dt != "String" {
				t.Errorf("eventId data type = %q, want String", dt)
			}
		}
	})

	t.Run("KeepsResultOrderAcrossQueues", func(t *testing.T) {
		a := sqstest.CreateQueue(t, client, "a")
		b := sqstest.CreateQueue(t, client, "b")
		events := []*model.Event{
			testEvent("sch_a", 0, a), testEvent("sch_b", 0, b), testEvent("sch_x", 0, ""),
			testEvent("sch_a", 1, a), testEvent("sch_b", 1, b),
		}
		results := d.Deliver(ctx, events)
		for i, res := range results {
			wantErr := i == 2
			if (res.Err != nil) != wantErr || res.Permanent != wantErr {
				t.Errorf("result %d = %+v, want error %v (permanent)", i, res, wantErr)
			}
		}
		receiveAll(t, client, a, 2)
		receiveAll(t, client, b, 2)
	})

	t.Run("FIFOQueueGetsGroupAndDeduplicationIDs", func(t *testing.T) {
		queue := sqstest.CreateQueue(t, client, "q.fifo")
		events := []*model.Event{testEvent("sch_f", 0, queue), testEvent("sch_f", 1, queue), testEvent("sch_f", 2, queue)}
		requireDelivered(t, d.Deliver(ctx, events), 3)
		// The same events again are deduplicated by their ids.
		requireDelivered(t, d.Deliver(ctx, events[:1]), 1)

		msgs := receiveAll(t, client, queue, 3)
		for i, m := range msgs {
			var msg delivery.Message
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil {
				t.Fatal(err)
			}
			// FIFO: one group delivers in send order.
			if msg.EventID != events[i].ID {
				t.Errorf("message %d is event %s, want %s", i, msg.EventID, events[i].ID)
			}
			if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "sch_f" {
				t.Errorf("MessageGroupId = %q, want sch_f", g)
			}
			if dd := m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]; dd != events[i].ID {
				t.Errorf("MessageDeduplicationId = %q, want %q", dd, events[i].ID)
			}
		}
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 0 {
			t.Errorf("%d extra messages after the duplicate send, want 0", len(out.Messages))
		}
	})

	t.Run("OversizeMessageIsPermanent", func(t *testing.T) {
		queue := sqstest.CreateQueue(t, client, "big")
		big := testEvent("sch_big", 0, queue)
		big.Payload = json.RawMessage(`"` + strings.Repeat("x", sqsdelivery.MaxMessageBytes) + `"`)
		small := testEvent("sch_big", 1, queue)
		before := counter.batches.Load()
		results := d.Deliver(ctx, []*model.Event{big, small})
		if results[0].Err == nil || !results[0].Permanent || !strings.Contains(results[0].Err.Error(), "limit") {
			t.Errorf("oversize result = %+v, want permanent size error", results[0])
		}
		if results[1].Err != nil {
			t.Errorf("small result: %v", results[1].Err)
		}
		if n := counter.batches.Load() - before; n != 1 {
			t.Errorf("%d SendMessageBatch calls, want 1 (the oversize message is never sent)", n)
		}
		receiveAll(t, client, queue, 1)
	})

	t.Run("SplitsBatchesAtTotalSizeLimit", func(t *testing.T) {
		queue := sqstest.CreateQueue(t, client, "split")
		events := make([]*model.Event, 3)
		for i := range events {
			events[i] = testEvent("sch_split", i, queue)
			events[i].Payload = json.RawMessage(`"` + strings.Repeat("y", 100<<10) + `"`)
		}
		before := counter.batches.Load()
		requireDelivered(t, d.Deliver(ctx, events), 3)
		if n := counter.batches.Load() - before; n != 2 {
			t.Errorf("%d SendMessageBatch calls for 300 KiB, want 2", n)
		}
		receiveAll(t, client, queue, 3)
	})

	t.Run("MissingQueueIsPermanent", func(t *testing.T) {
		missing := sqstest.Endpoint(t) + "/123456789012/does-not-exist"
		res := d.Deliver(ctx, []*model.Event{testEvent("sch_m", 0, missing)})[0]
		var notFound *types.QueueDoesNotExist
		if !errors.As(res.Err, &notFound) || !res.Permanent {
			t.Fatalf("result = %+v, want permanent QueueDoesNotExist", res)
		}
	})

	t.Run("MessageOverQueueLimitIsSenderFault", func(t *testing.T) {
		// A queue may set a MaximumMessageSize below the SQS limit; SQS then
		// refuses larger messages entry by entry, with SenderFault.
		queue := sqstest.CreateQueue(t, client, "small")
		if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl:   aws.String(queue),
			Attributes: map[string]string{string(types.QueueAttributeNameMaximumMessageSize): "1024"},
		}); err != nil {
			t.Fatalf("SetQueueAttributes: %v", err)
		}
		bad := testEvent("sch_i", 0, queue)
		bad.Payload = json.RawMessage(`"` + strings.Repeat("z", 2048) + `"`)
		good := testEvent("sch_i", 1, queue)
		results := d.Deliver(ctx, []*model.Event{bad, good})
		var entryErr *sqsdelivery.EntryError
		if !errors.As(results[0].Err, &entryErr) || !entryErr.SenderFault || !results[0].Permanent {
			t.Errorf("invalid result = %+v, want permanent sender-fault EntryError", results[0])
		}
		if results[1].Err != nil {
			t.Errorf("valid result: %v", results[1].Err)
		}
	})

	t.Run("EmptyBatch", func(t *testing.T) {
		if got := d.Deliver(ctx, nil); len(got) != 0 {
			t.Fatalf("Deliver(nil) = %v, want none", got)
		}
	})
}
