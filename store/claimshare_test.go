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
