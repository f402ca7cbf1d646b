// Command consumer is a minimal schedulerd HTTP consumer.
//
// It checks each delivery's signature and parses it with package consumer,
// answers 202 at once (any 2xx marks the event delivered, so it is not sent
// again), does the work in the background and then releases the event
// (consumer.Client.Release POSTs its release token to its release URL),
// which gives the throttling token back so that the next waiting event of
// the policy can go. A consumer that never releases holds its token until
// the policy's token timeout reclaims it. A consumer whose work fits within
// the delivery's timeout can use consumer.Handler instead, which works,
// releases and then answers.
//
//	SCHEDULER_SIGNING_SECRET=... LISTEN_ADDR=:8081 go run ./examples/consumer
//
// SCHEDULER_SIGNING_SECRET may be a comma-separated list, as the scheduler's
// is while its secret is rotated.
//
// It logs the address it listens on when it is ready. With DELIVERIES_FILE
// set, it appends each delivery's message to that file as a JSON line.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
)

// maxBody bounds what the consumer reads of a delivery.
const maxBody = 4 << 20

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, log.Default()); err != nil {
		log.Fatal(err)
	}
}

// run serves deliveries until ctx ends, configured by getenv, logging to
// logger.
func run(ctx context.Context, getenv func(string) string, logger *log.Logger) error {
	secret := getenv("SCHEDULER_SIGNING_SECRET")
	if secret == "" {
		return errors.New("SCHEDULER_SIGNING_SECRET is not set")
	}
	addr := getenv("LISTEN_ADDR")
	if addr == "" {
		addr = ":8081"
	}
	record := recorder(getenv("DELIVERIES_FILE"))
	c := NewConsumer(ctx, []byte(secret), func(ctx context.Context, d *consumer.Delivery) error {
		logger.Printf("event %s (%d/%d of %s): payload %s", d.EventID, d.Index+1, d.Count, d.ScheduleID, d.Payload)
		return record(d)
	})
	c.Logf = logger.Printf
	// The scheduler's own form of the secret: during a rotation a
	// comma-separated list, and a delivery signed under any one is good.
	c.Verifier = consumer.NewVerifier(strings.Split(secret, ",")...)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	logger.Printf("consumer listening on http://%s (LISTEN_ADDR); use it as the schedules' target URL", ln.Addr())
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	c.Wait()
	return err
}

// recorder returns a function that appends each message to file as a JSON
// line, to look at the deliveries afterwards; with file empty it does
// nothing.
func recorder(file string) func(*consumer.Delivery) error {
	if file == "" {
		return func(*consumer.Delivery) error { return nil }
	}
	var mu sync.Mutex
	return func(d *consumer.Delivery) error {
		line, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("record the delivery: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("record the delivery: %w", err)
		}
		_, err = f.Write(append(line, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("record the delivery in %s: %w", file, err)
		}
		return nil
	}
}

// WorkFunc does the job of one event.
type WorkFunc func(ctx context.Context, d *consumer.Delivery) error

// Consumer is the http.Handler that receives deliveries.
type Consumer struct {
	ctx  context.Context
	work WorkFunc
	// Verifier checks the signatures (5 minutes' tolerance by default).
	Verifier *consumer.Verifier
	// Client makes the release calls, retrying them with backoff.
	Client *consumer.Client
	// Logf reports background failures. Default log.Printf.
	Logf func(format string, args ...any)

	wg sync.WaitGroup
}

// NewConsumer returns a Consumer that runs work for each verified delivery.
// ctx bounds the background work and release calls.
func NewConsumer(ctx context.Context, secret []byte, work WorkFunc) *Consumer {
	return &Consumer{
		ctx:      ctx,
		work:     work,
		Verifier: &consumer.Verifier{Secrets: [][]byte{secret}},
		Client:   consumer.NewClient(consumer.Options{}),
		Logf:     log.Printf,
	}
}

// ServeHTTP verifies and accepts one delivery. It answers 401 to a bad
// signature, 400 to a body that is not a delivery and 202 otherwise.
func (c *Consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// Verify the raw bytes: decoding and re-encoding would change them.
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if _, err := c.Verifier.Verify(r.Header.Get(consumer.HeaderSignature), r.Header.Get(consumer.HeaderTimestamp), body); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	d, err := consumer.Parse(body)
	if err != nil {
		http.Error(w, "body is not a delivery message", http.StatusBadRequest)
		return
	}
	c.wg.Go(func() { c.process(d) })
	w.WriteHeader(http.StatusAccepted)
}

// Wait waits for the background work of accepted deliveries.
func (c *Consumer) Wait() { c.wg.Wait() }

func (c *Consumer) process(d *consumer.Delivery) {
	if err := c.work(c.ctx, d); err != nil {
		// Release anyway: the event was delivered, and holding the token
		// would only stall the policy until the token timeout.
		c.Logf("event %s: work failed: %v", d.EventID, err)
	}
	// Releasing twice is harmless, so the client retries freely.
	if err := c.Client.Release(c.ctx, d); err != nil {
		c.Logf("event %s: %v", d.EventID, err)
	}
}
