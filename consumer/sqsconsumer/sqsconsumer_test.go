package sqsconsumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/consumer/sqsconsumer"
	"github.com/schedulerd/schedulerd/internal/testkit/sqstest"
)

func TestMain(m *testing.M) { sqstest.Main(m) }

// deleteSpy reports each message Run deletes, which it does after the
// release: the signal that a delivery is finished.
type deleteSpy struct {
	*sqs.Client
	deleted chan string
}

func (s *deleteSpy) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	out, err := s.Client.DeleteMessage(ctx, in, opts...)
	if err == nil {
		s.deleted <- aws.ToString(in.ReceiptHandle)
	}
	return out, err
}

// TestRunWithServer: a real scheduler sends the events of a throttled
// schedule (maxInFlight 1) to a local-aws-sqs queue, and Run receives
// them: the first try of one event fails and it comes back; each done
// event is released (so the next one is sent) and its message deleted.
func TestRunWithServer(t *testing.T) {
	client := sqstest.NewClient(t)
	queue := sqstest.CreateQueue(t, client, "deliveries")
	// The scheduler's SQS client signs its requests; local-aws-sqs checks
	// nothing.
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	base, key := startScheduler(t, map[string]string{
		"SCHEDULER_SQS_ENDPOINT": sqstest.Endpoint(t), "SCHEDULER_SQS_REGION": sqstest.Region,
	})
	call := caller(t, base)
	pol := call(http.MethodPost, key, "/v1/policies", map[string]any{"name": "p", "maxInFlight": 1, "tokenTimeout": "10m"}, http.StatusCreated)
	sched := call(http.MethodPost, key, "/v1/schedules", map[string]any{
		"name": "s", "cron": "0 3 * * *", "eventCount": 2, "policyId": pol["id"],
		"target": map[string]any{"type": "sqs", "queueUrl": queue}, "payload": map[string]any{"report": "daily"},
	}, http.StatusCreated)
	call(http.MethodPost, key, "/v1/schedules/"+sched["id"].(string)+"/trigger", nil, http.StatusAccepted)

	var mu sync.Mutex
	tries := map[string][]int{} // event id: the Index of each call
	spy := &deleteSpy{Client: client, deleted: make(chan string, 8)}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sqsconsumer.Run(ctx, sqsconsumer.Config{
			SQS: spy, QueueURL: queue, WaitTime: time.Second, RetryDelay: time.Second,
			Func: func(_ context.Context, d *consumer.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				tries[d.EventID] = append(tries[d.EventID], d.Index)
				if !d.HoldsToken() || string(d.Payload) != `{"report":"daily"}` || d.ScheduleID != sched["id"] {
					t.Errorf("delivery %+v", d)
				}
				if len(tries) == 1 && len(tries[d.EventID]) == 1 {
					return errors.New("the first try fails")
				}
				return nil
			},
			OnError: func(d *consumer.Delivery, err error) {
				if d == nil || err.Error() != "sqsconsumer: event "+d.EventID+": the first try fails" {
					t.Errorf("OnError(%v, %v)", d, err)
				}
			},
		})
	}()
	// The second event is sent only once the first is released.
	waitFor(t, spy.deleted)
	waitFor(t, spy.deleted)
	stop()
	if err := waitFor(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, calls := range tries {
		if len(calls) == 2 {
			again++
		}
	}
	if len(tries) != 2 || again != 1 {
		t.Fatalf("tries %v, want two events, the one that failed received again", tries)
	}
	for id, calls := range tries {
		if e := call(http.MethodGet, key, "/v1/events/"+id, nil, http.StatusOK); e["status"] != "released" {
			t.Errorf("event %s (tries %v): %v, want released", id, calls, e["status"])
		}
	}
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queue), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		if n := out.Attributes[string(a)]; n != "0" {
			t.Errorf("%s = %s, want 0: every message deleted", a, n)
		}
	}
}

func TestRunRefusesAnIncompleteConfig(t *testing.T) {
	for name, cfg := range map[string]sqsconsumer.Config{
		"SQS":         {QueueURL: "q", Func: func(context.Context, *consumer.Delivery) error { return nil }},
		"QueueURL":    {SQS: &sqs.Client{}, Func: func(context.Context, *consumer.Delivery) error { return nil }},
		"Func":        {SQS: &sqs.Client{}, QueueURL: "q"},
		"MaxMessages": {SQS: &sqs.Client{}, QueueURL: "q", Func: func(context.Context, *consumer.Delivery) error { return nil }, MaxMessages: 11},
	} {
		err := sqsconsumer.Run(context.Background(), cfg)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("Config."+name)) {
			t.Errorf("%s: %v, want an error naming Config.%s", name, err, name)
		}
	}
}

func startScheduler(t *testing.T, env map[string]string) (base, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	all := map[string]string{"SCHEDULER_LISTEN_ADDR": "127.0.0.1:0", "SCHEDULER_DATA_DIR": t.TempDir(), "SCHEDULER_LOG_LEVEL": "warn"}
	for k, v := range env {
		all[k] = v
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return all[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	base = "http://" + a.Addr()
	call := caller(t, base)
	tenant := call(http.MethodPost, a.AdminKey(), "/v1/tenants", map[string]any{"name": "acme"}, http.StatusCreated)
	return base, call(http.MethodPost, a.AdminKey(), "/v1/tenants/"+tenant["id"].(string)+"/keys", nil, http.StatusCreated)["key"].(string)
}

func caller(t *testing.T, base string) func(method, key, path string, body any, want int) map[string]any {
	return func(method, key, path string, body any, want int) map[string]any {
		t.Helper()
		var r io.Reader = http.NoBody
		if body != nil {
			b, _ := json.Marshal(body)
			r = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, r)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: status %d, want %d: %v", method, path, resp.StatusCode, want, out)
		}
		return out
	}
}

func waitFor[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting")
		var zero T
		return zero
	}
}

func TestParseTakesTheTraceparentAttribute(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	d, err := sqsconsumer.Parse(types.Message{
		Body: aws.String(`{"eventId":"e1","release":{"url":"http://127.0.0.1:8080/v1/events/e1/release","token":"t"}}`),
		MessageAttributes: map[string]types.MessageAttributeValue{
			sqsconsumer.AttributeEventID:     {DataType: aws.String("String"), StringValue: aws.String("e1")},
			sqsconsumer.AttributeTraceparent: {DataType: aws.String("String"), StringValue: aws.String(tp)},
		},
	})
	if err != nil || d.EventID != "e1" || d.Traceparent != tp {
		t.Fatalf("Parse: %+v, %v; want event e1 with traceparent %s", d, err, tp)
	}
	if _, err := sqsconsumer.Parse(types.Message{Body: aws.String(`not json`)}); !errors.Is(err, consumer.ErrNotDelivery) {
		t.Fatalf("Parse of a body that is no delivery: %v, want ErrNotDelivery", err)
	}
}
