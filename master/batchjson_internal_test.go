package master

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/master/internal/batchanswer"
)

// TestAppendBatchResultAgreesWithEncodingJSON checks batchanswer.AppendBatchResult
// against encoding/json on random batch answers whose strings, instants
// and payloads take every branch (escapes, HTML characters, invalid UTF-8,
// years and offsets MarshalJSON refuses, payloads with white space): the
// bytes are the same, or both fail. A failure prints the seed to rerun it
// with -master.scanseed.
func TestAppendBatchResultAgreesWithEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(*scanSeed, 5))
	failed := 0
	for i := range *scanCases / 20 {
		out := randomBatchResult(r)
		want, werr := json.Marshal(out)
		got, gerr := batchanswer.AppendBatchResult(nil, out)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("case %d of seed %d: error %v, encoding/json's %v", i, *scanSeed, gerr, werr)
		}
		if werr != nil {
			failed++
			continue
		}
		if !bytes.Equal(got, want) {
			at := 0
			for at < len(got) && at < len(want) && got[at] == want[at] {
				at++
			}
			t.Fatalf("case %d of seed %d: differs at byte %d:\n%s\nencoding/json:\n%s", i, *scanSeed, at, tail(got, at), tail(want, at))
		}
	}
	t.Logf("%d of %d answers fail to encode", failed, *scanCases/20)
}

func tail(b []byte, at int) string {
	return string(b[max(0, at-80):min(len(b), at+80)])
}

// TestWriteBatchResultWritesWhatJSONWrites checks the whole answer, its
// header and its final newline against c.JSON, with the answers written
// one after the other from the same pool of buffers.
func TestWriteBatchResultWritesWhatJSONWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 6))
	encodable := func() *api.ScheduleBatchResult {
		out := randomBatchResult(r)
		for _, err := json.Marshal(out); err != nil || len(out.Items) < 5; _, err = json.Marshal(out) {
			out = randomBatchResult(r)
		}
		return out
	}
	var answers sync.Pool
	for _, out := range []*api.ScheduleBatchResult{encodable(), {Items: []api.ScheduleBatchItemResult{}}, encodable(), encodable()} {
		e := echo.New()
		var recs [2]*httptest.ResponseRecorder
		for i, write := range []func(c echo.Context) error{
			func(c echo.Context) error { return writeBatchResult(c, out, &answers) },
			func(c echo.Context) error { return c.JSON(http.StatusOK, out) },
		} {
			recs[i] = httptest.NewRecorder()
			if err := write(e.NewContext(httptest.NewRequest(http.MethodPost, "/v1/schedules/batch", nil), recs[i])); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		if recs[0].Code != recs[1].Code || recs[0].Header().Get("Content-Type") != recs[1].Header().Get("Content-Type") ||
			!bytes.Equal(recs[0].Body.Bytes(), recs[1].Body.Bytes()) {
			t.Fatalf("writeBatchResult: %d %q %q\nc.JSON: %d %q %q", recs[0].Code, recs[0].Header().Get("Content-Type"), recs[0].Body.Bytes(),
				recs[1].Code, recs[1].Header().Get("Content-Type"), recs[1].Body.Bytes())
		}
	}
}

// randomBatchResult makes an answer of up to 20 items, problems and
// schedules, with values drawn from lists that cover batchanswer.AppendBatchResult's
// branches.
func randomBatchResult(r *rand.Rand) *api.ScheduleBatchResult {
	texts := []string{"job-1", "", "a\"b", `back\slash`, "tab\t", "nul\x00", "<b>&amp;</b>", "é", "\u2028\u2029", "bad\xff", "\x7f", "https://consumer.example.com/hook?a=1&b=2", "sch_2222222222222222"}
	text := func() string { return texts[r.IntN(len(texts))] }
	textPtr := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		s := text()
		return &s
	}
	// One answer in ten may hold a value encoding/json refuses.
	broken := r.IntN(10) == 0
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("x", -(23*3600 + 59*60 + 59)), time.FixedZone("", 90)}
	if broken {
		zones = append(zones, time.FixedZone("", 24*3600))
	}
	years := []int{2030, 1970, 0, 9999}
	if broken {
		years = append(years, 10000, -1)
	}
	newInstant := func() time.Time {
		y := 2030
		if r.IntN(20) == 0 {
			y = years[r.IntN(len(years))]
		}
		z := time.UTC
		if r.IntN(4) == 0 {
			z = zones[r.IntN(len(zones))]
		}
		return time.Date(y, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), []int{0, 0, 500_000_000, 123_456_789, 1000}[r.IntN(5)], z)
	}
	// Times repeat, as a batch's do (batchanswer.AppendBatchResult remembers them), and
	// come back in another zone.
	var seen []time.Time
	instant := func() time.Time {
		if len(seen) > 0 && r.IntN(3) == 0 {
			t := seen[r.IntN(len(seen))]
			if r.IntN(3) == 0 {
				t = t.In(zones[r.IntN(len(zones))])
			}
			return t
		}
		t := newInstant()
		seen = append(seen, t)
		return t
	}
	instantPtr := func() *time.Time {
		if r.IntN(2) == 0 {
			return nil
		}
		t := instant()
		return &t
	}
	payloads := []string{`{"order":1}`, `"text"`, `0`, `[1,null]`, `{"a": 1}`, "{\n\"a\":1}", `"<b>"`, `"&"`, `"` + "\u2028" + `"`, `{"a":"é"}`, `{`, ``}
	out := &api.ScheduleBatchResult{Items: make([]api.ScheduleBatchItemResult, r.IntN(21))}
	for i := range out.Items {
		it := &out.Items[i]
		it.Index = i
		if r.IntN(5) == 0 {
			it.Status = 400 + r.IntN(30)
			d := text()
			it.Problem = &api.Problem{Type: problemTypeBase + "invalid", Title: text(), Status: it.Status, Detail: &d,
				Errors: &[]api.FieldProblem{{Field: "items[" + itoa(i) + "].name", Reason: text()}}}
			out.Failed++
			continue
		}
		if r.IntN(4) == 0 {
			replayed := r.IntN(2) == 0
			it.Replayed = &replayed
		}
		it.Status = http.StatusCreated
		out.Created++
		s := &api.Schedule{
			Children: r.IntN(3), CreatedAt: instant(), Cron: textPtr(), EndAt: instantPtr(), EventCount: r.IntN(5) - 1,
			Id: text(), MaxAttempts: r.IntN(101), Misfire: api.Misfire(text()), Name: text(), Overlap: api.Overlap(text()),
			PolicyId: textPtr(), Priority: r.IntN(2001) - 1000, RunAt: instantPtr(), Spread: r.IntN(2) == 0, StartAt: instantPtr(),
			State: api.ScheduleState(text()), Target: api.Target{Type: api.TargetType(text()), Url: textPtr(), QueueUrl: textPtr()},
			Timezone: text(), UpdatedAt: instant(), Version: r.Int64N(1 << 40), Window: textPtr(),
		}
		switch r.IntN(3) {
		case 0:
		case 1:
			s.NextFireTimes = []time.Time{}
		default:
			for range 1 + r.IntN(5) {
				s.NextFireTimes = append(s.NextFireTimes, instant())
			}
		}
		if r.IntN(3) > 0 {
			p := api.Payload(payloads[r.IntN(len(payloads))])
			if !broken && (len(p) == 0 || string(p) == `{`) {
				p = api.Payload(`{"order":2}`)
			}
			s.Payload = &p
		}
		it.Schedule = s
	}
	return out
}

// TestAppendBatchResultWritesEveryField fills every field of a batch
// answer, down to its schedule's target, with a value that is not zero (so
// that no omitempty hides one) and checks batchanswer.AppendBatchResult against
// encoding/json: a field added to the API's types fails it until
// batchanswer writes it.
func TestAppendBatchResultWritesEveryField(t *testing.T) {
	out := &api.ScheduleBatchResult{}
	fill(t, reflect.ValueOf(out).Elem())
	want, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := batchanswer.AppendBatchResult(nil, out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("batchanswer.AppendBatchResult wrote\n%s\nencoding/json\n%s", got, want)
	}
}

// fill sets v, and every field, element and pointee under it, to a value
// that is not zero.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)))
		return
	case json.RawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(`{"a":1}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k)
		fill(t, e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	default:
		t.Fatalf("fill: a field of kind %s (%s)", v.Kind(), v.Type())
	}
}
