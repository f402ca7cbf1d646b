package master

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/master/internal/jsoncheck"
)

// TestDecodeBatchItemAgreesWithTheDecoder checks decodeBatchItem against
// decodeJSON (encoding/json, which the handler falls back to) on random
// items written in the forms a client may choose: escapes, white space,
// integers written several ways, every kind of payload, keys in another
// case. Whatever decodeBatchItem accepts, decodeJSON accepts and decodes to
// the same value, payload bytes and instants' offsets included (that the
// schema accepts it is TestDecodeBatchItemOnlyAcceptsValidItems). A failure
// prints the seed to rerun it with -master.scanseed.
func TestDecodeBatchItemAgreesWithTheDecoder(t *testing.T) {
	_, quick := bodyValidator(t, "POST /v1/schedules/batch")
	r := rand.New(rand.NewPCG(*scanSeed, 4))
	accepted, valid := 0, 0
	for i := range *scanCases / 5 {
		item := []byte(randomPlainItem(r))
		ok, wantOK, problem := comparePlainItem(item)
		if problem != "" {
			t.Fatalf("case %d of seed %d: %s", i, *scanSeed, problem)
		}
		if wantOK && quick([]byte(`{"items":[`+string(item)+`]}`)) {
			valid++
		}
		if ok {
			accepted++
		}
	}
	t.Logf("%d of %d items valid, %d accepted", valid, *scanCases/5, accepted)
	if accepted < valid/2 {
		t.Fatalf("decodeBatchItem accepted %d of %d valid items", accepted, valid)
	}
	// The items clients send most take the decoder's path.
	for _, item := range []string{
		`{"name":"job-1-2","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":2}}`,
		`{"idempotencyKey":"b1-2","name":"job-1-2","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":2}}`,
		`{ "name": "b", "cron": "0 3 * * *", "timezone": "Europe/Berlin", "eventCount": 5, "target": {"type": "sqs", "queueUrl": "https://sqs.example.com/1/q"}, "maxAttempts": 100, "overlap": "skip", "misfire": "fire_all", "spread": true, "window": "10m", "priority": -3, "policyId": "pol_1" }`,
	} {
		var in api.ScheduleBatchItem
		if !decodeBatchItem([]byte(item), &in) {
			t.Errorf("decodeBatchItem refused %s", item)
		}
	}
}

// comparePlainItem decodes item with decodeBatchItem (ok) and decodeJSON
// (wantOK: it decodes, and validCreate passes it); problem says how they
// disagree: whatever decodeBatchItem accepts, decodeJSON must accept and
// decode to the same value, payload bytes and instants' offsets included.
func comparePlainItem(item []byte) (ok, wantOK bool, problem string) {
	var got, want api.ScheduleBatchItem
	ok = decodeBatchItem(item, &got)
	wantOK = decodeJSON(item, &want) == nil && validCreate(want.Name, want.Target, want.EventCount, want.MaxAttempts, want.Overlap, want.Misfire)
	if !ok {
		return ok, wantOK, ""
	}
	if !wantOK {
		return ok, wantOK, fmt.Sprintf("decodeBatchItem accepted %s, which decodeJSON refuses", item)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		return ok, wantOK, fmt.Sprintf("%s decoded to\n%s, want\n%s", item, a, b)
	}
	if (got.Payload == nil) != (want.Payload == nil) || got.Payload != nil && !bytes.Equal(*got.Payload, *want.Payload) {
		return ok, wantOK, fmt.Sprintf("%s: payload %s, want %s", item, payloadText(got.Payload), payloadText(want.Payload))
	}
	for _, tt := range [][2]timeField{{timeOf(got.RunAt), timeOf(want.RunAt)}, {timeOf(got.StartAt), timeOf(want.StartAt)}, {timeOf(got.EndAt), timeOf(want.EndAt)}} {
		if tt[0] != tt[1] {
			return ok, wantOK, fmt.Sprintf("%s: time %+v, want %+v", item, tt[0], tt[1])
		}
	}
	return ok, wantOK, ""
}

// timeField is what a decoded instant must agree on: the instant and the
// offset it was written with.
type timeField struct {
	set    bool
	unix   int64
	nsec   int
	offset int
}

func timeOf(p *time.Time) timeField {
	if p == nil {
		return timeField{}
	}
	_, off := p.Zone()
	return timeField{set: true, unix: p.Unix(), nsec: p.Nanosecond(), offset: off}
}

func payloadText(p *api.Payload) string {
	if p == nil {
		return "<nil>"
	}
	return string(*p)
}

// randomPlainItem writes an item of members picked from lists of values
// in various forms, valid or not, with random white space around tokens.
func randomPlainItem(r *rand.Rand) string {
	values := map[string][]string{ // the first of each is valid
		"name":           {`"job"`, `"job-\u0031"`, `"a\"b"`, `"tab\there"`, `"é"`, `"\ud83d\ude00"`, `""`, `null`, `1`},
		"target":         {`{"type":"http","url":"https://consumer.example.com/hook"}`, `{"url":"https://x.example.com/","type":"http"}`, `{"type":"sqs","queueUrl":"https://sqs.example.com/1/q"}`, `{"type":"ht\u0074p","url":"u"}`, `{ "type" : "http" , "url" : "u" }`, `{"type":"ftp"}`, `{"url":"x"}`, `{"type":"http","url":null}`, `{"type":"http","extra":1}`, `{"Type":"http"}`, `{}`, `"https://x"`, `null`},
		"runAt":          {`"2030-01-02T03:04:05Z"`, `"2030-01-02T03:04:05.123456789+05:30"`, `"2030-01-02T03:04:05-00:00"`, `"2030-01-02T03:04:05,123Z"`, `"2030-01-02t03:04:05Z"`, `"2030-02-31T00:00:00Z"`, `"2030-01-02T24:00:00Z"`, `"2030-01-02T03:04:05\u005a"`, `"tomorrow"`, `1`, `null`},
		"startAt":        {`"2030-01-02T03:04:05Z"`, `"2030-13-02T03:04:05Z"`, `null`},
		"endAt":          {`"2031-01-02T03:04:05Z"`, `"2031-01-02T03:04:05+14:00"`, `"2031-01-02T03:04:05z"`},
		"cron":           {`"0 3 * * *"`, `"0 3 * * \u002a"`, `3`, `null`},
		"fields":         {`{"minute":"0","hour":"3"}`, `{}`},
		"timezone":       {`"UTC"`, `"Europe/Berlin"`, `null`},
		"eventCount":     {`1`, `5`, `-0`, `0`, `-1`, `007`, `1.5`, `2.0`, `1e2`, `1E2`, `"3"`, `null`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775809`},
		"policyId":       {`"pol_1"`, `""`, `null`},
		"window":         {`"10m"`, `5`},
		"spread":         {`true`, `false`, `"true"`, `null`, `True`},
		"priority":       {`0`, `-5`, `1000000`, `1.5`, `null`},
		"overlap":        {`"allow"`, `"skip"`, `"cancel"`, `"sk\u0069p"`, `"ALLOW"`, `""`, `null`},
		"misfire":        {`"fire_once"`, `"fire_all"`, `"skip"`, `"never"`, `null`},
		"payload":        {`{"a":[1,null]}`, `{ "a" : [ 1 , 2 ] }`, `"text"`, `"<b>&amp;</b>"`, `0`, `-1.5e3`, `[]`, `{}`, `true`, `null`},
		"maxAttempts":    {`1`, `100`, `0`, `101`, `null`},
		"idempotencyKey": {`"k"`, `"k\u00e9"`, `""`, `"` + strings.Repeat("k", 255) + `"`, `"` + strings.Repeat("k", 256) + `"`, `"` + strings.Repeat("é", 128) + `"`, `null`},
		"NAME":           {`"job"`},
		"colour":         {`"red"`},
	}
	names := slices.Sorted(maps.Keys(values))
	members := map[string]string{"name": values["name"][0], "target": values["target"][0]}
	for _, name := range names {
		if r.IntN(3) == 0 {
			v := values[name]
			if r.IntN(2) == 0 {
				members[name] = v[0]
			} else {
				members[name] = v[r.IntN(len(v))]
			}
		}
	}
	if r.IntN(8) == 0 {
		delete(members, []string{"name", "target"}[r.IntN(2)])
	}
	space := func() string { return []string{"", "", "", " ", "\n\t", "  \r\n"}[r.IntN(6)] }
	keys := slices.Sorted(maps.Keys(members))
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	var b strings.Builder
	b.WriteString(space() + "{")
	for i, name := range keys {
		if i > 0 {
			b.WriteString(space() + ",")
		}
		b.WriteString(space() + strconv.Quote(name) + space() + ":" + space() + members[name])
	}
	b.WriteString(space() + "}" + space())
	return b.String()
}

// TestMatchesDateTimeAgreesWithTheFormat checks jsoncheck.DateTime against
// kin-openapi's date-time pattern and its registered format validator on
// random strings made of the pattern's pieces, one piece sometimes out of
// range, missing or doubled. A failure prints the seed to rerun it with
// -master.scanseed.
func TestMatchesDateTimeAgreesWithTheFormat(t *testing.T) {
	re := regexp.MustCompile(openapi3.FormatOfStringDateTime)
	format := openapi3.SchemaStringFormats["date-time"]
	r := rand.New(rand.NewPCG(*scanSeed, 7))
	pieces := [][]string{
		{"2030", "0000", "9999", "203", "20301", "2o30"},
		{"-"}, {"01", "09", "10", "12", "00", "13", "1", "19", "20"},
		{"-"}, {"01", "09", "10", "19", "29", "30", "31", "00", "32", "40", "3"},
		{"T", "t", " "}, {"00", "09", "19", "23", "24", "29", "30", "2"},
		{":"}, {"00", "59", "60", "5", "5a"},
		{":"}, {"00", "59", "60", "61", "69", "70", "6"},
		{"", "", ".5", ".123456789", ".", ".x", ",5"},
		{"Z", "Z", "+05:30", "-00:00", "+0530", "+05:3", "z", "", "+99:99", "Z\n"},
	}
	matched := 0
	for i := range *scanCases / 2 {
		var b strings.Builder
		for _, p := range pieces {
			switch r.IntN(40) {
			case 0: // missing
			case 1:
				b.WriteString(p[r.IntN(len(p))] + p[r.IntN(len(p))])
			default:
				if r.IntN(6) == 0 {
					b.WriteString(p[r.IntN(len(p))])
				} else {
					b.WriteString(p[0])
				}
			}
		}
		s := b.String()
		want := re.MatchString(s)
		if want {
			matched++
		}
		if got := jsoncheck.DateTime([]byte(s)); got != want {
			t.Fatalf("case %d of seed %d: jsoncheck.DateTime(%q) = %v, the pattern %v", i, *scanSeed, s, got, want)
		}
		if fv := format.Validate(s) == nil; fv != want {
			t.Fatalf("the registered date-time format (%q: %v) is not the pattern (%v)", s, fv, want)
		}
	}
	t.Logf("%d of %d strings match", matched, *scanCases/2)
	if matched < *scanCases/40 {
		t.Fatalf("only %d strings match: the cases miss the valid side", matched)
	}
}
