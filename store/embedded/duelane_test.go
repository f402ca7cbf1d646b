package embedded

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// Priorities encode so that the higher sorts first, and decode back.
func TestPriorityEncoding(t *testing.T) {
	ps := []int{math.MinInt64, math.MaxInt64, math.MinInt64 + 1, math.MaxInt64 - 1, 0, 1, -1,
		-122, -121, -120, -119, 118, 119, 120, 121, 254, 255, 256, 257, -255, -256, -257, -258,
		1 << 40, -(1 << 40), 65535, 65536, -65536, -65537}
	r := rand.New(rand.NewPCG(1, 1))
	for range 2000 {
		ps = append(ps, int(r.Int64())>>r.IntN(64))
	}
	enc := make([][]byte, len(ps))
	for i, p := range ps {
		enc[i] = appendPriority([]byte{0xaa}, p)[1:]
		got, n := readPriority(append(enc[i], 0xbb))
		if got != p || n != len(enc[i]) {
			t.Fatalf("priority %d: encoded %x, read %d of length %d", p, enc[i], got, n)
		}
	}
	for i := range ps {
		for j := range ps {
			if c := bytes.Compare(enc[i], enc[j]); c != cmp.Compare(ps[j], ps[i]) {
				t.Fatalf("priorities %d and %d encode as %x and %x: compare %d", ps[i], ps[j], enc[i], enc[j], c)
			}
		}
	}
	for _, p := range []int{-120, 0, 119} {
		if n := len(appendPriority(nil, p)); n != 1 {
			t.Errorf("priority %d takes %d bytes, want 1", p, n)
		}
	}
}

// A turn keeps its row key, and turns sort by index first, then by row
// key, for canonical, loose and implied row keys alike (random, fixed
// seed).
func TestTurnEncoding(t *testing.T) {
	type turn struct {
		index int
		rk    []byte
	}
	r := rand.New(rand.NewPCG(testseed.Get(t, "SCHEDULERD_TEST_SEED", 1), 2))
	var ts []turn
	for range 3000 {
		seq, slot := r.Uint64N(1<<40), r.Uint32N(64)<<(8*r.IntN(4))
		switch r.IntN(4) {
		case 0, 1: // canonical: the slot is the index
			ts = append(ts, turn{int(slot), rowKey(seq, slot)})
		case 2: // loose
			ts = append(ts, turn{int(slot), rowKey(seq, looseSlot+slot)})
		default: // a one-off's event in its schedule's row
			id := model.FormatID(model.PrefixSchedule, [10]byte{byte(r.IntN(256)), byte(r.IntN(256)), 7})
			if r.IntN(2) == 0 {
				id = fmt.Sprintf("sch_custom%d", r.IntN(1000))
			}
			ts = append(ts, turn{0, impliedKey(id)})
		}
	}
	enc := make([][]byte, len(ts))
	for i, tu := range ts {
		enc[i] = appendTurn([]byte{0xaa}, tu.index, tu.rk)[1:]
		got, err := appendRowKeyOfTurn(nil, enc[i])
		if err != nil || !bytes.Equal(got, tu.rk) {
			t.Fatalf("turn %d, %x: encoded %x, row key back %x (%v)", tu.index, tu.rk, enc[i], got, err)
		}
	}
	for i := range ts {
		j := r.IntN(len(ts))
		want := cmp.Or(cmp.Compare(ts[i].index, ts[j].index), bytes.Compare(ts[i].rk, ts[j].rk))
		if c := bytes.Compare(enc[i], enc[j]); c != want {
			t.Fatalf("turns (%d, %x) and (%d, %x) encode as %x and %x: compare %d, want %d", ts[i].index, ts[i].rk, ts[j].index, ts[j].rk, enc[i], enc[j], c, want)
		}
	}
	for _, bad := range [][]byte{nil, {5, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1}, {1, 9}, {0, 0, 0, 0, 1}} {
		if _, err := appendRowKeyOfTurn(nil, bad); err == nil {
			t.Errorf("turn %x decoded", bad)
		}
	}
	// Index 0 takes one byte, a canonical row key none.
	if n := len(appendTurn(nil, 0, impliedKey("sch_x"))); n != 1+len(impliedKey("sch_x")) {
		t.Errorf("a one-off's turn takes %d bytes, want %d", n, 1+len(impliedKey("sch_x")))
	}
	if n := len(appendTurn(nil, 300, rowKey(7, 300))); n != 1+2+8 {
		t.Errorf("the turn of canonical index 300 takes %d bytes, want 11", n)
	}
}

// A claim reads as many keys of the due index whatever the size of a
// lane's backlog and of a skipped policy's.
func TestClaimReadsLanesNotBacklog(t *testing.T) {
	reads := func(backlog int) (plain, skipping int) {
		s := openTemp(t, Options{})
		var events []*model.Event
		add := func(tenant, policy string, n int) {
			for i := range n {
				fireID := "s-" + tenant + "-" + policy + ".1"
				events = append(events, &model.Event{ID: model.EventID(fireID, i), TenantID: tenant, ScheduleID: "s-" + tenant + "-" + policy,
					FireID: fireID, FireTime: base(), Index: i, Count: n, LaunchAt: base(), PolicyID: policy,
					Target: model.Target{Type: model.TargetHTTP, URL: "https://c.example.com/"}, MaxAttempts: 3,
					Status: model.EventPending, CreatedAt: base(), UpdatedAt: base()})
			}
		}
		add("big", "", backlog)
		add("big", "hot", backlog)
		for k := range 4 {
			add(fmt.Sprintf("t%d", k), "", 3)
		}
		if _, err := s.EventInsertMany(t.Context(), events); err != nil {
			t.Fatal(err)
		}
		count := func(p *store.EventClaimParams) int {
			var n int
			if err := s.db.View(func(tx *bolt.Tx) error {
				cl := newClaimer(tx, p)
				got, err := cl.plan(p.Limit)
				if len(got) != p.Limit {
					t.Errorf("backlog %d: planned %d, want %d", backlog, len(got), p.Limit)
				}
				n = cl.reads
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		due := base().Add(time.Minute)
		return count(&store.EventClaimParams{Fence: 1, DueBefore: due, Limit: 12}),
			count(&store.EventClaimParams{Fence: 1, DueBefore: due, Limit: 12, SkipPolicies: []string{"hot"}})
	}
	small, smallSkip := reads(100)
	large, largeSkip := reads(5000)
	if small != large || smallSkip != largeSkip {
		t.Errorf("a claim read %d keys (%d skipping) over a backlog of 100 a lane, %d (%d) over 5,000", small, smallSkip, large, largeSkip)
	}
	if large > 100 {
		t.Errorf("a claim of 12 over 6 lanes read %d keys", large)
	}
}
