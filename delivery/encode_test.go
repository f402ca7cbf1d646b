package delivery

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
)

func encodeEvent() *model.Event {
	fire := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	deadline := fire.Add(10 * time.Minute)
	expires := fire.Add(15 * time.Minute)
	return &model.Event{
		ID: "sch_7f3a.1772355600.v3.4", ScheduleID: "sch_7f3a", FireID: "sch_7f3a.1772355600.v3",
		FireTime: fire, Index: 4, Count: 50, Attempts: 0, Deadline: &deadline,
		Payload:  json.RawMessage(`{"report": "daily", "region": "eu"}`),
		PolicyID: "pol_1", TokenExpiresAt: &expires, ReleaseToken: "9c1d2e7a", Fence: 4,
	}
}

// checkSame fails unless AppendMessage writes what json.Marshal does.
func checkSame(t *testing.T, e *model.Event, base string) {
	t.Helper()
	want, wantErr := json.Marshal(NewMessage(e, base))
	prefix := []byte("prefix")
	got, err := AppendMessage(bytes.Clone(prefix), e, base)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendMessage error %v, json.Marshal error %v", err, wantErr)
	}
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("AppendMessage dropped what dst held: %q", got)
	}
	if wantErr == nil && !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendMessage wrote\n%s\njson.Marshal writes\n%s", got[len(prefix):], want)
	}
}

func TestAppendMessage(t *testing.T) {
	const base = "https://scheduler.example.com:8080"
	t.Run("OwnEncoderWritesTheCommonMessage", func(t *testing.T) {
		// The common message must not fall back, or nothing is saved.
		for _, e := range []*model.Event{encodeEvent(), func() *model.Event {
			e := encodeEvent()
			e.Deadline, e.Payload, e.PolicyID, e.TokenExpiresAt, e.Fence = nil, nil, "", nil, 0
			return e
		}()} {
			if _, ok := appendMessage(nil, e, base); !ok {
				t.Fatalf("appendMessage fell back for %+v", e)
			}
			checkSame(t, e, base)
		}
	})
	berlin := time.FixedZone("CET", 3600)
	odd := time.FixedZone("LMT", 3600+7)
	for _, tc := range []struct {
		name string
		edit func(e *model.Event)
	}{
		{"HTMLInID", func(e *model.Event) { e.ID = "a<b>&c" }},
		{"QuoteAndBackslash", func(e *model.Event) { e.ScheduleID = `s"\x` }},
		{"ControlAndUnicode", func(e *model.Event) { e.FireID = "f\n\t\u2028é\xff" }},
		{"PayloadWithHTML", func(e *model.Event) { e.Payload = json.RawMessage(`{"a":"<b>&"}`) }},
		{"PayloadLineSeparator", func(e *model.Event) { e.Payload = json.RawMessage("{\"a\":\"\u2028\"}") }},
		{"PayloadSpacesInStrings", func(e *model.Event) { e.Payload = json.RawMessage("{ \"a b\" :\n[1, 2,\t\"c  d\"] }") }},
		{"PayloadScalar", func(e *model.Event) { e.Payload = json.RawMessage(`null`) }},
		{"PayloadInvalid", func(e *model.Event) { e.Payload = json.RawMessage(`{not json`) }},
		{"PayloadInvalidWithSpace", func(e *model.Event) { e.Payload = json.RawMessage(`{"a": }`) }},
		{"DeadlineInZone", func(e *model.Event) { d := e.Deadline.In(berlin); e.Deadline = &d }},
		{"DeadlineSecondsOffset", func(e *model.Event) { d := e.Deadline.In(odd); e.Deadline = &d }},
		{"DeadlineOffsetOfADay", func(e *model.Event) { d := e.Deadline.In(time.FixedZone("far", 24*3600)); e.Deadline = &d }},
		{"DeadlineYear10000", func(e *model.Event) { d := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC); e.Deadline = &d }},
		{"NanosecondFireTime", func(e *model.Event) { e.FireTime = e.FireTime.Add(123456789).In(berlin) }},
		{"ZeroFireTime", func(e *model.Event) { e.FireTime = time.Time{} }},
		{"ZeroExpiry", func(e *model.Event) { e.TokenExpiresAt = &time.Time{} }},
		{"ExpiryWithoutPolicy", func(e *model.Event) { e.PolicyID = "" }},
		{"NegativeAndLargeNumbers", func(e *model.Event) { e.Index, e.Count, e.Attempts = -3, 1<<40, 41 }},
		{"NoFence", func(e *model.Event) { e.Fence = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := encodeEvent()
			tc.edit(e)
			checkSame(t, e, base)
		})
	}
	t.Run("BaseURLWithAmpersand", func(t *testing.T) {
		checkSame(t, encodeEvent(), "https://scheduler.example/?a=1&b=2")
	})
	t.Run("Random", func(t *testing.T) {
		seed := testseed.Get(t, "DELIVERY_TEST_SEED", 1)
		rng := rand.New(rand.NewPCG(seed, 0))
		alphabet := []rune("abc.-_09 \"\\<>&\n\u2028é\x00")
		word := func() string {
			r := make([]rune, rng.IntN(6))
			for i := range r {
				if rng.IntN(4) == 0 {
					r[i] = alphabet[rng.IntN(len(alphabet))]
				} else {
					r[i] = 'a' + rune(rng.IntN(26))
				}
			}
			return string(r)
		}
		zones := []*time.Location{time.UTC, berlin, odd, time.FixedZone("X", -9*3600-30*60)}
		when := func() time.Time {
			return time.Unix(rng.Int64N(1<<34)-1<<32, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
		}
		for range 2000 {
			e := encodeEvent()
			e.ID, e.ScheduleID, e.FireID, e.ReleaseToken = word(), word(), word(), word()
			e.FireTime, e.Index, e.Count, e.Attempts, e.Fence = when(), rng.IntN(1e6), rng.IntN(1e6), rng.IntN(9), rng.Int64N(3)
			if rng.IntN(3) == 0 {
				e.Deadline = nil
			} else {
				d := when()
				e.Deadline = &d
			}
			if rng.IntN(3) == 0 {
				e.PolicyID = ""
			}
			payload, _ := json.Marshal(map[string]any{word(): []any{word(), rng.IntN(100), nil}})
			switch rng.IntN(4) {
			case 0:
				payload = nil
			case 1:
				var indented bytes.Buffer
				_ = json.Indent(&indented, payload, "", " ")
				payload = indented.Bytes()
			}
			e.Payload = payload
			checkSame(t, e, base)
		}
	})
}

func BenchmarkAppendMessage(b *testing.B) {
	e := encodeEvent()
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendMessage(buf[:0], e, "https://scheduler.example.com")
		}
	})
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(NewMessage(e, "https://scheduler.example.com"))
		}
	})
}
