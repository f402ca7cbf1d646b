package httpdelivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
)

// Defaults of the http_batch Config fields.
const (
	DefaultBatchMaxEvents = 500
	DefaultBatchMaxBytes  = 1 << 20
)

// HeaderEventCount carries the number of events in an http_batch request.
const HeaderEventCount = "X-Scheduler-Event-Count"

// batchAnswerLimit bounds how much of a 2xx answer to an http_batch request
// is read for its retry list. A longer answer fails every event of the
// request (retryable): its list could not be read whole.
const batchAnswerLimit = 1 << 20

// ErrRetryRequested is wrapped by the error of an http_batch event that the
// consumer's 2xx answer named in its retry list.
var ErrRetryRequested = errors.New("the consumer asked to retry the event")

// BatchBody is the JSON body of an http_batch request.
type BatchBody struct {
	Events []delivery.Message `json:"events"`
}

// BatchAnswer is the JSON body a consumer may answer an http_batch request
// with, along with a 2xx status: the ids of the events of the request to
// send again later. Ids of events not in the request are ignored.
type BatchAnswer struct {
	Retry []string `json:"retry"`
}

// batchPrefix and batchSuffix enclose the messages of a BatchBody.
const (
	batchPrefix = `{"events":[`
	batchSuffix = `]}`
)

// hasBatch reports whether events hold an http_batch event.
func hasBatch(events []*model.Event) bool {
	for _, e := range events {
		if e != nil && e.Target.Type == model.TargetHTTPBatch {
			return true
		}
	}
	return false
}

// batchRequest is one POST of http_batch events: idx are their positions in
// the Deliver call, body the encoded BatchBody.
type batchRequest struct {
	target *url.URL
	idx    []int
	body   []byte
}

// deliverBatches delivers events of which some are http_batch: those are
// grouped by URL, in the order of events, into requests of at most
// BatchMaxEvents events and BatchMaxBytes bytes (a message larger than that
// goes alone); the others go one by one. Up to Concurrency requests run at
// once.
func (d *Deliverer) deliverBatches(ctx context.Context, events []*model.Event) []delivery.Result {
	results := make([]delivery.Result, len(events))
	var singles []int
	var urls []string
	groups := map[string][]int{}
	for i, e := range events {
		switch {
		case e == nil:
			results[i] = delivery.Result{Err: errors.New("httpdelivery: nil event"), Permanent: true}
		case e.Target.Type != model.TargetHTTPBatch:
			singles = append(singles, i)
		default:
			if _, ok := groups[e.Target.URL]; !ok {
				urls = append(urls, e.Target.URL)
			}
			groups[e.Target.URL] = append(groups[e.Target.URL], i)
		}
	}
	var reqs []batchRequest
	for _, raw := range urls {
		reqs = d.packBatches(reqs, raw, events, groups[raw], results)
	}

	jobs := len(singles) + len(reqs)
	run := func(j int) {
		if j < len(singles) {
			i := singles[j]
			results[i] = d.deliverOne(ctx, events[i])
			return
		}
		d.sendBatch(ctx, reqs[j-len(singles)], events, results)
	}
	if jobs == 1 {
		run(0)
		return results
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(d.cfg.Concurrency, jobs) {
		d.workers.GoWith(&wg, func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= jobs {
					return
				}
				run(j)
			}
		})
	}
	wg.Wait()
	return results
}

// packBatches appends to reqs the requests of the events idx, all to URL
// raw; an event that cannot go gets its Permanent result instead.
func (d *Deliverer) packBatches(reqs []batchRequest, raw string, events []*model.Event, idx []int, results []delivery.Result) []batchRequest {
	target, err := url.Parse(raw)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		for _, i := range idx {
			results[i] = permanent(fmt.Errorf("httpdelivery: event %s: target URL is not an absolute http(s) URL", events[i].ID))
		}
		return reqs
	}
	var cur batchRequest
	flush := func() {
		if len(cur.idx) > 0 {
			cur.body = append(cur.body, batchSuffix...)
			reqs = append(reqs, cur)
		}
		cur = batchRequest{}
	}
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	for _, i := range idx {
		msg, err := delivery.AppendMessage((*bp)[:0], events[i], d.cfg.ReleaseBaseURL)
		*bp = msg
		if err != nil {
			results[i] = permanent(fmt.Errorf("httpdelivery: event %s: encode message: %w", events[i].ID, err))
			continue
		}
		if len(cur.idx) > 0 && (len(cur.idx) == d.cfg.BatchMaxEvents ||
			len(cur.body)+1+len(msg)+len(batchSuffix) > d.cfg.BatchMaxBytes) {
			flush()
		}
		if len(cur.idx) == 0 {
			cur.target = target
			cur.body = append(make([]byte, 0, min(d.cfg.BatchMaxBytes, len(batchPrefix)+len(batchSuffix)+len(msg)*min(len(idx), d.cfg.BatchMaxEvents))), batchPrefix...)
		} else {
			cur.body = append(cur.body, ',')
		}
		cur.body = append(cur.body, msg...)
		cur.idx = append(cur.idx, i)
	}
	flush()
	return reqs
}

// sendBatch POSTs r and sets the results of its events.
func (d *Deliverer) sendBatch(ctx context.Context, r batchRequest, events []*model.Event, results []delivery.Result) {
	each := func(f func(e *model.Event) delivery.Result) {
		for _, i := range r.idx {
			results[i] = f(events[i])
		}
	}
	client := d.client
	if tenant, rule := netguard.TargetRuleFrom(ctx); rule != nil && !rule.NameAllowed(r.target.Hostname()) {
		// Its addresses decide: dial them for this tenant only.
		client = d.ruled.client(tenant, rule, d.transport)
		ctx = context.WithValue(ctx, dialHostKey{}, r.target.Hostname())
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.target.String(), bytes.NewReader(r.body))
	if err != nil {
		each(func(e *model.Event) delivery.Result {
			return permanent(fmt.Errorf("httpdelivery: event %s: build request: %w", e.ID, err))
		})
		return
	}
	ts := strconv.AppendInt(nil, d.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	req.Header.Set(HeaderEventCount, strconv.Itoa(len(r.idx)))
	req.Header.Set(HeaderTimestamp, string(ts))
	req.Header.Set(HeaderSignature, string(d.appendSignature(nil, ts, r.body)))
	// One request carries several events: the first one's attempt names
	// the trace.
	if first := events[r.idx[0]]; first.TraceParent != "" {
		req.Header[delivery.TraceParent] = []string{first.TraceParent}
		if first.TraceState != "" {
			req.Header[delivery.TraceState] = []string{first.TraceState}
		}
	}

	resp, err := client.Do(req)
	if err != nil {
		// err is a *url.Error; its text holds the URL with any password
		// redacted.
		refused := errors.Is(err, ErrTargetRefused)
		each(func(e *model.Event) delivery.Result {
			return delivery.Result{Err: fmt.Errorf("httpdelivery: event %s: batch of %d: %w", e.ID, len(r.idx), err), Permanent: refused}
		})
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		// The answer is the one of every event of the request.
		first := d.result(events[r.idx[0]], r.target, resp)
		each(func(e *model.Event) delivery.Result {
			res := first
			if se, ok := first.Err.(*StatusError); ok {
				own := *se
				own.EventID = e.ID
				res.Err = &own
			}
			return res
		})
		return
	}
	retry, err := readBatchAnswer(resp.Body)
	each(func(e *model.Event) delivery.Result {
		res := delivery.Result{StatusCode: resp.StatusCode}
		switch {
		case err != nil:
			res.Err = fmt.Errorf("httpdelivery: event %s: POST %s: status %d: %w", e.ID, r.target.Redacted(), resp.StatusCode, err)
		case retry[e.ID]:
			res.Err = fmt.Errorf("httpdelivery: event %s: POST %s: status %d: %w", e.ID, r.target.Redacted(), resp.StatusCode, ErrRetryRequested)
		}
		return res
	})
}

// readBatchAnswer reads a 2xx answer's body and returns the ids its retry
// list names; none if the body is not a JSON object. An answer longer than
// batchAnswerLimit is an error.
func readBatchAnswer(body io.Reader) (map[string]bool, error) {
	b, err := io.ReadAll(io.LimitReader(body, batchAnswerLimit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(b) > batchAnswerLimit {
		return nil, fmt.Errorf("answer longer than %d bytes", batchAnswerLimit)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, nil
	}
	var a BatchAnswer
	if json.Unmarshal(b, &a) != nil || len(a.Retry) == 0 {
		return nil, nil
	}
	retry := make(map[string]bool, len(a.Retry))
	for _, id := range a.Retry {
		retry[id] = true
	}
	return retry, nil
}
