package model

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestFireInstant(t *testing.T) {
	base := time.Date(2025, 6, 2, 11, 0, 15, 0, time.UTC)
	for _, c := range []struct {
		in, want time.Duration // offsets from base
	}{
		{0, 0},
		{500 * time.Millisecond, 500 * time.Millisecond},
		{479*time.Millisecond + 500*time.Microsecond, 480 * time.Millisecond},
		{time.Nanosecond, time.Millisecond},
		{999*time.Millisecond + 1, time.Second},
	} {
		got := FireInstant(base.Add(c.in))
		if !got.Equal(base.Add(c.want)) || got.Location() != time.UTC {
			t.Errorf("FireInstant(base+%s) = %s, want base+%s", c.in, got, c.want)
		}
		if got.Before(base.Add(c.in)) {
			t.Errorf("FireInstant(base+%s) = %s is early", c.in, got)
		}
	}
}

func TestFireID(t *testing.T) {
	base := time.Date(2025, 6, 2, 11, 0, 15, 0, time.UTC) // Unix 1748862015
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		// Whole seconds keep the id format of earlier releases.
		{base, "s1.1748862015.v3"},
		{base.In(time.FixedZone("x", 7200)), "s1.1748862015.v3"},
		{base.Add(500 * time.Millisecond), "s1.1748862015.500.v3"},
		{base.Add(7 * time.Millisecond), "s1.1748862015.007.v3"},
		{base.Add(999 * time.Millisecond), "s1.1748862015.999.v3"},
		{time.Unix(-1, 250e6), "s1.-1.250.v3"},
	} {
		if got := FireID("s1", 3, c.at); got != c.want {
			t.Errorf("FireID(%s) = %q, want %q", c.at, got, c.want)
		}
	}
	if a, b := FireID("s1", 3, base.Add(time.Millisecond)), FireID("s1", 3, base.Add(2*time.Millisecond)); a == b {
		t.Errorf("fires a millisecond apart share id %q", a)
	}
	// An id longer than the stack buffer FireID starts with.
	long := strings.Repeat("s", 80)
	if got, want := FireID(long, 12, base.Add(7*time.Millisecond)), long+".1748862015.007.v12"; got != want {
		t.Errorf("FireID of a long schedule id = %q, want %q", got, want)
	}
	if got := string(AppendFireID([]byte("k:"), "s1", 3, base)); got != "k:s1.1748862015.v3" {
		t.Errorf("AppendFireID after a prefix = %q", got)
	}
}

// ParseID takes back exactly the ids FormatID makes, and their text sorts
// as their bytes do.
func TestFormatParseID(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var prev [10]byte
	prevID := FormatID(PrefixSchedule, prev)
	for range 1000 {
		var raw [10]byte
		for i := range raw {
			raw[i] = byte(r.IntN(256))
		}
		id := FormatID(PrefixSchedule, raw)
		got, ok := ParseID(PrefixSchedule, id)
		if !ok || got != raw {
			t.Fatalf("ParseID(%q) = %x, %v; want %x", id, got, ok, raw)
		}
		if (bytes.Compare(raw[:], prev[:]) < 0) != (id < prevID) {
			t.Fatalf("%q and %q sort unlike their bytes %x and %x", id, prevID, raw, prev)
		}
		prev, prevID = raw, id
	}
	for _, id := range []string{"", "sch_", "pol_aaaaaaaaaaaaaaaa", "sch_aaaaaaaaaaaaaaa", "sch_aaaaaaaaaaaaaaaaa", "sch_AAAAAAAAAAAAAAAA", "sch_aaaaaaaaaaaaaaa1"} {
		if _, ok := ParseID(PrefixSchedule, id); ok {
			t.Errorf("ParseID(%q) took it", id)
		}
	}
}
