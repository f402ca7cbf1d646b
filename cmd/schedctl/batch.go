package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/schedulerd/schedulerd/client"
)

// Limits of one POST /v1/schedules/batch, the server's defaults
// (MaxBatchItems, MaxBatchBodyBytes).
const (
	batchMaxItems = 1000
	batchMaxBytes = 8 << 20
)

// scheduleCreateBatchFlags reads schedule bodies (a JSON array, or one JSON
// object a line) and creates them with POST /v1/schedules/batch, in chunks.
func scheduleCreateBatchFlags(fs *flag.FlagSet) func(*env, []string) error {
	var file string
	const fileUsage = "the items: a JSON array of schedule bodies (the API's ScheduleBatchItem), or one body a line (NDJSON); - reads stdin (required)"
	fs.StringVar(&file, "file", "", fileUsage)
	fs.StringVar(&file, "f", "", "short for --file")
	chunk := fs.Int("chunk", batchMaxItems, "items per request, at most "+strconv.Itoa(batchMaxItems))
	maxBytes := fs.Int("max-bytes", batchMaxBytes, "bytes per request body at most; an item larger than this goes alone")
	return func(e *env, _ []string) error {
		switch {
		case file == "":
			return fmt.Errorf("--file is required: %w", errUsage)
		case *chunk < 1 || *chunk > batchMaxItems:
			return fmt.Errorf("--chunk %d: want 1 to %d: %w", *chunk, batchMaxItems, errUsage)
		case *maxBytes < 1:
			return fmt.Errorf("--max-bytes %d: want a positive size: %w", *maxBytes, errUsage)
		}
		var r io.Reader = e.stdin
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		b := &batcher{e: e, chunk: *chunk, maxBytes: *maxBytes}
		return b.run(bufio.NewReaderSize(r, 1<<16))
	}
}

// batcher sends the items it reads in chunks and prints each item's result.
type batcher struct {
	e               *env
	chunk, maxBytes int

	table                     *tabwriter.Writer
	sent                      int // items sent and answered
	created, replayed, failed int
	// failures counts the failed items by distinct problem, in the order
	// first seen; only the first item of each gets a table row.
	failures []*failure
	byText   map[string]*failure
	// quota is the first quota refusal: the chunks after it are not sent.
	quota *client.Problem
}

// failure is one distinct problem of failed items.
type failure struct {
	status, first, n int
	text             string
}

func (b *batcher) run(r *bufio.Reader) error {
	b.byText = map[string]*failure{}
	if !b.e.json {
		b.table = tabwriter.NewWriter(b.e.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(b.table, "INDEX\tSTATUS\tID\tNAME OR PROBLEM")
	}
	next, err := itemReader(r)
	if err != nil {
		return err
	}
	var (
		items []json.RawMessage
		size  int
	)
	for {
		item, rerr := next()
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			// The chunk read so far is not sent: the input is wrong.
			if ferr := b.flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("input item %d: %w (items from %d on were not sent)", b.sent+len(items), rerr, b.sent)
		}
		if item != nil && len(items) > 0 && (len(items) == b.chunk || size+1+len(item) > b.maxBytes-len(`{"items":[]}`)) {
			if err := b.send(items); err != nil {
				return err
			}
			items, size = items[:0], 0
			if b.quota != nil {
				return b.quotaStop()
			}
		}
		if item != nil {
			items = append(items, item)
			size += 1 + len(item)
		}
		if rerr != nil { // io.EOF
			break
		}
	}
	if len(items) > 0 {
		if err := b.send(items); err != nil {
			return err
		}
	}
	if err := b.flush(); err != nil {
		return err
	}
	switch {
	case b.sent == 0:
		return errors.New("the input holds no items")
	case b.quota != nil:
		return fmt.Errorf("%d of %d items failed; %s", b.failed, b.sent, quotaText(b.quota))
	case b.failed > 0:
		return fmt.Errorf("%d of %d items failed", b.failed, b.sent)
	}
	return nil
}

// quotaStop ends a run after a chunk with a quota refusal: the items after
// it would be refused alike.
func (b *batcher) quotaStop() error {
	if err := b.flush(); err != nil {
		return err
	}
	return fmt.Errorf("%d of %d items failed; %s; the items from %d on were not sent", b.failed, b.sent, quotaText(b.quota), b.sent)
}

// quotaText names the quota a problem refused an item for.
func quotaText(p *client.Problem) string {
	name := p.Title
	if p.Errors != nil && len(*p.Errors) > 0 {
		name = (*p.Errors)[0].Field
		if _, f, ok := strings.Cut(name, "]."); ok {
			name = f
		}
	}
	return "the tenant's " + name + " quota refused items (ask the operator to raise it, or delete schedules)"
}

// isQuota reports whether p is a refusal for a tenant quota, which the
// items after it would meet too.
func isQuota(p *client.Problem) bool {
	return p != nil && strings.HasSuffix(p.Type, "/quota")
}

// itemReader returns a function that reads one item at a time from a JSON
// array or from a stream of JSON values (NDJSON); io.EOF after the last.
func itemReader(r *bufio.Reader) (func() (json.RawMessage, error), error) {
	dec := json.NewDecoder(r)
	first, err := firstByte(r)
	if err != nil {
		return nil, err
	}
	if first == '[' {
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		closed := false
		return func() (json.RawMessage, error) {
			if closed {
				return nil, io.EOF
			}
			if !dec.More() {
				if _, err := dec.Token(); err != nil {
					return nil, fmt.Errorf("not valid JSON: %w", err)
				}
				closed = true
				if _, err := dec.Token(); !errors.Is(err, io.EOF) {
					return nil, errors.New("data after the JSON array")
				}
				return nil, io.EOF
			}
			var item json.RawMessage
			if err := dec.Decode(&item); err != nil {
				return nil, fmt.Errorf("not valid JSON: %w", err)
			}
			return item, nil
		}, nil
	}
	return func() (json.RawMessage, error) {
		var item json.RawMessage
		if err := dec.Decode(&item); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
		return item, nil
	}, nil
}

// firstByte peeks at the first byte after white space; io.EOF is an empty
// input, which holds no items.
func firstByte(r *bufio.Reader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, nil
			}
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, r.UnreadByte()
		}
	}
}

// send posts one chunk and prints its items' results. A chunk refused as a
// whole for its content (400, 413) fails its items and the next chunks go
// on; any other failure (the key, the rate limit, the server, the network)
// stops the command, since the next chunks would fail alike.
func (b *batcher) send(items []json.RawMessage) error {
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i, it := range items {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(it)
	}
	body.WriteString(`]}`)
	first, last := b.sent, b.sent+len(items)-1
	raw, err := call(b.e.api.CreateSchedulesBatchWithBody(b.e.ctx, "application/json", &body))
	var ae *apiError
	if errors.As(err, &ae) && (ae.status == http.StatusBadRequest || ae.status == http.StatusRequestEntityTooLarge) {
		for i := range items {
			if perr := b.print(client.ScheduleBatchItemResult{Index: first + i, Status: ae.status, Problem: &ae.p}); perr != nil {
				return perr
			}
		}
		b.sent += len(items)
		return nil
	}
	if err != nil {
		if ferr := b.flush(); ferr != nil {
			return ferr
		}
		return fmt.Errorf("items %d to %d: %w\n(their outcome is unknown unless the answer says nothing was written; items after %d were not sent)", first, last, err, last)
	}
	var res client.ScheduleBatchResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("items %d to %d: decode the answer: %w", first, last, err)
	}
	if len(res.Items) != len(items) {
		return fmt.Errorf("items %d to %d: the answer has %d results for %d items", first, last, len(res.Items), len(items))
	}
	for _, it := range res.Items {
		local := it.Index
		it.Index = first + local
		if it.Problem != nil {
			p := renumber(*it.Problem, local, it.Index)
			it.Problem = &p
		}
		if err := b.print(it); err != nil {
			return err
		}
		switch {
		case it.Problem != nil:
			if isQuota(it.Problem) && b.quota == nil {
				b.quota = it.Problem
			}
		case it.Replayed != nil && *it.Replayed:
			b.replayed++
		default:
			b.created++
		}
	}
	b.sent += len(items)
	return nil
}

// renumber names the item by its index in the input, not in its chunk:
// "items[3].cron" becomes "items[1003].cron".
func renumber(p client.Problem, local, global int) client.Problem {
	from, to := "items["+strconv.Itoa(local)+"]", "items["+strconv.Itoa(global)+"]"
	if p.Detail != nil {
		d := strings.Replace(*p.Detail, from, to, 1)
		p.Detail = &d
	}
	if p.Errors != nil {
		fields := make([]client.FieldProblem, len(*p.Errors))
		for i, f := range *p.Errors {
			if rest, ok := strings.CutPrefix(f.Field, from); ok {
				f.Field = to + rest
			}
			fields[i] = f
		}
		p.Errors = &fields
	}
	return p
}

// print counts a failed item and writes one item's result: a table row, or
// a JSON line with --json. A failure with the same status and problem as an
// earlier item is counted, not printed again in the table.
func (b *batcher) print(it client.ScheduleBatchItemResult) error {
	if it.Problem != nil {
		b.failed++
		text := strconv.Itoa(it.Status) + "\x00" + problemText(it.Problem, it.Index)
		f := b.byText[text]
		if f != nil {
			f.n++
			if !b.e.json {
				return nil
			}
		} else {
			f = &failure{status: it.Status, first: it.Index, n: 1, text: problemText(it.Problem, it.Index)}
			b.byText[text] = f
			b.failures = append(b.failures, f)
		}
	}
	if b.e.json {
		line, err := json.Marshal(it)
		if err != nil {
			return err
		}
		_, err = b.e.out.Write(append(line, '\n'))
		return err
	}
	id, what := "-", ""
	switch {
	case it.Schedule != nil:
		id, what = it.Schedule.Id, it.Schedule.Name
		if it.Replayed != nil && *it.Replayed {
			what += " (replayed)"
		}
	case it.Problem != nil:
		what = problemText(it.Problem, it.Index)
	}
	_, err := fmt.Fprintf(b.table, "%d\t%d\t%s\t%s\n", it.Index, it.Status, id, what)
	return err
}

// problemText is an item's problem on one line: its fields with their
// reasons, or its title and detail.
func problemText(p *client.Problem, index int) string {
	prefix := "items[" + strconv.Itoa(index) + "]"
	var parts []string
	if p.Errors != nil {
		for _, f := range *p.Errors {
			field := strings.TrimPrefix(strings.TrimPrefix(f.Field, prefix), ".")
			if field == "" {
				field = "item"
			}
			parts = append(parts, field+": "+f.Reason)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, p.Title)
		if p.Detail != nil && *p.Detail != "" {
			parts[0] += ": " + strings.TrimPrefix(*p.Detail, prefix+": ")
		}
	}
	return strings.Join(parts, "; ")
}

// flush prints the table so far with the counts under it.
func (b *batcher) flush() error {
	if b.table == nil {
		return nil
	}
	if err := b.table.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(b.e.out, "\ncreated %d, replayed %d, failed %d\n", b.created, b.replayed, b.failed); err != nil {
		return err
	}
	if b.failed == len(b.failures) {
		return nil
	}
	// Some failures were not printed: the count of each.
	w := tabwriter.NewWriter(b.e.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nFAILED\tSTATUS\tFIRST INDEX\tPROBLEM")
	for _, f := range b.failures {
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\n", f.n, f.status, f.first, f.text)
	}
	return w.Flush()
}
