package store

import (
	"cmp"
	"slices"

	"github.com/schedulerd/schedulerd/model"
)

// ClaimLane is one lane of a shard's due events as a driver found it for
// EventClaimDue: Due is how many it holds, counted up to the claim's Limit.
type ClaimLane struct {
	TenantID string
	PolicyID string
	Priority int
	Due      int
}

// CompareInLane is the order in which EventClaimDue takes a lane's due
// events: earliest launch time first, then by index in their fires, so
// that the fires due at one instant take turns (each fire's first events
// before any fire's later ones), then by id. The drivers keep it in their
// claim indexes, with their own order for events of the same launch time
// and index.
func CompareInLane(a, b *model.Event) int {
	return cmp.Or(a.LaunchAt.Compare(b.LaunchAt), cmp.Compare(a.Index, b.Index), cmp.Compare(a.ID, b.ID))
}

// ShareClaim splits limit over lanes as EventClaimDue shares a claim and
// returns each lane's take, by index: equal shares of the tenants, a
// tenant's share split equally over its policies, and within a policy the
// highest priority first.
func ShareClaim(lanes []ClaimLane, limit int) []int {
	take := make([]int, len(lanes))
	if limit <= 0 || len(lanes) == 0 {
		return take
	}
	order := make([]int, len(lanes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		la, lb := &lanes[a], &lanes[b]
		return cmp.Or(cmp.Compare(la.TenantID, lb.TenantID), cmp.Compare(la.PolicyID, lb.PolicyID), cmp.Compare(lb.Priority, la.Priority))
	})
	// groups splits order[lo:hi] into runs of the same key.
	groups := func(lo, hi int, same func(a, b int) bool) [][2]int {
		var g [][2]int
		for s := lo; s < hi; {
			e := s + 1
			for e < hi && same(order[s], order[e]) {
				e++
			}
			g = append(g, [2]int{s, e})
			s = e
		}
		return g
	}
	due := func(g [2]int) int {
		n := 0
		for _, i := range order[g[0]:g[1]] {
			n += lanes[i].Due
		}
		return n
	}
	tenants := groups(0, len(order), func(a, b int) bool { return lanes[a].TenantID == lanes[b].TenantID })
	tq := waterfill(tenants, due, limit)
	for ti, t := range tenants {
		policies := groups(t[0], t[1], func(a, b int) bool { return lanes[a].PolicyID == lanes[b].PolicyID })
		pq := waterfill(policies, due, tq[ti])
		for pi, p := range policies {
			left := pq[pi]
			for _, i := range order[p[0]:p[1]] { // highest priority first
				n := min(left, lanes[i].Due)
				take[i], left = n, left-n
			}
		}
	}
	return take
}

// ShareTurns splits take over a policy lane's schedules, due[i] being how
// many due events the i-th has (in the order of their earliest), as turns
// of one event each would: each takes min(due, its share) and the first
// ones take the remainder of an uneven split. It returns each one's take.
// A driver may pass counts read only up to a level every schedule it read
// fully reaches: the result is the same.
func ShareTurns(due []int, take int) []int {
	groups := make([][2]int, len(due))
	for i := range groups {
		groups[i] = [2]int{i, i + 1}
	}
	return waterfill(groups, func(g [2]int) int { return due[g[0]] }, take)
}

// TurnRound is the next round of a driver's reads for ShareTurns: read[i]
// is how many due events of the i-th schedule it has read, ended[i]
// whether those are all it has. It returns how many more each schedule
// not ended reads: an equal share of what take leaves, rounded up; 0 when
// take are read or every schedule is. Reading in such rounds gives
// ShareTurns the counts it needs without reading any schedule further
// than the level the take reaches.
func TurnRound(read []int, ended []bool, take int) int {
	sum, live := 0, 0
	for i, n := range read {
		sum += n
		if !ended[i] {
			live++
		}
	}
	if sum >= take || live == 0 {
		return 0
	}
	return (take - sum + live - 1) / live
}

// waterfill shares limit equally over groups, a group that has fewer than
// its share taking all of them and leaving the rest to the others; the
// remainder of an uneven split goes to the first groups.
func waterfill(groups [][2]int, due func([2]int) int, limit int) []int {
	q := make([]int, len(groups))
	avail := make([]int, len(groups))
	open := 0
	for i, g := range groups {
		if avail[i] = due(g); avail[i] > 0 {
			open++
		}
	}
	give := func(i, n int) {
		q[i] += n
		avail[i] -= n
		limit -= n
		if avail[i] == 0 {
			open--
		}
	}
	for limit > 0 && open > 0 {
		share := limit / open
		if share == 0 { // the remainder: one each, first groups first
			for i := range groups {
				if limit > 0 && avail[i] > 0 {
					give(i, 1)
				}
			}
			break
		}
		capped := false
		for i := range groups {
			if avail[i] > 0 && avail[i] <= share {
				give(i, avail[i])
				capped = true
			}
		}
		if capped {
			continue // the others share what the capped ones left
		}
		for i := range groups {
			if avail[i] > 0 {
				give(i, share)
			}
		}
	}
	return q
}
