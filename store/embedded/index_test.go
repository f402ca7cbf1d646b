package embedded

import (
	"bytes"
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

	"github.com/schedulerd/schedulerd/internal/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var allEventStatuses = []model.EventStatus{
	model.EventPending, model.EventScheduled, model.EventDelivering, model.EventDelivered,
	model.EventReleased, model.EventRetrying, model.EventDead, model.EventCancelled,
}

// TestEventIndexesMatchRows starts from a data directory in layout 1 or 2
// (events in full by id, with the index keys of those layouts), reopens it
// (which migrates it in several transactions), checks that every event reads
// back as it was written, adds events, drives them all through random
// transitions, claims and retention deletes, and checks after the migration
// and at the end that every event bucket holds exactly the keys derived from
// the rows (the due index only waiting events, the policy index only
// unfinished ones, by class; the groups, their counts and entries) and that
// listing and counting by tenant and schedule agree with the events stored.
// The events mix canonical ones (id of fire and index, the tenant and
// schedule of the fire's first event) with loose ones (other ids, another
// tenant), and some differ from the first event of their fire in target,
// payload or deadline. Set EMBEDDED_TEST_SEED to vary the run.
func TestEventIndexesMatchRows(t *testing.T) {
	for _, layout := range []int{1, layoutNarrowIndexes} {
		t.Run(fmt.Sprintf("layout%d", layout), func(t *testing.T) { testEventIndexesMatchRows(t, layout) })
	}
}

func testEventIndexesMatchRows(t *testing.T, layout int) {
	seed := testseed.Get(t, "EMBEDDED_TEST_SEED", 1)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := t.Context()
	dir := t.TempDir()

	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const legacy, added = 200, 100
	var events []*model.Event
	for i := range legacy + added {
		f := i % 7
		fireID := fmt.Sprintf("s%d.1", f)
		e := &model.Event{
			ID: model.EventID(fireID, i), TenantID: fmt.Sprintf("t%d", f%3),
			ScheduleID: fmt.Sprintf("s%d", f), FireID: fireID, FireTime: base, Index: i, Count: legacy + added,
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
		if i < legacy {
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
	writeLegacy(t, dir, layout, events[:legacy])

	// Several migration transactions, the last one short.
	s, err := Open(dir, Options{migrateChunk: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkMigrated(t, s)
	checkEventIndexes(t, s)
	for _, e := range events[:legacy] {
		got, err := s.EventGetByID(ctx, e.ID)
		if err != nil {
			t.Fatalf("event %s after the migration: %v", e.ID, err)
		}
		if want := roundTrip(t, e); !reflect.DeepEqual(got, want) {
			t.Errorf("event %s after the migration:\n got %+v\nwant %+v", e.ID, got, want)
		}
	}
	if _, err := s.EventInsertMany(ctx, events[legacy:]); err != nil {
		t.Fatal(err)
	}
	for _, e := range events[legacy:] {
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

// writeLegacy creates a store in dir holding events as layout 1 (or 2) wrote
// them: every event in full under its id, with index keys that repeat the
// id; in layout 1 due and policy keys (by status) for every event, in
// layout 2 for waiting and unfinished events only (by class). The encoding
// is layout 2's binary rows, which layout 1 read too.
func writeLegacy(t testing.TB, dir string, layout int, events []*model.Event) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if layout == 1 {
			if err := tx.Bucket(bMeta).Delete(keyLayout); err != nil {
				return err
			}
		} else if err := tx.Bucket(bMeta).Put(keyLayout, binary.BigEndian.AppendUint32(nil, uint32(layout))); err != nil {
			return err
		}
		// An empty store of the current layout: its event buckets would be
		// created empty by the Open that migrates it.
		for _, name := range eventBuckets {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		names := legacyBuckets
		if layout != 1 {
			names = names[:len(names)-1] // no layout-1 policy bucket
		}
		for _, name := range names {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		for _, e := range events {
			raw, err := encodeEvent(e)
			if err != nil {
				return err
			}
			puts := [][3][]byte{
				{bEventsLayout2, []byte(e.ID), raw},
				{[]byte("events_by_fire_status"), append(strKey(e.FireID, string(e.Status)), e.ID...), nil},
				{[]byte("events_by_schedule"), append(strKey(e.ScheduleID), e.ID...), nil},
				{[]byte("events_by_tenant"), append(strKey(e.TenantID), e.ID...), nil},
			}
			if layout == 1 || dueIndexed(e.Status) {
				puts = append(puts, [3][]byte{[]byte("events_by_shard_status_launch"), legacyDueKey(e), binary.BigEndian.AppendUint64(nil, uint64(e.Fence))})
			}
			switch {
			case layout == 1 && e.PolicyID != "":
				puts = append(puts, [3][]byte{bEvPolicyLayout1, append(appendTime(strKey(e.PolicyID, string(e.Status)), e.LaunchAt), e.ID...), nil})
			case layout != 1 && policyIndexed(e):
				puts = append(puts, [3][]byte{[]byte("events_by_policy_class_launch"), append(appendTime(strKey(e.PolicyID, policyClass(e.Status)), e.LaunchAt), e.ID...), nil})
			}
			if retained(e) {
				puts = append(puts, [3][]byte{[]byte("events_finished_by_time"), append(appendTime(nil, *e.FinishedAt), e.ID...), nil})
			}
			for _, p := range puts {
				if err := tx.Bucket(p[0]).Put(p[1], p[2]); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// legacyDueKey is the due key of layouts 1 and 2: shard, status\0,
// [fence], launchAt, id.
func legacyDueKey(e *model.Event) []byte {
	b := appendStr(appendInt32(nil, e.Shard), string(e.Status))
	if e.Status == model.EventScheduled {
		b = binary.BigEndian.AppendUint64(b, uint64(e.Fence))
	}
	return append(appendTime(b, e.LaunchAt), e.ID...)
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
		x := newEvtx(tx)
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
				k, err := dueKey(e, rk)
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
			dk, err := dueKey(p.event, impliedKey(k))
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

// An empty directory of layout 1 is migrated too: its layout-1 bucket goes
// and the current version is recorded.
func TestOpenMigratesEmptyLayout1(t *testing.T) {
	dir := t.TempDir()
	writeLegacy(t, dir, 1, nil)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkMigrated(t, s)
}

// checkMigrated checks that the buckets of layouts 1 and 2 are gone and the current
// layout is recorded.
func checkMigrated(t *testing.T, s *Store) {
	t.Helper()
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, name := range append(legacyBuckets, bSchedTenantLayout5, bEvTenantLayout5) {
			if tx.Bucket(name) != nil {
				t.Errorf("bucket %s is still there after the migration", name)
			}
		}
		if raw := tx.Bucket(bMeta).Get(keyLayout); len(raw) != 4 || binary.BigEndian.Uint32(raw) != layoutCurrent {
			t.Errorf("recorded layout %x, want %d", raw, layoutCurrent)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDriverMigrate opens a directory of layout 2 holding n events
// (SCHEDULERD_BENCH_FOOTPRINT, default 100,000; fires of 1,000 events as
// benchEvent makes them) and reports the time Open takes to migrate it.
//
//	go test -run='^$' -bench=DriverMigrate -benchtime=1x ./store/embedded
func BenchmarkDriverMigrate(b *testing.B) {
	n := footprintN(b)
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		for lo := 0; lo < n; lo += 100_000 {
			events := make([]*model.Event, 0, 100_000)
			for i := lo; i < min(lo+100_000, n); i++ {
				events = append(events, benchEvent(i))
			}
			writeLegacyMore(b, dir, lo == 0, events)
		}
		b.StartTimer()
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got, err := s.EventCountByTenant(b.Context(), "tenant-00", 0); err != nil || got == 0 {
			b.Fatalf("after the migration: %d events of tenant-00, %v", got, err)
		}
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// writeLegacyMore writes events as layout 2 did, into a new directory
// (first) or one writeLegacy already made.
func writeLegacyMore(b *testing.B, dir string, first bool, events []*model.Event) {
	b.Helper()
	if first {
		writeLegacy(b, dir, layoutNarrowIndexes, events)
		return
	}
	db, err := bolt.Open(dir+"/"+fileName, 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, e := range events {
			raw, err := encodeEvent(e)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bEventsLayout2).Put([]byte(e.ID), raw); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
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

// A migration that a crash interrupted left part of its work in the new
// buckets and the old version recorded: the next Open starts again from the
// old rows and ends with every event as it was, none twice.
func TestOpenRedoesInterruptedMigration(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []*model.Event
	for i := range 40 {
		events = append(events, &model.Event{
			ID: model.EventID("s.1", i), FireID: "s.1", Index: i, TenantID: "t", ScheduleID: "s",
			Status: model.EventPending, LaunchAt: base.Add(time.Duration(i) * time.Second), CreatedAt: base, UpdatedAt: base,
		})
	}
	writeLegacy(t, dir, layoutNarrowIndexes, events)
	// What an interrupted run leaves: the first events in the new buckets,
	// one of them already moved on.
	db, err := bolt.Open(dir+"/"+fileName, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range eventBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		x := newEvtx(tx)
		for _, e := range events[:15] {
			moved := *e
			if e.Index == 3 {
				moved.Status = model.EventDelivering
			}
			if _, err := x.insert(&moved); err != nil {
				return err
			}
		}
		return x.flush()
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{migrateChunk: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkMigrated(t, s)
	checkEventIndexes(t, s)
	for _, e := range events {
		got, err := s.EventGetByID(ctx, e.ID)
		if err != nil || !reflect.DeepEqual(got, roundTrip(t, e)) {
			t.Errorf("event %s after the migration: %+v, %v; want %+v", e.ID, got, err, e)
		}
	}
	if n, err := s.EventCountByTenant(ctx, "t", 0); err != nil || n != len(events) {
		t.Errorf("%d events after the migration, %v; want %d", n, err, len(events))
	}
}
