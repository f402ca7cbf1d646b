package consumer_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/consumer"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
)

// TestParseReadsWhatTheSchedulerSends decodes the scheduler's own encoding
// of an event with every field set, so that a field added to or renamed in
// the message shows here.
func TestParseReadsWhatTheSchedulerSends(t *testing.T) {
	fire := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	deadline, expires := fire.Add(10*time.Minute), fire.Add(15*time.Minute)
	e := &model.Event{
		ID: "sch_7f3a.1772355600.v3.4", ScheduleID: "sch_7f3a", FireID: "sch_7f3a.1772355600.v3", FireTime: fire,
		Index: 4, Count: 50, Attempts: 2, Deadline: &deadline, Payload: json.RawMessage(`{"report":"daily"}`),
		PolicyID: "pol_1", TokenExpiresAt: &expires, ReleaseToken: "0ffe5ddf94d9d65df6b79585205de19f", Fence: 3,
	}
	body, err := delivery.AppendMessage(nil, e, "https://scheduler.example.com")
	if err != nil {
		t.Fatal(err)
	}
	d, err := consumer.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	m := delivery.NewMessage(e, "https://scheduler.example.com")
	want := consumer.Delivery{
		EventID: m.EventID, ScheduleID: m.ScheduleID, FireID: m.FireID, FireTime: m.FireTime, Index: m.Index, Count: m.Count,
		Attempt: m.Attempt, Deadline: *m.Deadline, Payload: m.Payload,
		Release: consumer.Release{URL: m.Release.URL, Token: m.Release.Token, ExpiresAt: m.Release.ExpiresAt},
	}
	if got, _ := json.Marshal(d); string(got) != string(mustJSON(t, want)) || !d.HoldsToken() || d.Attempt != 3 {
		t.Fatalf("Parse:\n got %s\nwant %s", got, mustJSON(t, want))
	}
	// And nothing of the message is left out of Delivery.
	var all, known map[string]any
	_ = json.Unmarshal(body, &all)
	_ = json.Unmarshal(mustJSON(t, d), &known)
	for k := range all {
		if _, ok := known[k]; !ok {
			t.Errorf("the message's field %q is not in Delivery", k)
		}
	}

	batch, err := consumer.ParseBatch([]byte(`{"events":[` + string(body) + `,` + string(body) + `]}`))
	if err != nil || len(batch) != 2 || batch[1].EventID != e.ID {
		t.Fatalf("ParseBatch: %v, %v", batch, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRefusesWhatIsNoDelivery(t *testing.T) {
	for name, body := range map[string]string{
		"NotJSON":   `eventId=1`,
		"NoEventID": `{"release":{"url":"http://x/v1/events/e/release","token":"t"}}`,
		"NoToken":   `{"eventId":"e1","release":{"url":"http://x/v1/events/e1/release"}}`,
		"WrongType": `{"eventId":1}`,
	} {
		if _, err := consumer.Parse([]byte(body)); !errors.Is(err, consumer.ErrNotDelivery) {
			t.Errorf("%s: %v, want ErrNotDelivery", name, err)
		}
	}
	for _, body := range []string{`{"events":[null]}`, `{"eventId":"e1"}`, `{"events":null}`} {
		if _, err := consumer.ParseBatch([]byte(body)); !errors.Is(err, consumer.ErrNotDelivery) {
			t.Errorf("ParseBatch(%s): %v, want ErrNotDelivery", body, err)
		}
	}
}
