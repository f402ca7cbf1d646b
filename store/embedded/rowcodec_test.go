package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
)

// fill sets every exported field of the struct *p to a non-zero value
// derived from n (different n, different values), so that a codec that
// forgets a field fails its round trip. skip names fields left alone.
func fill(t *testing.T, p any, n int, skip ...string) {
	t.Helper()
	v := reflect.ValueOf(p).Elem()
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() || strings.Contains(","+strings.Join(skip, ",")+",", ","+sf.Name+",") {
			continue
		}
		fillValue(t, f, sf.Name, n)
	}
}

func fillValue(t *testing.T, f reflect.Value, name string, n int) {
	t.Helper()
	tm := time.Unix(int64(1_900_000_000+n*1000+len(name)), int64(n*7+len(name))).UTC()
	switch {
	case f.Type() == reflect.TypeOf(time.Time{}):
		f.Set(reflect.ValueOf(tm))
	case f.Type() == reflect.TypeOf(&time.Time{}):
		f.Set(reflect.ValueOf(&tm))
	case f.Type() == reflect.TypeOf(json.RawMessage{}):
		f.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"%s":%d}`, name, n))))
	case f.Kind() == reflect.String:
		f.SetString(fmt.Sprintf("%s-%d", name, n))
	case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
		f.SetInt(int64(n*10 + len(name)))
	case f.Kind() == reflect.Bool:
		f.SetBool(true)
	case f.Type() == reflect.TypeOf(map[string]string{}):
		f.Set(reflect.ValueOf(map[string]string{name: fmt.Sprint(n)}))
	case f.Type() == reflect.TypeOf([]string{}):
		f.Set(reflect.ValueOf([]string{name, fmt.Sprint(n)}))
	case f.Kind() == reflect.Struct:
		for i := range f.NumField() {
			fillValue(t, f.Field(i), name+f.Type().Field(i).Name, n)
		}
	case f.Kind() == reflect.Slice:
		f.Set(reflect.MakeSlice(f.Type(), 2, 2))
		for i := range 2 {
			fillValue(t, f.Index(i), name, n+i)
		}
	case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
		f.Set(reflect.New(f.Type().Elem()))
		fillValue(t, f.Elem(), name, n)
	default:
		t.Fatalf("fill: field %s of kind %s: teach fill this kind", name, f.Kind())
	}
}

func TestScheduleCodecRoundTrip(t *testing.T) {
	for name, sc := range map[string]*model.Schedule{"full": {}, "zero": {ID: "s"}} {
		if name == "full" {
			fill(t, sc, 1)
		}
		var codes memCodes
		raw, err := encodeSchedule(sc, &codes)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSchedule([]byte(sc.ID), raw, &codes)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, sc) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, sc)
		}
		for i := range raw {
			if _, err := decodeSchedule([]byte(sc.ID), raw[:i], &codes); err == nil {
				t.Fatalf("%s: truncated to %d of %d bytes: decoded without error", name, i, len(raw))
			}
		}
	}
}

func TestFireCodecRoundTrip(t *testing.T) {
	for name, f := range map[string]*model.Fire{"full": {}, "zero": {ID: "f"}} {
		if name == "full" {
			// Watched and FinishedAt live in the watch buckets, not the row.
			fill(t, f, 1, "Watched", "FinishedAt")
		}
		raw := encodeFire(f)
		got, err := decodeFire([]byte(f.ID), raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, f) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, f)
		}
		for i := range raw {
			if _, err := decodeFire([]byte(f.ID), raw[:i]); err == nil {
				t.Fatalf("%s: truncated to %d of %d bytes: decoded without error", name, i, len(raw))
			}
		}
	}
}

// A canonical row keeps every field of its event, whether it equals the
// head's or not, and an event as the emitter writes it (only status, shard
// and launch time differ from the head) takes a few bytes.
func TestEventRowRoundTrip(t *testing.T) {
	// TakenOver and TraceState are never stored.
	head := &model.Event{}
	fill(t, head, 1, "TakenOver", "TraceState")
	head.ID, head.Index = "", 0
	for name, mk := range map[string]func() *model.Event{
		"every field differs": func() *model.Event {
			e := &model.Event{}
			fill(t, e, 2, "TakenOver", "TraceState")
			return e
		},
		"same as the head": func() *model.Event { e := *head; return &e },
		"per-event fields only": func() *model.Event {
			e := *head
			e.Status, e.Shard, e.LaunchAt = model.EventPending, 5, head.LaunchAt.Add(1500*time.Millisecond)
			e.ReleaseToken, e.LastError, e.Attempts, e.Fence, e.TokenExpiresAt, e.DeliveredAt, e.FinishedAt, e.TokenTimedOut = "", "", 0, 0, nil, nil, nil, false
			return &e
		},
		"zero times": func() *model.Event {
			e := *head
			e.LaunchAt, e.FireTime, e.CreatedAt, e.UpdatedAt, e.Deadline, e.Payload = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil, nil
			return &e
		},
	} {
		e := mk()
		e.FireID, e.TenantID, e.ScheduleID, e.Index = head.FireID, head.TenantID, head.ScheduleID, 42
		e.ID = model.EventID(e.FireID, e.Index)
		if !canonical(e, head) {
			t.Fatalf("%s: not canonical", name)
		}
		raw := encodeRow(e, head, nil)
		got, err := decodeRow(raw, head, 42, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, e)
		}
		if name == "per-event fields only" && len(raw) > 12 {
			t.Errorf("%s: row of %d bytes, want at most 12", name, len(raw))
		}
		for i := 1; i < len(raw); i++ {
			if _, err := decodeRow(raw[:i], head, 42, nil); err == nil {
				t.Fatalf("%s: truncated to %d of %d bytes: decoded without error", name, i, len(raw))
			}
		}
	}
}

// A release token of lower-case hex digits (the emitter's) is kept as the
// bytes they give, half its text; the store's own token for the event id
// (Store.ReleaseToken) as a flag; any other token as it is. All read back
// exactly; a derived token read without the key fails.
func TestEventRowReleaseTokens(t *testing.T) {
	head := &model.Event{}
	fill(t, head, 1, "TakenOver", "TraceState")
	head.ID, head.Index, head.ReleaseToken = "", 0, ""
	emitter := strings.Repeat("0123456789abcdef", 2)
	key := newTokenKey(bytes.Repeat([]byte{7}, tokenKeyLen))
	e := *head
	e.FireID, e.TenantID, e.ScheduleID, e.Index = head.FireID, head.TenantID, head.ScheduleID, 3
	e.ID, e.Status = model.EventID(e.FireID, 3), model.EventPending
	derived := must(key.token(e.ID))
	if other := must(newTokenKey(bytes.Repeat([]byte{8}, tokenKeyLen)).token(e.ID)); other == derived || len(derived) != 32 {
		t.Fatalf("tokens %q and %q of two keys", derived, other)
	}
	size := map[string]int{}
	for _, token := range []string{"", emitter, "0", "0a1", "ABCDEF", "0123456789abcdeF", "zz", "rt", emitter + "00", derived} {
		e.ReleaseToken = token
		raw := encodeRow(&e, head, key)
		got, err := decodeRow(raw, head, 3, key)
		if err != nil {
			t.Fatalf("token %q: %v", token, err)
		}
		if !reflect.DeepEqual(got, &e) {
			t.Errorf("token %q: round trip\n got %+v\nwant %+v", token, got, &e)
		}
		size[token] = len(raw)
		if _, err := decodeRow(raw, head, 3, nil); (err != nil) != (token == derived) {
			t.Errorf("token %q read without the key: error %v", token, err)
		}
	}
	if size[derived] != size[""] {
		t.Errorf("a derived token adds %d bytes to a row, want none", size[derived]-size[""])
	}
	if grew := size[emitter] - size[""]; grew > len(emitter)/2+1 {
		t.Errorf("an emitter's token of %d hex digits adds %d bytes to a row, want at most %d", len(emitter), grew, len(emitter)/2+1)
	}
}
