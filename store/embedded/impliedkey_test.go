package embedded

import (
	"github.com/schedulerd/schedulerd/model"
	"math/rand/v2"
	"testing"
)

// An implied event's due key gives its schedule id back, whatever the id;
// an id of the master's form takes 11 bytes, any other its own length and
// the mark.
func TestImpliedKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(oneSeed(t), 7))
	const chars = "abcdefghijklmnopqrstuvwxyz234567018_ABZ-."
	ids := []string{"", "o1", "sch_", model.PrefixSchedule + "2222222222222222", model.PrefixSchedule + "zzzzzzzzzzzzzzzz",
		model.PrefixSchedule + "aaaaaaaaaaaaaaa", model.PrefixSchedule + "aaaaaaaaaaaaaaaaa", model.PrefixSchedule + "aaaaaaaaaaaaaaa1", model.PrefixSchedule + "AAAAAAAAAAAAAAAA",
		"pol_aaaaaaaaaaaaaaaa", masterID(0), masterID(1 << 60)}
	for range 2000 {
		b := []byte(model.PrefixSchedule)
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
				b = append(b, model.IDText.EncodeToString([]byte{byte(r.IntN(256))})[0])
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
