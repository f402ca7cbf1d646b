package consumer_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
)

func ExampleHandler() {
	h := &consumer.Handler{
		// During a rotation, list the new and the old secret.
		Verifier: consumer.NewVerifier("s3cret"),
		Func: func(ctx context.Context, d *consumer.Delivery) error {
			fmt.Printf("event %s (%d of %d): %s\n", d.EventID, d.Index+1, d.Count, d.Payload)
			return nil // done: released (if it holds a token) and answered 204
		},
	}
	// http.ListenAndServe(":8081", h) in a service; here one delivery,
	// signed as the scheduler signs it.
	body := `{"eventId":"sch_1.1772355600.v1.0","scheduleId":"sch_1","fireId":"sch_1.1772355600.v1",` +
		`"fireTime":"2026-03-01T09:00:00Z","index":0,"count":1,"attempt":1,"payload":{"report":"daily"},` +
		`"release":{"url":"http://127.0.0.1:8080/v1/events/sch_1.1772355600.v1.0/release","token":"t0k"}}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(ts + "." + body))
	req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	req.Header.Set(consumer.HeaderTimestamp, ts)
	req.Header.Set(consumer.HeaderSignature, "v1="+hex.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// event sch_1.1772355600.v1.0 (1 of 1): {"report":"daily"}
	// 204
}
