// Package sqsconsumer receives schedulerd's deliveries from an SQS queue:
// it parses each message, runs the consumer's function, and on success
// releases the event's token and deletes the message; on failure it
// leaves the message in the queue, to be received again.
//
// SQS messages are not signed (the queue's access policy says who may
// send), so there is nothing to verify.
//
//	client := sqs.NewFromConfig(awsCfg)
//	err := sqsconsumer.Run(ctx, sqsconsumer.Config{
//		SQS:      client,
//		QueueURL: queueURL,
//		Func: func(ctx context.Context, d *consumer.Delivery) error {
//			return sendReport(ctx, d.Payload)
//		},
//	})
package sqsconsumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/schedulerd/schedulerd/consumer"
)

// Message attributes the scheduler sets on every message.
const (
	AttributeEventID    = "eventId"
	AttributeScheduleID = "scheduleId"
	// AttributeTraceparent is the W3C trace context of the delivery, when
	// the scheduler traces.
	AttributeTraceparent = "traceparent"
)

// API is the part of *sqs.Client that Run uses.
type API interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Config configures Run. Zero values mean the documented defaults.
type Config struct {
	// SQS is the client, usually an *sqs.Client. Required.
	SQS API
	// QueueURL is the queue of the schedules' sqs target. Required.
	QueueURL string
	// Func does the work of one delivery. Required.
	Func consumer.Func
	// Client releases the deliveries. Nil: consumer.NewClient(Options{}).
	Client *consumer.Client
	// MaxMessages is how many messages one receive takes (1 to 10), and
	// so how many Func calls run at once. Default 10.
	MaxMessages int32
	// WaitTime is the long-poll wait of a receive (at most 20 s). Default
	// 20 s.
	WaitTime time.Duration
	// RetryDelay, if positive, is when a message whose Func failed is
	// received again (its visibility timeout is set to it, doubled for
	// each earlier receive, at most 12 hours). Zero leaves it to the
	// queue's visibility timeout.
	RetryDelay time.Duration
	// OnError, if set, is told of each failed receive, message that is not
	// a delivery, and error of Func, of a release or of a delete, with the
	// delivery if there is one.
	OnError func(d *consumer.Delivery, err error)
}

// maxVisibility is the largest visibility timeout SQS takes.
const maxVisibility = 12 * time.Hour

// Run receives and handles messages until ctx ends, then returns nil once
// the messages it holds are handled. It returns an error at once only for
// a Config it cannot run with. Receive errors are reported and tried
// again with backoff.
//
// For each message: a body that is not a delivery is reported and left in
// the queue (its redrive policy moves it to a dead-letter queue after
// maxReceiveCount receives); otherwise Func runs. When Func returns nil,
// the delivery is released if it holds a token (consumer.Delivery.
// HoldsToken) and the message is deleted, both even if ctx has ended
// meanwhile. A release that fails is reported and the message deleted
// anyway: the work is done, and the policy's token timeout takes the
// token back. When Func returns an error, the message is left for SQS to
// deliver again (after RetryDelay if set).
func Run(ctx context.Context, cfg Config) error {
	switch {
	case cfg.SQS == nil:
		return errors.New("sqsconsumer: Config.SQS is nil")
	case cfg.QueueURL == "":
		return errors.New("sqsconsumer: Config.QueueURL is empty")
	case cfg.Func == nil:
		return errors.New("sqsconsumer: Config.Func is nil")
	case cfg.MaxMessages < 0 || cfg.MaxMessages > 10:
		return fmt.Errorf("sqsconsumer: Config.MaxMessages: %d is not within 1 to 10", cfg.MaxMessages)
	case cfg.WaitTime < 0 || cfg.WaitTime > 20*time.Second:
		return fmt.Errorf("sqsconsumer: Config.WaitTime: %s is not within 0 to 20s", cfg.WaitTime)
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = 10
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = 20 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = consumer.NewClient(consumer.Options{})
	}
	r := &runner{cfg: cfg}
	for failures := 0; ctx.Err() == nil; {
		out, err := cfg.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(cfg.QueueURL),
			MaxNumberOfMessages:         cfg.MaxMessages,
			WaitTimeSeconds:             int32(cfg.WaitTime / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			r.report(nil, fmt.Errorf("sqsconsumer: receive from %s: %w", cfg.QueueURL, err))
			wait := rand.N(min(time.Second<<min(failures, 6), time.Minute)) + time.Millisecond
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		failures = 0
		var wg sync.WaitGroup
		for _, m := range out.Messages {
			wg.Go(func() { r.handle(ctx, m) })
		}
		wg.Wait()
	}
	return nil
}

type runner struct {
	cfg Config
}

// Parse decodes an SQS message of the scheduler into a Delivery, with the
// traceparent of its message attributes.
func Parse(m types.Message) (*consumer.Delivery, error) {
	d, err := consumer.Parse([]byte(aws.ToString(m.Body)))
	if err != nil {
		return nil, err
	}
	if a, ok := m.MessageAttributes[AttributeTraceparent]; ok {
		d.Traceparent = aws.ToString(a.StringValue)
	}
	return d, nil
}

func (r *runner) handle(ctx context.Context, m types.Message) {
	d, err := Parse(m)
	if err != nil {
		r.report(nil, fmt.Errorf("sqsconsumer: message %s: %w", aws.ToString(m.MessageId), err))
		return
	}
	if err := r.cfg.Func(ctx, d); err != nil {
		r.report(d, fmt.Errorf("sqsconsumer: event %s: %w", d.EventID, err))
		r.retryLater(ctx, d, m)
		return
	}
	// The work is done: finish even if ctx ended meanwhile, or the message
	// would come back and be done twice.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if d.HoldsToken() {
		if err := r.cfg.Client.Release(done, d); err != nil {
			r.report(d, err)
		}
	}
	if _, err := r.cfg.SQS.DeleteMessage(done, &sqs.DeleteMessageInput{
		QueueUrl: aws.String(r.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle,
	}); err != nil {
		r.report(d, fmt.Errorf("sqsconsumer: event %s: delete the message: %w", d.EventID, err))
	}
}

// retryLater sets the visibility of a failed message to RetryDelay,
// doubled for each earlier receive.
func (r *runner) retryLater(ctx context.Context, d *consumer.Delivery, m types.Message) {
	if r.cfg.RetryDelay <= 0 {
		return
	}
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	delay := r.cfg.RetryDelay
	for i := 1; i < n && delay < maxVisibility; i++ {
		delay *= 2
	}
	delay = min(delay, maxVisibility)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := r.cfg.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(r.cfg.QueueURL), ReceiptHandle: m.ReceiptHandle,
		VisibilityTimeout: int32((delay + time.Second - 1) / time.Second),
	}); err != nil {
		r.report(d, fmt.Errorf("sqsconsumer: event %s: set the retry delay: %w", d.EventID, err))
	}
}

func (r *runner) report(d *consumer.Delivery, err error) {
	if r.cfg.OnError != nil {
		r.cfg.OnError(d, err)
	}
}
