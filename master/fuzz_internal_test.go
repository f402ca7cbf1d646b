package master

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The fuzz targets hold the JSON checks of the request path to the oracles
// of the randomized tests: checkDepth to encoding/json's decoder, scanBody
// (jsontext) to scanTokens (encoding/json's tokens), batchItemsOf and
// decodeBatchItem to encoding/json's decoding. Their seed
// corpora are bodies of the randomized generators and the hot bodies.
//
//	go test -run '^$' -fuzz FuzzScanBody -fuzztime 60s ./master/

// fuzzBodies returns n bodies of genValue, some mutated, for seed corpora.
func fuzzBodies(n int) []string {
	r := rand.New(rand.NewPCG(1, 7))
	out := make([]string, 0, n)
	for range n {
		var b strings.Builder
		genValue(r, &b, 0)
		body := []byte(b.String())
		if r.IntN(3) == 0 {
			body = mutate(r, body)
		}
		out = append(out, string(body))
	}
	return out
}

const fuzzItem = `{"name":"job-1","runAt":"2030-01-02T03:04:05.123Z","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":1,"tags":["a","b\u00e9\n"],"x":null}}`

func FuzzScanBody(f *testing.F) {
	for _, b := range append(fuzzBodies(40), fuzzItem, `{"items":[`+fuzzItem+`,`+fuzzItem+`]}`, "", `{"a":"\ud800"}`, "{\"a\":\"\x00\"}",
		`{"a":1,"a":2}`, `{"items":[{"a":1},{"a":1,"b":{"c":1,"c":2}}]}`, `{"a":"\u0000"}`, "{\"a\":\"\xff\"}", `{"a":1} {}`) {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, want := scanBody(body), scanTokens(body); !reflect.DeepEqual(got, want) {
			t.Fatalf("body %q:\nscanBody   %v\nscanTokens %v", body, got, want)
		}
	})
}

// FuzzCheckDepth holds checkDepth to encoding/json's decoder: it refuses a
// valid body exactly when the decoder nests deeper than maxBodyDepth, and
// passes no body, valid or not, in which the decoder nests deeper.
//
//	go test -run '^$' -fuzz FuzzCheckDepth -fuzztime 60s ./master/
func FuzzCheckDepth(f *testing.F) {
	for _, b := range append(fuzzBodies(20), fuzzItem, nested(`{"a":`, `}`, maxBodyDepth, `1`), nested(`[`, `]`, maxBodyDepth+1, ``),
		`["\\",`+nested(`[`, `]`, maxBodyDepth, ``)+`]`, `{"a":"\"`+strings.Repeat(`[`, 70)+`"}`, strings.Repeat(`]`, 9)+nested(`[`, `]`, maxBodyDepth+1, ``)) {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if problem := checkDepthAgrees(body); problem != "" {
			t.Fatalf("body %q: %s", body, problem)
		}
	})
}

func FuzzBatchItemsOf(f *testing.F) {
	for _, b := range []string{`{"items":[]}`, `{"items":[` + fuzzItem + `]}`, ` { "other" : 1 , "items" : [ 1 , "x" , null ] } `, `{"it\u0065ms":[1]}`, `{"items":[1],"items":[2]}`, `{"items":[1]}x`} {
		f.Add([]byte(b))
	}
	for _, b := range fuzzBodies(20) {
		f.Add([]byte(`{"items":[` + b + `]}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, problem := compareArrayMember(body); problem != "" {
			t.Fatal(problem)
		}
	})
}

func FuzzDecodeBatchItem(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 8))
	for range 40 {
		f.Add([]byte(randomPlainItem(r)))
	}
	f.Add([]byte(fuzzItem))
	f.Add([]byte(`{ "name": "b", "cron": "0 3 * * *", "timezone": "Europe/Berlin", "eventCount": 5, "target": {"type": "sqs", "queueUrl": "https://sqs.example.com/1/q"}, "maxAttempts": 100, "overlap": "skip", "misfire": "fire_all", "spread": true, "window": "10m", "priority": 7, "policyId": "pol_1", "idempotencyKey": "k\u00e9" }`))
	f.Fuzz(func(t *testing.T, item []byte) {
		if _, _, problem := comparePlainItem(item); problem != "" {
			t.Fatal(problem)
		}
	})
}
