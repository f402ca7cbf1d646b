package embedded

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
)

// rowSeed returns the seed of the codec's randomized tests:
// SCHEDULERD_ROWCODEC_SEED, default 1.
func rowSeed(t *testing.T) uint64 { return testseed.Get(t, "SCHEDULERD_ROWCODEC_SEED", 1) }

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// oddURL returns a target URL from pieces that splitOrigin must tell
// apart: schemes of every case and kind, userinfo, IPv6 and long hosts,
// ports, no path, a query or a fragment alone, empty; or random bytes.
func oddURL(r *rand.Rand) string {
	if r.IntN(10) == 0 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = pick(r, byte(r.IntN(256)), ':', '/', '@', '?', '#', '[', ']')
		}
		return string(b)
	}
	return pick(r, "https", "http", "HTTPS", "hTTp", "ftp", "s3", "a+b.c-d", "1http", "", "ht tp", "mailto", "é") +
		pick(r, "://", "://", "://", ":", ":/", "") +
		pick(r, "", "", "", "user@", "user:pass@", "@", "a%40b@") +
		pick(r, "consumer.example.com", "EXAMPLE.com", "[::1]", "[2001:db8::1]", "10.0.0.1", "", "hôst.example", "h", strings.Repeat("x", 130)) +
		pick(r, "", "", ":8080", ":", ":0") +
		pick(r, "", "/", "/hooks/nightly", "//double", "/a b", "/%2F", "/ü") +
		pick(r, "", "", "?", "?a=1&b=2", "?x=/y@z") +
		pick(r, "", "", "#", "#frag", "#/p?q")
}

// randTime returns a time in UTC, as rows give them back: zero, near the
// base, with nanoseconds, or far from it either way.
func randTime(r *rand.Rand) time.Time {
	switch r.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return base().Add(time.Duration(r.Int64N(int64(48 * time.Hour))))
	case 2:
		return base().Add(-time.Duration(r.Int64N(int64(time.Hour)))).Truncate(time.Millisecond)
	case 3:
		return time.Date(1700+r.IntN(100), 1, 1, 0, 0, 0, r.IntN(1e9), time.UTC)
	case 4:
		return time.Date(2400+r.IntN(100), 1, 1, 0, 0, 0, r.IntN(1e9), time.UTC)
	}
	return time.Unix(r.Int64N(1<<34)-1<<33, r.Int64N(1e9)).UTC()
}

func randTimePtr(r *rand.Rand) *time.Time {
	if r.IntN(3) == 0 {
		return nil
	}
	t := randTime(r)
	return &t
}

// randRow returns a random schedule, and at random a sole child, a fire
// the row can hold (impliesFire) and that fire's event (impliesEvent),
// with every field's kind of value.
func randRow(r *rand.Rand, i int) (*model.Schedule, *model.Child, *model.Fire, *model.Event) {
	sc := &model.Schedule{
		ID: fmt.Sprintf("sch_%d", i), TenantID: pick(r, "ten_abcdefghijklmnop", "ten_b", "", "ténant\x00x"),
		Name: pick(r, "", "report"), Cron: pick(r, "", "0 5 * * *"), RunAt: randTimePtr(r),
		Timezone: pick(r, "", "UTC", "Europe/Berlin"), EventCount: r.IntN(4), PolicyID: pick(r, "", "", "pol_1"),
		Window: time.Duration(r.Int64N(1e12)), Spread: r.IntN(2) == 0, Priority: r.IntN(21) - 10,
		Target: model.Target{
			Type: pick(r, model.TargetHTTP, model.TargetSQS, model.TargetHTTPBatch, "", "custom"),
			URL:  oddURL(r), QueueURL: pick(r, "", "https://sqs.eu-central-1.amazonaws.com/1/q"),
		},
		Payload:     pick(r, json.RawMessage(nil), json.RawMessage(`{"job":"nightly-report"}`)),
		MaxAttempts: r.IntN(10), StartAt: randTimePtr(r), EndAt: randTimePtr(r),
		Misfire: pick(r, model.MisfireFireOnce, model.MisfireSkip, "", "other"), Overlap: pick(r, model.OverlapAllow, model.OverlapCancel, ""),
		State: pick(r, model.ScheduleActive, model.SchedulePaused, model.ScheduleCompleted, ""), Partition: r.IntN(64),
		Version: r.Int64N(1000) - 1, CreatedAt: randTime(r),
	}
	sc.UpdatedAt = pick(r, sc.CreatedAt, randTime(r))
	var child *model.Child
	if r.IntN(2) == 0 {
		child = &model.Child{
			ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: sc.Version, Partition: sc.Partition,
			Timezone: pick(r, "", "UTC", "Asia/Tokyo"), LaunchExpression: pick(r, "", "MM 01-01 05"), Minute: r.IntN(60),
		}
		if sc.RunAt != nil && r.IntN(2) == 0 {
			c := model.OneOffChild(sc) // kept as a flag
			child = &c
		}
	}
	if sc.RunAt == nil || r.IntN(3) == 0 {
		return sc, child, nil, nil
	}
	ft := pick(r, *sc.RunAt, randTime(r))
	f := &model.Fire{
		ID: model.FireID(sc.ID, sc.Version, ft), ScheduleID: sc.ID, TenantID: pick(r, sc.TenantID, "ten_other"), FireTime: ft,
		LocalTime: pick(r, ft.Format(localLayout), "2030-01-01T06:00:00+01:00"), Count: r.IntN(3),
		Decision: pick(r, model.FireEmitted, model.FireLate, "new"), Note: pick(r, "", "late"), CreatedAt: pick(r, sc.CreatedAt, randTime(r)),
	}
	if sc.PolicyID != "" || r.IntN(3) == 0 {
		return sc, child, f, nil
	}
	e := &model.Event{
		ID: model.EventID(f.ID, 0), TenantID: sc.TenantID, ScheduleID: sc.ID, FireID: f.ID, FireTime: f.FireTime,
		Count: r.IntN(3), LaunchAt: pick(r, f.FireTime, randTime(r)), Deadline: randTimePtr(r), Priority: sc.Priority,
		Target: sc.Target, Payload: sc.Payload, MaxAttempts: sc.MaxAttempts, Shard: r.IntN(8), Status: model.EventPending,
		ReleaseToken: pick(r, "", "0123456789abcdef0123456789abcdef", "Not-Hex"), CreatedAt: pick(r, sc.CreatedAt, randTime(r)),
	}
	e.UpdatedAt = pick(r, e.CreatedAt, randTime(r))
	return sc, child, f, e
}

// encodeRandRow encodes a row of randRow in the current codec.
func encodeRandRow(sc *model.Schedule, child *model.Child, f *model.Fire, e *model.Event, c rowCodes) ([]byte, error) {
	switch {
	case e != nil:
		return encodeScheduleEvent(sc, child, f, e, c)
	case f != nil:
		return encodeScheduleFire(sc, child, f, c)
	}
	return encodeScheduleRow(sc, child, c)
}

// decodeRandRow decodes every part of a row.
func decodeRandRow(id string, raw []byte, c rowCodes) (*model.Schedule, *model.Child, *model.Fire, *model.Event, error) {
	sc, child, fire, event, err := decodeScheduleParts([]byte(id), raw, c)
	if err != nil || fire == nil {
		return sc, child, nil, nil, err
	}
	f, err := decodeRowFire(sc, fire)
	if err != nil || event == nil {
		return sc, child, f, nil, err
	}
	e, err := decodeRowEvent(sc, f, event, c.tokenKey())
	return sc, child, f, e, err
}

// Random schedules, alone or with a sole child, a fire and an event, read
// back as written; a truncated row fails.
func TestRowCodecRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(rowSeed(t), 3))
	codes := memCodes{tokens: newTokenKey(bytes.Repeat([]byte{1}, tokenKeyLen))}
	for i := range 3000 {
		sc, child, f, e := randRow(r, i)
		if e != nil && r.IntN(3) == 0 {
			e.ReleaseToken = must(codes.tokens.token(e.ID)) // kept as a flag
		}
		raw, err := encodeRandRow(sc, child, f, e, &codes)
		if err != nil {
			t.Fatal(err)
		}
		if raw[0] != scheduleCodecV3 {
			t.Fatalf("row %d: codec %d", i, raw[0])
		}
		gotSc, gotChild, gotF, gotE, err := decodeRandRow(sc.ID, raw, &codes)
		if err != nil {
			t.Fatalf("row %d: %v\n%+v", i, err, sc)
		}
		if !reflect.DeepEqual(gotSc, sc) || !reflect.DeepEqual(gotChild, child) || !reflect.DeepEqual(gotF, f) || !reflect.DeepEqual(gotE, e) {
			t.Fatalf("row %d:\n got %+v %+v %+v %+v\nwant %+v %+v %+v %+v", i, gotSc, gotChild, gotF, gotE, sc, child, f, e)
		}
		if i%50 == 0 {
			for n := range raw {
				if _, _, _, _, err := decodeRandRow(sc.ID, raw[:n], &codes); err == nil {
					t.Fatalf("row %d truncated to %d of %d bytes: decoded without error", i, n, len(raw))
				}
			}
		}
	}
	// The dictionary holds origins only, never credentials.
	for o := range codes.codes[dictOrigin] {
		if strings.Contains(o, "@") || strings.ContainsAny(o[strings.Index(o, "://")+3:], "/?#") {
			t.Errorf("origin %q in the dictionary", o)
		}
	}
}

// A target URL reads back byte for byte, and splitOrigin keeps credentials
// out of the dictionary.
func FuzzRowURL(f *testing.F) {
	for _, u := range []string{
		"", "https://consumer.example.com/hooks/nightly", "https://consumer.example.com", "https://a.example?x=1",
		"https://a.example#f", "HTTPS://A.EXAMPLE/x", "http://user:pass@a.example/x", "http://[::1]:8080/x",
		"ftp://files.example/pub", "mailto:someone@example.com", "://x", "a://", "https:///x", "urn:x:y",
	} {
		f.Add(u)
	}
	sc, _ := typicalOneOff()
	f.Fuzz(func(t *testing.T, url string) {
		var codes memCodes
		sc := *sc
		sc.Target.URL = url
		raw, err := encodeSchedule(&sc, &codes)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeSchedule([]byte(sc.ID), raw, &codes)
		if err != nil {
			t.Fatal(err)
		}
		if got.Target.URL != url {
			t.Fatalf("URL %q read back as %q", url, got.Target.URL)
		}
		if o, rest, ok := splitOrigin(url); ok && (o+rest != url || strings.Contains(o, "@") || o == "") {
			t.Fatalf("splitOrigin(%q) = %q, %q", url, o, rest)
		}
	})
}

// A code that a write transaction gave out and then rolled back is in no
// cache: the next transaction gives it to another origin, which a reader
// then finds by it.
func TestRowDictRollback(t *testing.T) {
	s := openTemp(t, Options{})
	var code []byte
	errRollback := errors.New("rollback")
	if err := s.db.Update(func(tx *bolt.Tx) error {
		d := s.dict(tx)
		c, err := d.code(dictOrigin, "https://gone.example")
		if err != nil {
			return err
		}
		code = bytes.Clone(c)
		if name, err := d.name(dictOrigin, code); err != nil || name != "https://gone.example" {
			t.Errorf("in the transaction that gave it, code %x names %q, %v", code, name, err)
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if _, err := s.committedDict().name(dictOrigin, code); !errors.Is(err, errNoCode) {
		t.Errorf("code %x of a rolled back transaction: cached (%v)", code, err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		c, err := s.dict(tx).code(dictOrigin, "https://kept.example")
		if err == nil && !bytes.Equal(c, code) {
			t.Errorf("code %x given after the rollback, want %x again", c, code)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // read, then from the cache
		if err := s.db.View(func(tx *bolt.Tx) error {
			name, err := s.dict(tx).name(dictOrigin, code)
			if err == nil && name != "https://kept.example" {
				t.Errorf("code %x names %q, want https://kept.example", code, name)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := s.names[dictOrigin].code("https://kept.example"); !ok || !bytes.Equal(c, code) {
		t.Errorf("cache after a read: code %x, %v", c, ok)
	}
}

// A cache of codes stops growing at maxCachedCodes; what it lacks is read
// in the transaction.
func TestCodeNamesBounded(t *testing.T) {
	s := openTemp(t, Options{})
	origin := func(i int) string { return fmt.Sprintf("https://job-%d.example", i) }
	var codes [][]byte
	if err := s.db.Update(func(tx *bolt.Tx) error {
		d := s.dict(tx)
		for i := range maxCachedCodes + 10 {
			c, err := d.code(dictOrigin, origin(i))
			if err != nil {
				return err
			}
			codes = append(codes, bytes.Clone(c))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		d := s.dict(tx)
		for i, c := range codes {
			if name, err := d.name(dictOrigin, c); err != nil || name != origin(i) {
				t.Fatalf("code %x: %q, %v; want %q", c, name, err, origin(i))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.names[dictOrigin].m.Load().names); n != maxCachedCodes {
		t.Errorf("%d codes cached, want %d", n, maxCachedCodes)
	}
}
