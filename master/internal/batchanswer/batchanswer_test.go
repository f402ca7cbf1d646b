package batchanswer_test

import (
	"bytes"
	encjson "encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/master/internal/batchanswer"
)

// libraryOptions have github.com/go-json-experiment/json write what
// encoding/json writes: the legacy omitempty, nil slices as null, and <, >,
// &, U+2028 and U+2029 escaped.
var libraryOptions = json.JoinOptions(jsonv1.OmitEmptyWithLegacySemantics(true), json.FormatNilSliceAsNull(true),
	jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true))

// answer is the answer to a batch of 1,000 one-offs created in one second,
// as BenchmarkBatchIntake gets it.
func answer() *api.ScheduleBatchResult {
	out := &api.ScheduleBatchResult{}
	now := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	url := "https://consumer.example.com/hook"
	for i := range 1000 {
		run := now.Add(time.Duration(i*86) * time.Second)
		p := api.Payload(`{"order":` + strconv.Itoa(i) + `}`)
		out.Items = append(out.Items, api.ScheduleBatchItemResult{Index: i, Status: 201, Schedule: &api.Schedule{
			Children: 1, CreatedAt: now, EventCount: 1, Id: "sch_0LzKbF3x7v00" + strconv.Itoa(1000+i), MaxAttempts: 3,
			Misfire: api.MisfireFireOnce, Name: "job-" + strconv.Itoa(i), NextFireTimes: []time.Time{run}, Overlap: api.OverlapAllow,
			Payload: &p, RunAt: &run, State: api.ScheduleState("active"), Target: api.Target{Type: api.Http, Url: &url},
			Timezone: "UTC", UpdatedAt: now, Version: 1,
		}})
		out.Created++
	}
	return out
}

// TestAppendBatchResultWritesWhatTheLibraryWrites: the hand writer and
// the library, set to write as encoding/json does, agree byte for byte
// (the randomized differential test against encoding/json is master's
// TestAppendBatchResultAgreesWithEncodingJSON).
func TestAppendBatchResultWritesWhatTheLibraryWrites(t *testing.T) {
	out := answer()
	got, err := batchanswer.AppendBatchResult(nil, out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(out, libraryOptions)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := encjson.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.Equal(got, v1) {
		t.Fatalf("AppendBatchResult, the library and encoding/json differ:\n%.300s\n%.300s\n%.300s", got, want, v1)
	}
}

// BenchmarkAppendBatchResult is why the package exists: the answer to a
// batch of 1,000 one-offs written by hand, by github.com/go-json-experiment/json
// and by encoding/json.
//
//	go test -run '^$' -bench AppendBatchResult -count 5 ./master/internal/batchanswer/
func BenchmarkAppendBatchResult(b *testing.B) {
	out := answer()
	b.Run("Hand", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = batchanswer.AppendBatchResult(buf[:0], out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Library", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := json.MarshalWrite(&buf, out, libraryOptions); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodingJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encjson.Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
