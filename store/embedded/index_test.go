package embedded

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var allEventStatuses = []model.EventStatus{
	model.EventPending, model.EventScheduled, model.EventDelivering, model.EventDelivered,
	model.EventReleased, model.EventRetrying, model.EventDead, model.EventCancelled,
}

// TestEventIndexesMatchRows stores events in every status, checks that
// every event reads back as it was written, adds events, drives them all
// through random transitions, claims and retention deletes, and checks
// before and at the end that every event bucket holds exactly the keys derived from
// the rows (the due index only waiting events, the policy index only
// unfinished ones, by class; the groups, their counts and entries) and that
// listing and counting by tenant and schedule agree with the events stored.
// The events mix canonical ones (id of fire and index, the tenant and
// schedule of the fire's first event) with loose ones (other ids, another
// tenant), and some differ from the first event of their fire in target,
// payload or deadline. Set EMBEDDED_TEST_SEED to vary the run.
func TestEventIndexesMatchRows(t *testing.T) {
	seed := testseed.Get(t, "EMBEDDED_TEST_SEED", 1)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := t.Context()

	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const stored, added = 200, 100
	var events []*model.Event
	for i := range stored + added {
		f := i % 7
		fireID := fmt.Sprintf("s%d.1", f)
		e := &model.Event{
			ID: model.EventID(fireID, i), TenantID: fmt.Sprintf("t%d", f%3),
			ScheduleID: fmt.Sprintf("s%d", f), FireID: fireID, FireTime: base, Index: i, Count: stored + added,
			LaunchAt: base.Add(time.Duration(rng.IntN(600)) * time.Second),
			Target:   model.Target{Type: model.TargetHTTP, URL: fmt.Sprintf("http://127.0.0.1:9/%d", f)},
			Payload:  json.RawMessage(fmt.Sprintf(`{"f":%d}`, f)), MaxAttempts: 3,
			Shard: rng.IntN(4), Status: model.EventPending, CreatedAt: base, UpdatedAt: base,
		}
		switch rng.IntN(8) {
		case 0: // an id of its own: loose
			e.ID, e.Index = fmt.Sprintf("x%d", i), 0
		case 1: // another tenant than its fire's: loose
			e.TenantID = "t9"
		case 2: // the id of another index: loose
			e.Index = i + 1
		case 3:
			e.Payload = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
			e.Target.URL += "/x"
			d := base.Add(time.Hour)
			e.Deadline = &d
		}
		if rng.IntN(3) > 0 {
			e.PolicyID = fmt.Sprintf("p%d", rng.IntN(2))
		}
		if i < stored {
			e.Status = allEventStatuses[rng.IntN(len(allEventStatuses))]
			e.Fence = int64(rng.IntN(3))
			e.Attempts = rng.IntN(3)
			if e.Status.Finished() {
				at := base.Add(time.Duration(rng.IntN(60)) * time.Second)
				e.FinishedAt = &at
			}
			if e.Status.HoldsToken() {
				at := base.Add(time.Minute)
				e.TokenExpiresAt, e.ReleaseToken = &at, fmt.Sprintf("tok%d", i)
			}
		}
		events = append(events, e)
	}
	// The first events in their statuses, as the transitions leave them,
	// sorted as a fire's events are inserted.
	s := openTemp(t, Options{})
	first := slices.Clone(events[:stored])
	slices.SortStableFunc(first, func(a, b *model.Event) int {
		return cmp.Or(strings.Compare(a.FireID, b.FireID), cmp.Compare(a.Index, b.Index))
	})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		x := newEvtx(tx, s.tokens)
		for _, e := range first {
			if _, err := x.insert(e); err != nil {
				return err
			}
		}
		return x.flush()
	}); err != nil {
		t.Fatal(err)
	}
	checkEventIndexes(t, s)
	for _, e := range events[:stored] {
		got, err := s.EventGetByID(ctx, e.ID)
		if err != nil {
			t.Fatalf("event %s: %v", e.ID, err)
		}
		if want := roundTrip(t, e); !reflect.DeepEqual(got, want) {
			t.Errorf("event %s read back:\n got %+v\nwant %+v", e.ID, got, want)
		}
	}
	if _, err := s.EventInsertMany(ctx, events[stored:]); err != nil {
		t.Fatal(err)
	}
	for _, e := range events[stored:] {
		got, err := s.EventGetByID(ctx, e.ID)
		if err != nil {
			t.Fatalf("event %s: %v", e.ID, err)
		}
		if want := roundTrip(t, e); !reflect.DeepEqual(got, want) {
			t.Errorf("event %s read back:\n got %+v\nwant %+v", e.ID, got, want)
		}
	}

	fence := int64(10)
	for step := range 3_000 {
		switch r := rng.IntN(100); {
		case r < 5:
			fence++
			if _, err := s.EventClaimDue(ctx, &store.EventClaimParams{
				Shard: rng.IntN(4), Fence: fence, DueBefore: base.Add(time.Duration(rng.IntN(700)) * time.Second), Limit: 1 + rng.IntN(20),
			}); err != nil {
				t.Fatalf("step %d: claim: %v", step, err)
			}
		case r < 7:
			if _, err := s.EventDeleteFinishedBefore(ctx, base.Add(time.Duration(rng.IntN(120))*time.Second), 1+rng.IntN(10)); err != nil {
				t.Fatalf("step %d: delete finished: %v", step, err)
			}
		default:
			e, err := s.EventGetByID(ctx, events[rng.IntN(len(events))].ID)
			if err != nil {
				continue // deleted by retention
			}
			to := allEventStatuses[rng.IntN(len(allEventStatuses))]
			tr := store.EventTransition{ID: e.ID, From: e.Status, To: to, At: base}
			if to.Finished() {
				at := base.Add(time.Duration(rng.IntN(120)) * time.Second)
				tr.FinishedAt = &at
			}
			if rng.IntN(4) == 0 {
				tr.LaunchAt = base.Add(time.Duration(rng.IntN(600)) * time.Second)
			}
			res, err := s.EventTransition(ctx, []store.EventTransition{tr})
			if err != nil || res[0] != nil {
				t.Fatalf("step %d: transition %s %s -> %s: %v %v", step, e.ID, e.Status, to, err, res)
			}
		}
	}
	checkEventIndexes(t, s)
	checkListsAndCounts(t, s, events)
}

// roundTrip is e as the store keeps it: encoded and decoded by the codec of
// full rows (times in UTC, empty payloads nil).
func roundTrip(t *testing.T, e *model.Event) *model.Event {
	t.Helper()
	raw, err := encodeEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkListsAndCounts pages EventList by tenant and by schedule in small
// pages and compares the ids with those of the events still stored, sorted;
// and checks EventCountByTenant and EventCountByStatus.
func checkListsAndCounts(t *testing.T, s *Store, events []*model.Event) {
	t.Helper()
	ctx := t.Context()
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	stored, err := s.EventGetMany(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	byTenant, bySched := map[string][]string{}, map[[2]string][]string{}
	statuses := map[string]store.EventCounts{}
	for _, e := range stored {
		byTenant[e.TenantID] = append(byTenant[e.TenantID], e.ID)
		k := [2]string{e.TenantID, e.ScheduleID}
		bySched[k] = append(bySched[k], e.ID)
		if statuses[e.TenantID] == nil {
			statuses[e.TenantID] = store.EventCounts{}
		}
		statuses[e.TenantID][e.Status]++
	}
	page := func(p store.EventListParams) []string {
		var got []string
		for {
			list, err := s.EventList(ctx, &p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list {
				got = append(got, e.ID)
			}
			if len(list) < p.Limit {
				return got
			}
			p.After = list[len(list)-1].ID
		}
	}
	for tenant, want := range byTenant {
		slices.Sort(want)
		if got := page(store.EventListParams{TenantID: tenant, Limit: 7}); !slices.Equal(got, want) {
			t.Errorf("EventList tenant %s:\n got %v\nwant %v", tenant, got, want)
		}
		if n, err := s.EventCountByTenant(ctx, tenant, 0); err != nil || n != len(want) {
			t.Errorf("EventCountByTenant %s = %d, %v; want %d", tenant, n, err, len(want))
		}
		if got, err := s.EventCountByStatus(ctx, tenant); err != nil || !maps.Equal(got, statuses[tenant]) {
			t.Errorf("EventCountByStatus %s = %v, %v; want %v", tenant, got, err, statuses[tenant])
		}
	}
	for k, want := range bySched {
		slices.Sort(want)
		if got := page(store.EventListParams{TenantID: k[0], ScheduleID: k[1], Limit: 3}); !slices.Equal(got, want) {
			t.Errorf("EventList tenant %s schedule %s:\n got %v\nwant %v", k[0], k[1], got, want)
		}
	}
}

func TestOpenRefusesNewerLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bMeta).Put(keyLayout, binary.BigEndian.AppendUint32(nil, layoutCurrent+1))
	}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, model.ErrUnavailable) || !strings.Contains(err.Error(), "newer schedulerd") {
		t.Fatalf("Open of a newer layout: got %v, want ErrUnavailable naming the newer version", err)
	}
}

// checkEventIndexes compares every event bucket with what the rows call
// for: the index keys (and, for the due index, the fence values) of each
// event, the groups with their heads, canonical counts and tenant and
// schedule entries, and the id entries of loose events.
func checkEventIndexes(t *testing.T, s *Store) {
	t.Helper()
	want := map[string]map[string]string{}
	for _, b := range [][]byte{bEvDue, bEvFire, bEvSched, bEvTenant, bEvPolicy, bEvFinished, bEvIDs, bEvGroups, bEvHeads} {
		want[string(b)] = map[string]string{}
	}
	add := func(b, k, v []byte) { want[string(b)][string(k)] = string(v) }
	err := s.db.View(func(tx *bolt.Tx) error {
		x := newEvtx(tx, s.tokens)
		rows := 0
		counts := map[uint64]uint64{}
		heads := map[uint64]*model.Event{}
		if err := tx.Bucket(bEvRows).ForEach(func(rk, _ []byte) error {
			e, err := x.load(rk)
			if err != nil {
				return err
			}
			rows++
			g, err := x.groupBySeq(seqOf(rk))
			if err != nil {
				return err
			}
			heads[g.seq] = g.head
			if _, ok := counts[g.seq]; !ok {
				counts[g.seq] = 0
			}
			if dueIndexed(e.Status) {
				k, err := x.dueKey(e, rk)
				if err != nil {
					return err
				}
				add(bEvDue, k, fenceValue(e))
			}
			if policyIndexed(e) {
				add(bEvPolicy, policyKey(e, rk), nil)
			}
			if retained(e) {
				add(bEvFinished, finishedKey(e, rk), nil)
			}
			k, err := fireIndexKey(e, rk)
			if err != nil {
				return err
			}
			add(bEvFire, k, nil)
			if slotOf(rk) < looseSlot {
				if !canonical(e, g.head) || slotOf(rk) != uint32(e.Index) {
					t.Errorf("event %s at slot %d is not canonical", e.ID, slotOf(rk))
				}
				counts[g.seq]++
			} else {
				add(bEvIDs, []byte(e.ID), rk)
				add(bEvTenant, append(tenantPrefix(tx, e.TenantID), e.ID...), rk)
				add(bEvSched, append(strKey(e.ScheduleID), e.ID...), rk)
			}
			return nil
		}); err != nil {
			return err
		}
		// The events that schedules' rows hold: one due entry each, and
		// their schedules' tenant entries marked.
		if err := tx.Bucket(bSchedules).ForEach(func(key, v []byte) error {
			if !rowHasEvent(v) {
				return nil
			}
			k := schedKeyID(key)
			p, err := decodeRowParts(k, v, &rowDict{tx: tx})
			if err != nil {
				return err
			}
			rows++
			if !pristine(p.event) || p.event.ScheduleID != k || p.event.FireID != p.fire.ID {
				t.Errorf("schedule %s holds event %+v", k, p.event)
			}
			if g, err := x.groupOf(p.fire.ID); err != nil || g != nil {
				t.Errorf("schedule %s holds the event of fire %s, which has a group too (%v)", k, p.fire.ID, err)
			}
			dk, err := x.dueKey(p.event, impliedKey(k))
			if err != nil {
				return err
			}
			add(bEvDue, dk, fenceValue(p.event))
			if v := tx.Bucket(bSchedTenant).Get(appendTenantSched(tenantPrefix(tx, p.sc.TenantID), k)); !isTenantImplied(v) {
				t.Errorf("schedule %s holds an event, and its tenant entry holds %q", k, v)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bSchedTenant).ForEach(func(k, v []byte) error {
			if len(v) == 0 {
				return nil
			}
			_, n := binary.Uvarint(k)
			id := tenantSchedID(k[n:])
			if !isTenantImplied(v) || !rowHasEvent(tx.Bucket(bSchedules).Get(schedKey(id))) {
				t.Errorf("%s: key %q holds %q, and its row no event", bSchedTenant, k, v)
			}
			return nil
		}); err != nil {
			return err
		}
		for seq, h := range heads {
			// A head has no id and index. One that leaves fields to its
			// schedule's row is compared decoded (below).
			raw, err := encodeEvent(h)
			if err != nil {
				return err
			}
			add(bEvHeads, seqKey(seq), raw)
			add(bEvGroups, strKey(h.FireID), binary.AppendUvarint(seqKey(seq), counts[seq]))
			add(bEvTenant, append(tenantPrefix(tx, h.TenantID), groupEntry(h.FireID)...), nil)
			if !impliedGroup(h.ScheduleID, h.FireID) {
				add(bEvSched, append(strKey(h.ScheduleID), groupEntry(h.FireID)...), nil)
			}
		}
		if rows == 0 {
			t.Error("no events left to check")
		}
		// Each schedule's first entry in a lane of a policy is its head.
		want[string(bEvDueHeads)] = map[string]string{}
		first := map[string][]byte{} // schedule's prefix -> its first key
		for k := range want[string(bEvDue)] {
			_, sched, ok, err := inTurns([]byte(k))
			if err != nil {
				return err
			}
			if f, seen := first[k[:sched]]; ok && (!seen || k < string(f)) {
				first[k[:sched]] = []byte(k)
			}
		}
		for sp, k := range first {
			lane, sched, _, _ := inTurns(k)
			add(bEvDueHeads, headKey([]byte(sp), lane, k[sched:sched+timeLen]), nil)
		}
		for name, keys := range want {
			got := 0
			if err := tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
				got++
				wv, ok := keys[string(k)]
				switch {
				case !ok:
					t.Errorf("%s: key %q has no row that calls for it", name, k)
				case name == string(bEvHeads) && refersToSchedule(v):
					if h, err := x.decodeHead(v); err != nil || !reflect.DeepEqual(h, heads[binary.BigEndian.Uint64(k)]) {
						t.Errorf("%s: key %q holds a head that refers to its schedule: %+v, %v; want %+v", name, k, h, err, heads[binary.BigEndian.Uint64(k)])
					}
				case !bytes.Equal(v, []byte(wv)):
					t.Errorf("%s: key %q holds %x, want %x", name, k, v, wv)
				}
				return nil
			}); err != nil {
				return err
			}
			if got != len(keys) {
				t.Errorf("%s: %d keys, want %d", name, got, len(keys))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An id is stored once whichever way it comes: as a canonical event of its
// fire or as a loose event of another fire, in either order.
func TestEventIDUniqueAcrossFires(t *testing.T) {
	ctx := t.Context()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	canon := &model.Event{ID: "f.5", FireID: "f", Index: 5, TenantID: "t", ScheduleID: "s", Status: model.EventPending, LaunchAt: base}
	loose := &model.Event{ID: "f.5", FireID: "g", Index: 0, TenantID: "t", ScheduleID: "s", Status: model.EventPending, LaunchAt: base}
	for name, order := range map[string][]*model.Event{"canonical first": {canon, loose}, "loose first": {loose, canon}} {
		s, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range order {
			n, err := s.EventInsertMany(ctx, []*model.Event{e})
			if want := 1 - i; err != nil || n != want {
				t.Errorf("%s: insert %d (fire %s): %d inserted, %v; want %d", name, i, e.FireID, n, err, want)
			}
		}
		if got, err := s.EventGetByID(ctx, "f.5"); err != nil || got.FireID != order[0].FireID {
			t.Errorf("%s: event f.5 = %+v, %v; want the one of fire %s", name, got, err, order[0].FireID)
		}
		if n, err := s.EventCountByTenant(ctx, "t", 0); err != nil || n != 1 {
			t.Errorf("%s: %d events of the tenant, %v; want 1", name, n, err)
		}
		_ = s.Close()
	}
}

// Paging after an id that is a fire id and its dot (no event has it, but the
// contract pages after any string) lists that fire's events once.
func TestEventListAfterFirePrefix(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, Options{})
	var want []string
	for i := range 12 {
		e := &model.Event{ID: model.EventID("f", i), FireID: "f", Index: i, TenantID: "t", ScheduleID: "s", Status: model.EventPending}
		if _, err := s.EventInsertMany(ctx, []*model.Event{e}); err != nil {
			t.Fatal(err)
		}
		want = append(want, e.ID)
	}
	slices.Sort(want)
	for _, p := range []store.EventListParams{{TenantID: "t", After: "f."}, {TenantID: "t", ScheduleID: "s", After: "f."}} {
		list, err := s.EventList(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range list {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("EventList %+v:\n got %v\nwant %v", p, got, want)
		}
	}
}
