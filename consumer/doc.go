// Package consumer is the library for services that receive schedulerd's
// deliveries: it verifies a delivery's signature, parses it into a
// Delivery, and makes the release and extend calls that give the event's
// throttling token back, with retries that honour 429/503 and Retry-After.
//
// Handler does all of it for an http or http_batch target:
//
//	h := &consumer.Handler{
//		Verifier: consumer.NewVerifier(os.Getenv("SCHEDULER_SIGNING_SECRET")),
//		Func: func(ctx context.Context, d *consumer.Delivery) error {
//			return sendReport(ctx, d.Payload) // nil: released and acknowledged
//		},
//	}
//	http.ListenAndServe(":8081", h)
//
// Package consumer/sqsconsumer is the same for an SQS queue. A consumer
// that works on its own terms uses the parts: Verifier.Verify on the raw
// body, Parse, and Client.Release when the work is done.
//
// The package depends on the standard library and the API types of
// package client only.
package consumer
