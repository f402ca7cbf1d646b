// Package sqsdelivery delivers events to Amazon SQS queues (or a local
// emulator) with SendMessageBatch. The message body is the same JSON as the
// HTTP transport's request body (delivery.Message), so a consumer can move
// between transports without changing its decoder.
package sqsdelivery

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
)

// SQS limits that shape the batches.
const (
	// MaxBatchEntries is the most entries one SendMessageBatch call takes.
	MaxBatchEntries = 10
	// MaxMessageBytes is the largest message (body plus attributes) and also
	// the largest total of one batch. A larger message can never be sent, so
	// it is a Permanent error.
	MaxMessageBytes = 256 << 10
	// DefaultConcurrency is how many SendMessageBatch calls run at once.
	DefaultConcurrency = 8
)

// Message attribute names set on every message, so that consumers can route
// or drop messages without decoding the body.
const (
	AttributeEventID    = "eventId"
	AttributeScheduleID = "scheduleId"
)

// Config configures a Deliverer. Zero values mean the documented default.
type Config struct {
	// Region is the AWS region. If empty it comes from the default chain
	// (AWS_REGION, the shared config file); New fails if neither has one.
	Region string
	// Endpoint overrides the SQS endpoint, for local stacks such as
	// local-aws-sqs ("http://127.0.0.1:9324"). AWS_ENDPOINT_URL_SQS works too.
	Endpoint string
	// ReleaseBaseURL is the service's public base URL, used in the message's
	// release URL.
	ReleaseBaseURL string
	// Concurrency is how many SendMessageBatch calls one Deliver call runs at
	// once. Default 8.
	Concurrency int
	// LoadOptions are passed to config.LoadDefaultConfig after the region,
	// for example config.WithSharedConfigProfile. Credentials come from the
	// default chain unless an option here says otherwise.
	LoadOptions []func(*config.LoadOptions) error
	// ClientOptions are applied to the SQS client last, for example to set
	// a custom HTTP client or retryer.
	ClientOptions []func(*sqs.Options)
	// Logger receives the AWS SDK's own log lines (which would otherwise be
	// plain text on stderr). The zero value discards them.
	Logger zerolog.Logger
}

func (c *Config) setDefaults() {
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
}

// validate checks c after setDefaults; the error names the field.
func (c *Config) validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("sqsdelivery: Config.Endpoint: %q is not an absolute http(s) URL", c.Endpoint)
		}
	}
	if c.ReleaseBaseURL != "" {
		u, err := url.Parse(c.ReleaseBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("sqsdelivery: Config.ReleaseBaseURL: %q is not an absolute http(s) URL", c.ReleaseBaseURL)
		}
	}
	if c.Concurrency < 0 {
		return fmt.Errorf("sqsdelivery: Config.Concurrency: %d is negative", c.Concurrency)
	}
	return nil
}

// Deliverer sends events to SQS. It is safe for concurrent use.
type Deliverer struct {
	client         *sqs.Client
	releaseBaseURL string
	concurrency    int
}

// New validates cfg, loads the AWS configuration (region, credentials) from
// the default chain and returns a Deliverer. Errors name the Config field.
// New makes no network call: missing or wrong credentials show up as
// retryable errors of the first Deliver.
func New(ctx context.Context, cfg Config) (*Deliverer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []func(*config.LoadOptions) error{config.WithLogger(sdkLogger(cfg.Logger))}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	opts = append(opts, cfg.LoadOptions...)
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("sqsdelivery: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("sqsdelivery: Config.Region: not set and the default AWS configuration has none (set AWS_REGION)")
	}
	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		for _, opt := range cfg.ClientOptions {
			opt(o)
		}
	})
	concurrency := cfg.Concurrency
	return &Deliverer{
		client:         client,
		releaseBaseURL: strings.TrimRight(cfg.ReleaseBaseURL, "/"),
		concurrency:    concurrency,
	}, nil
}

// sdkLogger turns the SDK's printf-style lines into zerolog events.
func sdkLogger(log zerolog.Logger) logging.Logger {
	log = log.With().Str("component", "aws-sdk").Logger()
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		ev := log.Debug()
		if c == logging.Warn {
			ev = log.Warn()
		}
		ev.Msgf(format, v...)
	})
}

// entry is one event ready to send.
type entry struct {
	index int // into the events and results of Deliver
	input types.SendMessageBatchRequestEntry
	size  int
}

// batch is one SendMessageBatch call's worth of entries for one queue.
type batch struct {
	queueURL string
	entries  []entry
}

// Deliver sends each event to its Target.QueueURL and returns one Result per
// event, in the order of events. Events are grouped by queue (keeping their
// order within a queue) and sent in batches of at most MaxBatchEntries and
// MaxMessageBytes; up to Config.Concurrency batches are in flight at once.
//
// An entry SQS refuses with SenderFault, an oversize message, a missing queue
// URL and a queue that does not exist are Permanent errors; everything else
// that fails (throttling, network, server faults) is retryable. A queue URL
// that the tenant's target rule in ctx (netguard.WithTargetRule) refuses is
// a Permanent error wrapping delivery.ErrTargetRefused; nothing is sent.
func (d *Deliverer) Deliver(ctx context.Context, events []*model.Event) []delivery.Result {
	results := make([]delivery.Result, len(events))
	_, rule := netguard.TargetRuleFrom(ctx)
	batches := d.plan(events, results, rule)

	workers := min(d.concurrency, len(batches))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) {
					return
				}
				d.send(ctx, events, batches[i], results)
			}
		})
	}
	wg.Wait()
	return results
}

// plan encodes the events and cuts them into batches. Events that cannot be
// sent at all get their Permanent result here.
func (d *Deliverer) plan(events []*model.Event, results []delivery.Result, rule *netguard.TargetRule) []batch {
	var queues []string
	byQueue := make(map[string][]entry)
	for i, e := range events {
		if e != nil {
			if err := rule.CheckQueueURL(e.Target.QueueURL); err != nil {
				results[i] = delivery.Result{Err: fmt.Errorf("sqsdelivery: event %s: %w: %w", e.ID, delivery.ErrTargetRefused, err), Permanent: true}
				continue
			}
		}
		en, err := d.prepare(e)
		if err != nil {
			results[i] = delivery.Result{Err: err, Permanent: true}
			continue
		}
		en.index = i
		q := e.Target.QueueURL
		if _, ok := byQueue[q]; !ok {
			queues = append(queues, q)
		}
		byQueue[q] = append(byQueue[q], en)
	}
	var batches []batch
	for _, q := range queues {
		cur := batch{queueURL: q}
		size := 0
		for _, en := range byQueue[q] {
			if len(cur.entries) == MaxBatchEntries || size+en.size > MaxMessageBytes {
				batches = append(batches, cur)
				cur, size = batch{queueURL: q}, 0
			}
			cur.entries = append(cur.entries, en)
			size += en.size
		}
		batches = append(batches, cur)
	}
	return batches
}

// prepare builds the batch entry of e (without its Id) and its size as SQS
// counts it: the body plus each attribute's name, type and value.
func (d *Deliverer) prepare(e *model.Event) (entry, error) {
	if e == nil {
		return entry{}, errors.New("sqsdelivery: nil event")
	}
	if e.Target.Type != "" && e.Target.Type != model.TargetSQS {
		return entry{}, fmt.Errorf("sqsdelivery: event %s: target type %q is not sqs", e.ID, e.Target.Type)
	}
	if e.Target.QueueURL == "" {
		return entry{}, fmt.Errorf("sqsdelivery: event %s: target has no queue URL", e.ID)
	}
	body, err := json.Marshal(delivery.NewMessage(e, d.releaseBaseURL))
	if err != nil {
		return entry{}, fmt.Errorf("sqsdelivery: event %s: encode message: %w", e.ID, err)
	}
	attrs := make(map[string]types.MessageAttributeValue, 2)
	size := len(body)
	// SQS refuses empty attribute values, so an empty one is left out.
	for name, value := range map[string]string{AttributeEventID: e.ID, AttributeScheduleID: e.ScheduleID, delivery.TraceParent: e.TraceParent, delivery.TraceState: e.TraceState} {
		if value == "" {
			continue
		}
		attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(value)}
		size += len(name) + len("String") + len(value)
	}
	if size > MaxMessageBytes {
		return entry{}, fmt.Errorf("sqsdelivery: event %s: message is %d bytes, more than the SQS limit of %d", e.ID, size, MaxMessageBytes)
	}
	in := types.SendMessageBatchRequestEntry{
		MessageBody:       aws.String(string(body)),
		MessageAttributes: attrs,
	}
	if strings.HasSuffix(e.Target.QueueURL, ".fifo") {
		// One group per schedule keeps a schedule's events in order without
		// serialising different schedules; deduplicating on the event id
		// makes a retry after an ambiguous failure harmless for 5 minutes.
		group := e.ScheduleID
		if group == "" {
			group = e.ID
		}
		in.MessageGroupId = aws.String(fifoID(group))
		in.MessageDeduplicationId = aws.String(fifoID(e.ID))
	}
	return entry{input: in, size: size}, nil
}

// fifoID returns s if SQS accepts it as a group or deduplication id (1-128
// printable ASCII characters), else its hex SHA-256, which it always accepts.
func fifoID(s string) string {
	ok := len(s) > 0 && len(s) <= 128
	for i := 0; ok && i < len(s); i++ {
		ok = s[i] > ' ' && s[i] < 0x7f
	}
	if ok {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// send makes one SendMessageBatch call and writes the results of its
// entries. Entry ids are the entries' positions in the batch, which satisfy
// SQS's [A-Za-z0-9_-]{1,80} whatever the event ids look like.
func (d *Deliverer) send(ctx context.Context, events []*model.Event, b batch, results []delivery.Result) {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(b.queueURL)}
	for j, en := range b.entries {
		req := en.input
		req.Id = aws.String(strconv.Itoa(j))
		in.Entries = append(in.Entries, req)
	}
	out, err := d.client.SendMessageBatch(ctx, in)
	if err != nil {
		var missing *types.QueueDoesNotExist
		permanent := errors.As(err, &missing)
		for _, en := range b.entries {
			results[en.index] = delivery.Result{
				Err:       fmt.Errorf("sqsdelivery: event %s: send to %s: %w", events[en.index].ID, b.queueURL, err),
				Permanent: permanent,
			}
		}
		return
	}
	done := make([]bool, len(b.entries))
	for _, ok := range out.Successful {
		if j, valid := entryIndex(ok.Id, len(b.entries)); valid {
			done[j] = true
		}
	}
	for _, f := range out.Failed {
		j, valid := entryIndex(f.Id, len(b.entries))
		if !valid {
			continue
		}
		done[j] = true
		en := b.entries[j]
		results[en.index] = delivery.Result{
			Err: &EntryError{
				EventID:     events[en.index].ID,
				QueueURL:    b.queueURL,
				Code:        aws.ToString(f.Code),
				Message:     aws.ToString(f.Message),
				SenderFault: f.SenderFault,
			},
			Permanent: f.SenderFault,
		}
	}
	for j, en := range b.entries {
		if !done[j] {
			results[en.index] = delivery.Result{
				Err: fmt.Errorf("sqsdelivery: event %s: SQS reported neither success nor failure for the entry", events[en.index].ID),
			}
		}
	}
}

func entryIndex(id *string, n int) (int, bool) {
	j, err := strconv.Atoi(aws.ToString(id))
	return j, err == nil && j >= 0 && j < n
}

// EntryError is SQS's refusal of one message of a batch. SenderFault means
// the message itself is at fault (retrying it cannot help); otherwise SQS
// failed and the message may be sent again.
type EntryError struct {
	EventID     string
	QueueURL    string
	Code        string
	Message     string
	SenderFault bool
}

func (e *EntryError) Error() string {
	fault := "server fault"
	if e.SenderFault {
		fault = "sender fault"
	}
	return fmt.Sprintf("sqsdelivery: event %s: %s refused the message (%s): %s: %s", e.EventID, e.QueueURL, fault, e.Code, e.Message)
}
