package store

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestShareClaim(t *testing.T) {
	lanes := []ClaimLane{
		{TenantID: "A", Due: 20},
		{TenantID: "B", Due: 3},
		{TenantID: "C", PolicyID: "pc", Priority: 0, Due: 4},
		{TenantID: "C", PolicyID: "pc", Priority: 5, Due: 4},
		{TenantID: "D", PolicyID: "p1", Due: 10},
		{TenantID: "D", PolicyID: "p2", Due: 10},
	}
	got := ShareClaim(lanes, 16)
	// B takes its 3; A, C, D share 13: 5, 4, 4 (the first tenant takes
	// the remainder); C's 4 are its priority-5 ones; D splits 2 and 2.
	want := []int{5, 3, 0, 4, 2, 2}
	if !slices.Equal(got, want) {
		t.Fatalf("ShareClaim = %v, want %v", got, want)
	}
	if got := ShareClaim(lanes, 1000); !slices.Equal(got, []int{20, 3, 4, 4, 10, 10}) {
		t.Fatalf("a limit above everything due takes everything: %v", got)
	}
	if got := ShareClaim(lanes, 0); !slices.Equal(got, make([]int, len(lanes))) {
		t.Fatalf("limit 0 takes nothing: %v", got)
	}
}

// TestShareClaimRandom checks the share against a one-at-a-time round robin
// over tenants, then policies, then priorities, on random lanes.
func TestShareClaimRandom(t *testing.T) {
	seed := uint64(1)
	r := rand.New(rand.NewPCG(seed, seed))
	for range 2000 {
		var lanes []ClaimLane
		for ti := range 1 + r.IntN(4) {
			for pi := range 1 + r.IntN(3) {
				for pr := range 1 + r.IntN(2) {
					lanes = append(lanes, ClaimLane{TenantID: string(rune('a' + ti)), PolicyID: string(rune('p' + pi)), Priority: pr, Due: r.IntN(6)})
				}
			}
		}
		r.Shuffle(len(lanes), func(i, j int) { lanes[i], lanes[j] = lanes[j], lanes[i] })
		limit := r.IntN(40)
		got := ShareClaim(lanes, limit)
		total, due := 0, 0
		perTenant := map[string]int{}
		tenantDue := map[string]int{}
		for i, l := range lanes {
			if got[i] < 0 || got[i] > l.Due {
				t.Fatalf("lane %v takes %d", l, got[i])
			}
			total += got[i]
			due += l.Due
			perTenant[l.TenantID] += got[i]
			tenantDue[l.TenantID] += l.Due
			// Higher priorities of the same tenant and policy are taken first.
			for j, m := range lanes {
				if m.TenantID == l.TenantID && m.PolicyID == l.PolicyID && m.Priority > l.Priority && got[i] > 0 && got[j] < m.Due {
					t.Fatalf("lanes %v: priority %d takes %d while priority %d has %d left", lanes, l.Priority, got[i], m.Priority, m.Due-got[j])
				}
			}
		}
		if total != min(limit, due) {
			t.Fatalf("lanes %v limit %d: took %d, want %d", lanes, limit, total, min(limit, due))
		}
		// A tenant left wanting took at least as many as any other, less one.
		for a, na := range perTenant {
			if na == tenantDue[a] {
				continue
			}
			for b, nb := range perTenant {
				if nb > na+1 {
					t.Fatalf("lanes %v limit %d: tenant %s took %d with more due while %s took %d", lanes, limit, a, na, b, nb)
				}
			}
		}
	}
}

// TestShareTurnsRandom checks ShareTurns against turns taken one event at a
// time, and that counts read only up to a level that covers the take give
// the same shares, as the drivers read them.
func TestShareTurnsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for range 3000 {
		due := make([]int, r.IntN(7))
		sum := 0
		for i := range due {
			due[i] = r.IntN(9)
			sum += due[i]
		}
		take := r.IntN(30)
		want := make([]int, len(due))
		for left := take; left > 0; {
			moved := false
			for i := range due {
				if left > 0 && want[i] < due[i] {
					want[i]++
					left--
					moved = true
				}
			}
			if !moved {
				break
			}
		}
		if got := ShareTurns(due, take); !slices.Equal(got, want) {
			t.Fatalf("ShareTurns(%v, %d) = %v, want %v", due, take, got, want)
		}
		// Counts capped at the lowest level whose capped sum covers the
		// take (or uncapped when none does) share the same way.
		level := 0
		for capped := 0; capped < min(take, sum); level++ {
			capped = 0
			for _, d := range due {
				capped += min(d, level+1)
			}
		}
		read := make([]int, len(due))
		for i, d := range due {
			read[i] = min(d, level)
		}
		if got := ShareTurns(read, take); !slices.Equal(got, want) {
			t.Fatalf("ShareTurns(%v read as %v, %d) = %v, want %v", due, read, take, got, want)
		}
		// So do the counts that rounds of TurnRound read, as the drivers
		// read them, and no round reads a schedule past that level.
		read, ended := make([]int, len(due)), make([]bool, len(due))
		for rounds := 0; ; rounds++ {
			share := TurnRound(read, ended, take)
			if share == 0 {
				break
			}
			if rounds > len(due)+take {
				t.Fatalf("TurnRound(%v, %v, %d) does not end", read, ended, take)
			}
			for i := range due {
				if !ended[i] {
					n := min(share, due[i]-read[i])
					read[i] += n
					ended[i] = n < share
				}
			}
		}
		if got := ShareTurns(read, take); !slices.Equal(got, want) {
			t.Fatalf("ShareTurns(%v read in rounds as %v, %d) = %v, want %v", due, read, take, got, want)
		}
	}
}
