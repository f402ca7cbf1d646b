//go:build unix

package httpdelivery_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

// BenchmarkHTTPBatchDelivery is BenchmarkHTTPDeliveryKeepAlive for
// http_batch events: one op is one Deliver call of 500 events to one URL
// (one request with the defaults), to a sink in the same process that reads
// the body and answers 204.
func BenchmarkHTTPBatchDelivery(b *testing.B) {
	sink := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}
	srv := newBenchServer(b, sink)
	d := newDeliverer(b, httpdelivery.Config{Now: time.Now})
	const batch = 500
	events := make([]*model.Event, batch)
	for i := range events {
		events[i] = batchEvent("sch_1.1772366400.v1."+strconv.Itoa(i), srv)
	}
	benchDeliver(b, d, events)
}
