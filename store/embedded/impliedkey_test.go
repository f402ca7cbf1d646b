package embedded

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// An implied event's due key gives its schedule id back, whatever the id;
// an id of the master's form takes 11 bytes, any other its own length and
// the mark.
func TestImpliedKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(oneSeed(t), 7))
	const chars = "abcdefghijklmnopqrstuvwxyz234567018_ABZ-."
	ids := []string{"", "o1", "sch_", idPrefix + "2222222222222222", idPrefix + "zzzzzzzzzzzzzzzz",
		idPrefix + "aaaaaaaaaaaaaaa", idPrefix + "aaaaaaaaaaaaaaaaa", idPrefix + "aaaaaaaaaaaaaaa1", idPrefix + "AAAAAAAAAAAAAAAA",
		"pol_aaaaaaaaaaaaaaaa", masterID(0), masterID(1 << 60)}
	for range 2000 {
		b := []byte(idPrefix)
		if r.IntN(4) == 0 {
			b = b[:r.IntN(len(b))]
		}
		n := 16
		if r.IntN(4) == 0 {
			n = r.IntN(20)
		}
		for range n {
			if r.IntN(10) == 0 {
				b = append(b, chars[r.IntN(len(chars))])
			} else {
				b = append(b, idText.EncodeToString([]byte{byte(r.IntN(256))})[0])
			}
		}
		ids = append(ids, string(b))
	}
	packed := 0
	for _, id := range ids {
		k := impliedKey(id)
		if !isImpliedKey(k) {
			t.Fatalf("impliedKey(%q) = %x: not an implied key", id, k)
		}
		if got := impliedScheduleID(k); got != id {
			t.Fatalf("impliedScheduleID(impliedKey(%q)) = %q", id, got)
		}
		if k[0] == impliedPacked {
			packed++
			if len(k) != 11 {
				t.Fatalf("impliedKey(%q): %d bytes, want 11", id, len(k))
			}
		} else if len(k) != 1+len(id) {
			t.Fatalf("impliedKey(%q): %d bytes, want %d", id, len(k), 1+len(id))
		}
	}
	if k := impliedKey(masterID(5)); k[0] != impliedPacked {
		t.Errorf("an id of the master's form is not packed: %x", k)
	}
	if packed < len(ids)/4 {
		t.Errorf("%d of %d ids packed: the test makes too few of the master's form", packed, len(ids))
	}
}

// A one-off whose due entry holds its id as it is (as layout 8 wrote every
// one) is claimed once and leaves no due entry behind, as one of the
// packed form does.
func TestImpliedKeyOfLayout8(t *testing.T) {
	for _, unpack := range []bool{false, true} {
		ctx := t.Context()
		s := openTemp(t, Options{})
		w := &oneWorld{r: rand.New(rand.NewPCG(9, 9)), n: 2} // the next one-off's id is of the master's form
		item := w.oneOff("ta", "")
		if !bytes.HasPrefix([]byte(item.Schedule.ID), []byte(idPrefix)) {
			t.Fatalf("one-off %q: not of the master's form", item.Schedule.ID)
		}
		if _, err := s.ScheduleCreateMany(ctx, []store.ScheduleNew{item}); err != nil {
			t.Fatal(err)
		}
		e := item.Fires[0].Events[0]
		if unpack {
			err := s.db.Update(func(tx *bolt.Tx) error {
				due := tx.Bucket(bEvDue)
				old, err := dueKey(e, impliedKey(e.ScheduleID))
				if err != nil {
					return err
				}
				if due.Get(old) == nil {
					t.Fatalf("no due entry %x", old)
				}
				raw, err := dueKey(e, append([]byte{impliedMark}, e.ScheduleID...))
				if err != nil {
					return err
				}
				if err := due.Delete(old); err != nil {
					return err
				}
				return due.Put(raw, fenceValue(e))
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.EventGet(ctx, e.TenantID, e.ID); err != nil || got.ID != e.ID {
			t.Fatalf("unpack=%v: EventGet: %v, %v", unpack, got, err)
		}
		p := &store.EventClaimParams{Shard: e.Shard, Fence: 1, DueBefore: e.LaunchAt.Add(time.Second), Limit: 10}
		got, err := s.EventClaimDue(ctx, p)
		if err != nil || len(got) != 1 || got[0].ID != e.ID || got[0].Status != model.EventScheduled {
			t.Fatalf("unpack=%v: claim: %v, %v; want %s scheduled", unpack, got, err, e.ID)
		}
		if n := bucketKeys(t, s, bEvDue)[string(bEvDue)]; n != 1 {
			t.Errorf("unpack=%v: %d due entries after the claim, want 1 (the scheduled event's)", unpack, n)
		}
		checkEventIndexes(t, s)
		p.Fence = 2
		if again, err := s.EventClaimDue(ctx, p); err != nil || len(again) != 1 || !again[0].TakenOver {
			t.Errorf("unpack=%v: a claim under a newer fence: %v, %v; want the event taken over once", unpack, again, err)
		}
	}
}
