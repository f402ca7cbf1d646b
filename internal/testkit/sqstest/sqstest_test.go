package sqstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/schedulerd/schedulerd/internal/testkit/sqstest"
)

func TestMain(m *testing.M) { sqstest.Main(m) }

// TestServerSpeaksSDKProtocol checks that the emulator answers the AWS JSON
// 1.0 protocol the SDK's sqs client uses, including message MD5 checks.
func TestServerSpeaksSDKProtocol(t *testing.T) {
	client := sqstest.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("SameEndpointTwice", func(t *testing.T) {
		if a, b := sqstest.Endpoint(t), sqstest.Endpoint(t); a != b {
			t.Fatalf("Endpoint = %q then %q, want one server per process", a, b)
		}
	})
	t.Run("SendReceiveStandard", func(t *testing.T) {
		url := sqstest.CreateQueue(t, client, "std")
		roundTrip(ctx, t, client, url, nil)
	})
	t.Run("SendReceiveFIFO", func(t *testing.T) {
		url := sqstest.CreateQueue(t, client, "q.fifo")
		roundTrip(ctx, t, client, url, func(in *sqs.SendMessageInput) {
			in.MessageGroupId = aws.String("g")
			in.MessageDeduplicationId = aws.String("d")
		})
	})
}

func roundTrip(ctx context.Context, t *testing.T, client *sqs.Client, url string, edit func(*sqs.SendMessageInput)) {
	t.Helper()
	in := &sqs.SendMessageInput{
		QueueUrl:    aws.String(url),
		MessageBody: aws.String(`{"hello":"world"}`),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"eventId": {DataType: aws.String("String"), StringValue: aws.String("e1")},
		},
	}
	if edit != nil {
		edit(in)
	}
	if _, err := client.SendMessage(ctx, in); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(url),
		MaxNumberOfMessages:   10,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("received %d messages, want 1", len(out.Messages))
	}
	m := out.Messages[0]
	if got := aws.ToString(m.Body); got != `{"hello":"world"}` {
		t.Errorf("body = %q", got)
	}
	if got := aws.ToString(m.MessageAttributes["eventId"].StringValue); got != "e1" {
		t.Errorf("eventId attribute = %q, want e1", got)
	}
}
