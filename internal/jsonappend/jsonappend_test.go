package jsonappend

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

var seed = flag.Uint64("jsonappend.seed", 1, "seed of the random values")

// Each writer agrees with encoding/json on random values, or says it
// cannot.
func TestAgreesWithMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(*seed, 0))
	alphabet := []rune("ab09 \"\\<>&\u2028\u00e9\x01\t{}[]:,")
	word := func() string {
		rs := make([]rune, r.IntN(8))
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(rs)
	}
	for range 2000 {
		s := word()
		want, _ := json.Marshal(s)
		if got := String(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("String(%q) = %s, want %s", s, got, want)
		}

		tm := time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9)).In(time.FixedZone("z", (r.IntN(49)-24)*3600))
		want, err := json.Marshal(tm)
		got, ok := Time(nil, tm, true)
		if ok != (err == nil) || (ok && !bytes.Equal(got, want)) {
			t.Fatalf("Time(%v) = %s, %v; Marshal %s, %v", tm, got, ok, want, err)
		}

		raw := json.RawMessage(`{"k": ` + string(mustMarshal(word())) + `, "n": [1, 2]}`)
		if r.IntN(4) == 0 {
			raw = raw[:r.IntN(len(raw))] // often not JSON
		}
		want, err = json.Marshal(raw)
		got, ok = Raw(nil, raw, true)
		if ok && (err != nil || !bytes.Equal(got, want)) {
			t.Fatalf("Raw(%s) = %s; Marshal %s, %v", raw, got, want, err)
		}
		if !ok && err == nil && !bytes.ContainsAny(raw, "<>&\u2028\u2029") {
			t.Fatalf("Raw(%s) refused what Marshal writes as %s", raw, want)
		}
	}
}

func mustMarshal(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
