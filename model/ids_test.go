package model

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
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

// TestShardOfRuns: the events of a fire go to shards in runs of ShardRun
// consecutive indexes, the runs spread evenly over the shards, and a
// policy's events share one shard whatever their fire.
func TestShardOfRuns(t *testing.T) {
	seed := testseed.Get(t, "MODEL_TEST_SEED", 1)
	rng := rand.New(rand.NewPCG(seed, seed))
	const k, fires, runs = 16, 2000, 4
	perShard := make([]int, k)
	adjacent := 0
	for f := 0; f < fires; f++ {
		fire := FireID(PrefixSchedule+strconv.FormatUint(rng.Uint64(), 36), 1, time.Unix(rng.Int64N(1<<31), 0))
		prev := -1
		for r := 0; r < runs; r++ {
			first := ShardOf(&Event{ID: EventID(fire, r*ShardRun)}, k)
			if first < 0 || first >= k {
				t.Fatalf("shard %d of %d", first, k)
			}
			for _, i := range []int{r*ShardRun + 1 + rng.IntN(ShardRun-1), (r+1)*ShardRun - 1} {
				if got := ShardOf(&Event{ID: EventID(fire, i)}, k); got != first {
					t.Fatalf("fire %s: event %d on shard %d, event %d of its run on %d", fire, i, got, r*ShardRun, first)
				}
			}
			perShard[first]++
			if first == prev {
				adjacent++
			}
			prev = first
		}
		pol := &Event{ID: EventID(fire, rng.IntN(1000)), PolicyID: "pol_one"}
		if got, want := ShardOf(pol, k), ShardOf(&Event{ID: "x.0", PolicyID: "pol_one"}, k); got != want {
			t.Fatalf("policy event %s on shard %d, the policy's shard is %d", pol.ID, got, want)
		}
	}
	mean := fires * runs / k
	for s, n := range perShard {
		if n < mean*3/4 || n > mean*5/4 {
			t.Errorf("shard %d has %d runs, mean %d: %v", s, n, mean, perShard)
		}
	}
	// Neighbouring runs land on the same shard about 1 time in k.
	if pairs := fires * (runs - 1); adjacent > 2*pairs/k {
		t.Errorf("%d of %d neighbouring runs share a shard", adjacent, pairs)
	}
	// An id without an index still has a shard of its own, the same each time.
	if a, b := ShardOf(&Event{ID: "not-an-event-id"}, k), ShardOf(&Event{ID: "not-an-event-id"}, k); a != b || a < 0 || a >= k {
		t.Errorf("shards %d, %d", a, b)
	}
}
