package emitter_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

func TestNewValidatesConfig(t *testing.T) {
	st := openEmbedded(t)
	cases := []struct {
		name  string
		mod   func(*emitter.Config)
		field string
	}{
		{"RejectsNegativePartitions", func(c *emitter.Config) { c.Partitions = -1 }, "Partitions"},
		{"RejectsNegativeShards", func(c *emitter.Config) { c.Shards = -3 }, "Shards"},
		{"RejectsSubSecondWindow", func(c *emitter.Config) { c.Window = 500 * time.Millisecond }, "Window"},
		{"RejectsNegativeLead", func(c *emitter.Config) { c.Lead = -time.Second }, "Lead"},
		{"RejectsCatchUpBelowWindow", func(c *emitter.Config) { c.CatchUpLimit = time.Second }, "CatchUpLimit"},
		{"RejectsHugeBatch", func(c *emitter.Config) { c.BatchSize = 1 << 30 }, "BatchSize"},
		{"RejectsNoOwner", func(c *emitter.Config) { c.Owner = "" }, "Owner"},
		{"RejectsNegativeDrainTimeout", func(c *emitter.Config) { c.DrainTimeout = -time.Second }, "DrainTimeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := emitter.Config{Owner: "x"}
			tc.mod(&cfg)
			_, err := emitter.New(cfg, emitter.Deps{Store: st})
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want one naming %s", err, tc.field)
			}
		})
	}
	t.Run("RejectsNoStore", func(t *testing.T) {
		if _, err := emitter.New(emitter.Config{Owner: "x"}, emitter.Deps{}); err == nil || !strings.Contains(err.Error(), "Store") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("FillsDefaults", func(t *testing.T) {
		e, err := emitter.New(emitter.Config{Owner: "x"}, emitter.Deps{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		c := e.Config()
		if c.Partitions != 16 || c.Shards != 16 || c.Window != time.Minute || c.Lead != 2*time.Minute ||
			c.CatchUpLimit != time.Hour || c.BatchSize != 1000 {
			t.Fatalf("defaults: %+v", c)
		}
	})
}

func TestPassEmitsFiresWithEvents(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	emitted := make(chan *model.Fire, 10)
	e := newEmitter(t, st, clk, func(_ *emitter.Config, d *emitter.Deps) { d.Emitted = emitted })
	every5 := sched("every5", "*/5 * * * *", "UTC", 3)
	berlin := sched("berlin", "2 12 * * *", "Europe/Berlin", 2)
	later := sched("later", "10 10 * * *", "UTC", 1) // beyond the lead
	create(t, st, every5, berlin, later)

	ps := runPass(t, e)
	if ps.Partitions != partitions || ps.Windows != 3*partitions || ps.Fires != 2 || ps.Events != 5 {
		t.Fatalf("stats = %+v", ps)
	}
	if len(emitted) != 2 {
		t.Fatalf("Emitted got %d fires, want 2", len(emitted))
	}

	fs := firesOf(t, st, "every5")
	if len(fs) != 1 {
		t.Fatalf("every5 fires = %v", fireTimes(fs))
	}
	f := fs[0]
	ft := utc("2025-06-02T10:00:00Z")
	if f.ID != model.FireID("every5", 1, ft) || !f.FireTime.Equal(ft) || f.Count != 3 ||
		f.Decision != model.FireEmitted || f.LocalTime != "2025-06-02T10:00:00Z" || f.TenantID != tenant {
		t.Fatalf("fire = %+v", f)
	}
	evs := eventsOf(t, st, f.ID)
	if len(evs) != 3 {
		t.Fatalf("events = %d, want 3", len(evs))
	}
	tokens := map[string]bool{}
	for i, ev := range evs {
		if ev.ID != model.EventID(f.ID, i) || ev.Index != i || ev.Count != 3 || !ev.LaunchAt.Equal(ft) ||
			!ev.FireTime.Equal(ft) || ev.Deadline != nil || ev.Status != model.EventPending ||
			ev.Shard < 0 || ev.Shard >= 8 || ev.MaxAttempts != 3 || ev.ScheduleID != "every5" ||
			string(ev.Payload) != `{"job":"every5"}` || ev.Target.URL != every5.Target.URL {
			t.Fatalf("event %d = %+v", i, ev)
		}
		if ev.Shard != model.ShardOf(ev, 8) {
			t.Fatalf("event %d shard %d, want %d", i, ev.Shard, model.ShardOf(ev, 8))
		}
		tokens[ev.ReleaseToken] = true
	}
	bf := firesOf(t, st, "berlin")
	if len(bf) != 1 || !bf[0].FireTime.Equal(utc("2025-06-02T10:02:00Z")) || bf[0].LocalTime != "2025-06-02T12:02:00+02:00" {
		t.Fatalf("berlin fires = %+v", bf)
	}
	if got := firesOf(t, st, "later"); len(got) != 0 {
		t.Fatalf("later fired early: %v", fireTimes(got))
	}

	// The next pass scans only the new window.
	clk.Advance(time.Minute)
	ps = runPass(t, e)
	if ps.Windows != partitions || ps.Fires != 0 {
		t.Fatalf("second pass stats = %+v", ps)
	}
}

// Invariant 2: one (schedule, fire time, index) is one event however often a
// window is scanned. The watermark advance fails (a crash after emitting), so
// the next pass scans the same windows again.
func TestRescanNeverDoubleEmits(t *testing.T) {
	base := openEmbedded(t)
	fs := &faultyStore{Store: base}
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, fs, clk, nil)
	var all []*model.Schedule
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		all = append(all, sched(id, "* * * * *", "UTC", 5))
	}
	big := sched("big", "1 10 * * *", "UTC", 250) // 3 batches of 100
	all = append(all, big)
	create(t, base, all...)

	fs.failAdvance.Store(1000)
	fs.failInsertAt.Store(3) // and one event batch fails midway
	if _, err := e.RunPass(context.Background()); err == nil {
		t.Fatal("first pass: want an error")
	}
	fs.failAdvance.Store(0)
	fs.failInsertAt.Store(0)
	ps := runPass(t, e)
	if ps.Windows != 3*partitions {
		t.Fatalf("rescan windows = %d", ps.Windows)
	}
	if ps.FiresExisting == 0 {
		t.Fatalf("rescan found no existing fires: %+v", ps)
	}

	// A third emitter instance scanning the same windows (e.g. two
	// instances briefly both believing they hold every partition).
	other := newEmitter(t, base, clk, nil)
	if _, err := base.WatermarkGet(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	_ = other // its watermark is the same store's: nothing left to scan
	ctx := context.Background()
	for _, s := range all {
		// Saved re-emits everything up to the horizon, a rescan by another path.
		if err := other.Saved(ctx, s, keysOf(t, s)); err != nil {
			t.Fatal(err)
		}
	}

	for _, s := range all {
		fires := firesOf(t, base, s.ID)
		want := minutes(utc("2025-06-02T10:01:00Z"), time.Minute, 4) // Saved reaches 10:04
		want = append([]time.Time{utc("2025-06-02T10:00:00Z")}, want...)
		if s == big {
			want = []time.Time{utc("2025-06-02T10:01:00Z")}
		}
		if !equalTimes(fireTimes(fires), want) {
			t.Fatalf("%s fires = %v, want %v", s.ID, fireTimes(fires), want)
		}
		for _, f := range fires {
			evs := eventsOf(t, base, f.ID)
			if len(evs) != s.EventCount {
				t.Fatalf("%s: %d events, want %d", f.ID, len(evs), s.EventCount)
			}
			seen := map[int]bool{}
			for _, ev := range evs {
				if ev.Index < 0 || ev.Index >= s.EventCount || seen[ev.Index] || ev.ID != model.EventID(f.ID, ev.Index) {
					t.Fatalf("%s: bad or repeated event %s index %d", f.ID, ev.ID, ev.Index)
				}
				seen[ev.Index] = true
			}
		}
	}
}

// Fire times across DST transitions, checked against hand-computed instants.
func TestWindowsAcrossDST(t *testing.T) {
	cases := []struct {
		name     string
		from, to time.Time
		want     map[string][]time.Time
	}{
		{
			name: "SpringForwardBerlin",
			from: utc("2025-03-29T23:00:10Z"), to: utc("2025-03-30T03:00:10Z"),
			want: map[string][]time.Time{
				// 02:30 does not exist: fires once at the first instant after the gap.
				"gap":   {utc("2025-03-30T01:00:00Z")},
				"every": minutes(utc("2025-03-29T23:00:00Z"), 30*time.Minute, 9),
				"night": {utc("2025-03-30T00:15:00Z")},
				"three": {utc("2025-03-30T01:00:00Z")},
				"two":   {utc("2025-03-30T01:00:00Z")}, // 02:00 skipped too
			},
		},
		{
			name: "FallBackBerlin",
			from: utc("2025-10-25T22:00:10Z"), to: utc("2025-10-26T03:00:10Z"),
			want: map[string][]time.Time{
				// 02:30 happens twice: fires once, at its first occurrence.
				"gap":   {utc("2025-10-26T00:30:00Z")},
				"every": minutes(utc("2025-10-25T22:00:00Z"), 30*time.Minute, 11),
				"night": {utc("2025-10-25T23:15:00Z")},
				"three": {utc("2025-10-26T02:00:00Z")},
				"two":   {utc("2025-10-26T00:00:00Z")},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := openEmbedded(t)
			clk := newClock(tc.from)
			e := newEmitter(t, st, clk, func(c *emitter.Config, _ *emitter.Deps) { c.Partitions = 1 })
			p0 := func(s *model.Schedule) { s.Partition = 0 }
			create(t, st,
				sched("gap", "30 2 * * *", "Europe/Berlin", 1, p0),
				sched("every", "0,30 * * * *", "Europe/Berlin", 1, p0),
				sched("night", "15 1 * * *", "Europe/Berlin", 1, p0),
				sched("three", "0 3 * * *", "Europe/Berlin", 1, p0),
				sched("two", "0 2 * * *", "Europe/Berlin", 1, p0),
			)
			for now := tc.from; !now.After(tc.to); now = now.Add(time.Minute) {
				setClock(clk, now)
				ps := runPass(t, e)
				if ps.FiresLate != 0 {
					t.Fatalf("late fires at %s", now)
				}
			}
			// Keep only fires before the end of the range (the last pass ran ahead).
			for id, want := range tc.want {
				var got []time.Time
				for _, ft := range fireTimes(firesOf(t, st, id)) {
					if ft.Before(tc.to) {
						got = append(got, ft)
					}
				}
				if !equalTimes(got, want) {
					t.Errorf("%s fires = %v, want %v", id, got, want)
				}
			}
		})
	}
}

func TestCatchUpAfterDowntime(t *testing.T) {
	base := openEmbedded(t)
	fs := &faultyStore{Store: base}
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	m := newCountingMetrics()
	e := newEmitter(t, fs, clk, func(_ *emitter.Config, d *emitter.Deps) { d.Metrics = m })
	once := sched("once", "*/5 * * * *", "UTC", 1)
	all := sched("all", "*/5 * * * *", "UTC", 1, func(s *model.Schedule) { s.Misfire = model.MisfireFireAll })
	skip := sched("skip", "*/5 * * * *", "UTC", 1, func(s *model.Schedule) { s.Misfire = model.MisfireSkip })
	create(t, base, once, all, skip)
	runPass(t, e) // 10:00, watermark 10:03

	t.Run("GapInsideLimit", func(t *testing.T) {
		setClock(clk, utc("2025-06-02T10:30:30Z"))
		ps := runPass(t, e)
		if ps.FiresLate != 1+5 || ps.Skipped[emitter.SkipSuperseded] != 4 || ps.Skipped[emitter.SkipMisfire] != 5 || ps.WindowsSkipped != 0 {
			t.Fatalf("stats = %+v", ps)
		}
		checkFires(t, base, "once", "10:00 10:25L 10:30")
		checkFires(t, base, "all", "10:00 10:05L 10:10L 10:15L 10:20L 10:25L 10:30")
		checkFires(t, base, "skip", "10:00 10:30")
	})

	t.Run("RetriedCatchUpFiresOnce", func(t *testing.T) {
		// Down again; the catch-up emits but crashes before the watermark
		// moves, and is retried five minutes later.
		setClock(clk, utc("2025-06-02T10:45:30Z"))
		fs.failAdvance.Store(partitions)
		if _, err := e.RunPass(context.Background()); err == nil {
			t.Fatal("want an error from the failing watermark")
		}
		checkFires(t, base, "once", "10:00 10:25L 10:30 10:40L")
		setClock(clk, utc("2025-06-02T10:50:30Z"))
		ps := runPass(t, e)
		if ps.Skipped[emitter.SkipCaughtUp] != 1 {
			t.Fatalf("stats = %+v", ps)
		}
		checkFires(t, base, "once", "10:00 10:25L 10:30 10:40L 10:50")
		checkFires(t, base, "all", "10:00 10:05L 10:10L 10:15L 10:20L 10:25L 10:30 10:35L 10:40L 10:45L 10:50")
		checkFires(t, base, "skip", "10:00 10:30 10:50")
	})

	t.Run("GapBeyondLimit", func(t *testing.T) {
		setClock(clk, utc("2025-06-02T13:00:30Z")) // watermark 10:53; limit 12:00:30
		before := m.skipped[emitter.SkipTooOld]
		ps := runPass(t, e)
		// [10:53, 12:00) jumped in one go: 67 windows per partition.
		if ps.WindowsSkipped != 67*partitions {
			t.Fatalf("windows skipped = %d, want %d", ps.WindowsSkipped, 67*partitions)
		}
		if ps.Skipped[emitter.SkipTooOld] != 3 || m.skipped[emitter.SkipTooOld]-before != 3 {
			t.Fatalf("too old = %d", ps.Skipped[emitter.SkipTooOld])
		}
		if ps.Skipped[emitter.SkipSuperseded] != 10 || ps.Skipped[emitter.SkipMisfire] != 11 || ps.FiresLate != 1+11 {
			t.Fatalf("stats = %+v", ps)
		}
		checkFires(t, base, "once", "10:00 10:25L 10:30 10:40L 10:50 12:55L 13:00")
		checkFires(t, base, "all", "10:00 10:05L 10:10L 10:15L 10:20L 10:25L 10:30 10:35L 10:40L 10:45L 10:50 "+
			"12:05L 12:10L 12:15L 12:20L 12:25L 12:30L 12:35L 12:40L 12:45L 12:50L 12:55L 13:00")
		checkFires(t, base, "skip", "10:00 10:30 10:50 13:00")
	})
	for _, f := range firesOf(t, base, "once") {
		if f.Decision == model.FireLate && !strings.HasPrefix(f.Note, "late by ") {
			t.Fatalf("late fire note = %q", f.Note)
		}
	}
}

// checkFires compares a schedule's fires on 2025-06-02 with "HH:MM[L] ..."
// where L marks a late fire.
func checkFires(t *testing.T, st store.Driver, id, spec string) {
	t.Helper()
	want := strings.Fields(spec)
	var got []string
	for _, f := range firesOf(t, st, id) {
		s := f.FireTime.UTC().Format("15:04")
		if f.Decision == model.FireLate {
			s += "L"
		}
		got = append(got, s)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s fires:\n got  %s\n want %s", id, strings.Join(got, " "), strings.Join(want, " "))
	}
}

func TestOverlapPolicies(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, func(c *emitter.Config, _ *emitter.Deps) { c.Lead = time.Second })
	skipS := sched("skip", "* * * * *", "UTC", 2, func(s *model.Schedule) { s.Overlap = model.OverlapSkip })
	cancelS := sched("cancel", "* * * * *", "UTC", 2, func(s *model.Schedule) { s.Overlap = model.OverlapCancel })
	allowS := sched("allow", "* * * * *", "UTC", 2)
	create(t, st, skipS, cancelS, allowS)
	ctx := context.Background()

	runPass(t, e) // 10:00 for all three
	setClock(clk, utc("2025-06-02T10:01:30Z"))
	ps := runPass(t, e)
	if ps.FiresOverlapSkipped != 1 {
		t.Fatalf("stats = %+v", ps)
	}
	setClock(clk, utc("2025-06-02T10:02:30Z"))
	runPass(t, e)

	f0 := model.FireID("skip", 1, utc("2025-06-02T10:00:00Z"))
	sf := firesOf(t, st, "skip")
	if len(sf) != 3 || sf[0].Decision != model.FireEmitted || sf[1].Decision != model.FireSkippedOverlap ||
		sf[2].Decision != model.FireSkippedOverlap || !strings.Contains(sf[2].Note, f0) {
		for _, f := range sf {
			t.Logf("%+v", f)
		}
		t.Fatalf("skip fires = %d", len(sf))
	}
	if n := len(eventsOf(t, st, sf[1].ID)); n != 0 {
		t.Fatalf("skipped fire has %d events", n)
	}
	// The first fire drains: the next one runs.
	var tr []store.EventTransition
	for _, ev := range eventsOf(t, st, f0) {
		at := clk.Now()
		tr = append(tr, store.EventTransition{ID: ev.ID, From: model.EventPending, To: model.EventReleased, FinishedAt: &at, At: at})
	}
	if _, err := st.EventTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	setClock(clk, utc("2025-06-02T10:03:30Z"))
	runPass(t, e)
	sf = firesOf(t, st, "skip")
	if len(sf) != 4 || sf[3].Decision != model.FireEmitted || len(eventsOf(t, st, sf[3].ID)) != 2 {
		t.Fatalf("skip fires after drain = %+v", sf)
	}

	cf := firesOf(t, st, "cancel")
	if len(cf) != 4 {
		t.Fatalf("cancel fires = %v", fireTimes(cf))
	}
	for i, f := range cf {
		want := model.FireCancelledByNext
		if i == 3 {
			want = model.FireEmitted
		}
		if f.Decision != want {
			t.Fatalf("cancel fire %d decision %s, want %s", i, f.Decision, want)
		}
		for _, ev := range eventsOf(t, st, f.ID) {
			if (ev.Status == model.EventCancelled) != (i < 3) {
				t.Fatalf("cancel fire %d event status %s", i, ev.Status)
			}
		}
	}
	for _, f := range firesOf(t, st, "allow") {
		if f.Decision != model.FireEmitted || len(eventsOf(t, st, f.ID)) != 2 {
			t.Fatalf("allow fire = %+v", f)
		}
	}
}

func TestSavedEmitsInsideScannedHorizon(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	runPass(t, e) // nothing yet; every partition scanned up to 10:03

	s := sched("late-created", "* * * * *", "UTC", 1)
	create(t, st, s)
	if err := e.Saved(ctx, s, keysOf(t, s)); err != nil {
		t.Fatal(err)
	}
	checkFires(t, st, s.ID, "10:01 10:02 10:03 10:04")
	for _, now := range []string{"10:01:30", "10:02:30", "10:03:30"} {
		setClock(clk, utc("2025-06-02T"+now+"Z"))
		runPass(t, e)
	}
	checkFires(t, st, s.ID, "10:01 10:02 10:03 10:04 10:05")

	t.Run("EditChangesFutureFires", func(t *testing.T) {
		// 10:01-10:03 were delivered; at 10:03:45 the cron changes.
		for _, f := range firesOf(t, st, s.ID)[:3] {
			release(t, st, f, clk.Now())
		}
		setClock(clk, utc("2025-06-02T10:03:45Z"))
		s2 := *s
		s2.Cron, s2.Version = "*/2 * * * *", 2
		if err := st.ScheduleUpdate(ctx, &s2, 1, childrenOf(t, &s2)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.EventCancelPending(ctx, s.ID, "", clk.Now()); err != nil { // the master's part
			t.Fatal(err)
		}
		if err := e.Saved(ctx, &s2, keysOf(t, &s2)); err != nil {
			t.Fatal(err)
		}
		for _, now := range []string{"10:04:30", "10:05:30", "10:06:30"} {
			setClock(clk, utc("2025-06-02T"+now+"Z"))
			runPass(t, e)
		}
		live := map[string][]string{} // fire time -> versions with live events
		for _, f := range firesOf(t, st, s.ID) {
			for _, ev := range eventsOf(t, st, f.ID) {
				if ev.Status != model.EventCancelled {
					k := f.FireTime.Format("15:04")
					live[k] = append(live[k], f.ID[strings.LastIndex(f.ID, ".")+1:])
					break
				}
			}
		}
		want := map[string]string{"10:01": "v1", "10:02": "v1", "10:03": "v1", "10:04": "v2", "10:06": "v2", "10:08": "v2"}
		if len(live) != len(want) {
			t.Fatalf("live fires = %v, want %v", live, want)
		}
		for k, v := range want {
			if strings.Join(live[k], ",") != v {
				t.Fatalf("live fires = %v, want %v", live, want)
			}
		}
		// A fire that already happened under v1 is not fired again by v2.
		f, err := e.Trigger(ctx, &s2, utc("2025-06-02T10:02:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		if f.ID != model.FireID(s.ID, 1, utc("2025-06-02T10:02:00Z")) {
			t.Fatalf("trigger at a fired time returned %s", f.ID)
		}

		// Pausing (the master cancels, then the emitter skips the schedule).
		s3 := s2
		s3.State, s3.Version = model.SchedulePaused, 3
		if err := st.ScheduleUpdate(ctx, &s3, 2, childrenOf(t, &s3)); err != nil {
			t.Fatal(err)
		}
		n := len(firesOf(t, st, s.ID))
		setClock(clk, utc("2025-06-02T10:10:30Z"))
		ps := runPass(t, e)
		if ps.Skipped[emitter.SkipInactive] == 0 || len(firesOf(t, st, s.ID)) != n {
			t.Fatalf("paused schedule fired: %+v", ps)
		}
		// A child left from an older version is ignored.
		s4 := s3
		s4.State, s4.Version = model.ScheduleActive, 4
		if err := st.ScheduleUpdate(ctx, &s4, 3, nil); err != nil { // children stay at v3
			t.Fatal(err)
		}
		setClock(clk, utc("2025-06-02T10:12:30Z"))
		ps = runPass(t, e)
		if ps.Skipped[emitter.SkipStaleChild] == 0 || len(firesOf(t, st, s.ID)) != n {
			t.Fatalf("stale child fired: %+v", ps)
		}
	})

	t.Run("StartAndEnd", func(t *testing.T) {
		start, end := utc("2025-06-02T10:14:00Z"), utc("2025-06-02T10:16:00Z")
		b := sched("bounded", "* * * * *", "UTC", 1, func(s *model.Schedule) { s.StartAt, s.EndAt = &start, &end })
		create(t, st, b)
		if err := e.Saved(ctx, b, keysOf(t, b)); err != nil {
			t.Fatal(err)
		}
		for now := utc("2025-06-02T10:13:30Z"); now.Before(utc("2025-06-02T10:20:00Z")); now = now.Add(time.Minute) {
			setClock(clk, now)
			runPass(t, e)
		}
		checkFires(t, st, b.ID, "10:14 10:15 10:16")
	})

	t.Run("MatchesTheKeysItIsGiven", func(t *testing.T) {
		// The keys decide, not a second parse of Cron: keys of */2 on an
		// every-minute expression emit the even minutes only.
		setClock(clk, utc("2025-06-02T10:30:30Z"))
		k := sched("given-keys", "* * * * *", "UTC", 1)
		create(t, st, k)
		even := *k
		even.Cron = "*/2 * * * *"
		if err := e.Saved(ctx, k, keysOf(t, &even)); err != nil {
			t.Fatal(err)
		}
		checkFires(t, st, k.ID, "10:32 10:34")
	})

	t.Run("NoKeysForACronScheduleIsAnError", func(t *testing.T) {
		n := sched("no-keys", "* * * * *", "UTC", 1)
		create(t, st, n)
		if err := e.Saved(ctx, n, nil); err == nil || !strings.Contains(err.Error(), "no children keys") {
			t.Fatalf("Saved without keys: %v, want an error naming the missing keys", err)
		}
		if fs := firesOf(t, st, n.ID); len(fs) != 0 {
			t.Fatalf("fires without keys: %+v", fs)
		}
	})
}

func release(t *testing.T, st store.Driver, f *model.Fire, at time.Time) {
	t.Helper()
	var tr []store.EventTransition
	for _, ev := range eventsOf(t, st, f.ID) {
		tr = append(tr, store.EventTransition{ID: ev.ID, From: ev.Status, To: model.EventReleased, FinishedAt: &at, At: at})
	}
	if _, err := st.EventTransition(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
}

func TestOneOffAndTrigger(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	clk := newClock(utc("2025-06-02T10:00:30.700Z"))
	e := newEmitter(t, st, clk, nil)

	runAt := utc("2025-06-02T11:00:15Z").Add(500 * time.Millisecond)
	one := sched("oneoff", "", "Europe/Berlin", 2, func(s *model.Schedule) { s.RunAt = &runAt })
	create(t, st, one)
	for range 2 {
		if err := e.Saved(ctx, one, keysOf(t, one)); err != nil {
			t.Fatal(err)
		}
	}
	fs := firesOf(t, st, one.ID)
	// Never early: the fire and its events are at 11:00:15.5, not 11:00:15.
	if len(fs) != 1 || !fs[0].FireTime.Equal(utc("2025-06-02T11:00:15.5Z")) || fs[0].LocalTime != "2025-06-02T13:00:15.5+02:00" ||
		fs[0].ID != "oneoff.1748862015.500.v1" {
		t.Fatalf("one-off fires = %+v", fs)
	}
	evs := eventsOf(t, st, fs[0].ID)
	if len(evs) != 2 || !evs[0].LaunchAt.Equal(utc("2025-06-02T11:00:15.5Z")) || !evs[1].LaunchAt.Equal(utc("2025-06-02T11:00:15.5Z")) {
		t.Fatalf("one-off events = %+v", evs)
	}
	// Below a millisecond the fire rounds up, never down.
	subMS := utc("2025-06-02T11:00:16.4795Z")
	sub := sched("oneoff-sub-ms", "", "UTC", 1, func(s *model.Schedule) { s.RunAt = &subMS })
	create(t, st, sub)
	if err := e.Saved(ctx, sub, keysOf(t, sub)); err != nil {
		t.Fatal(err)
	}
	if fs := firesOf(t, st, sub.ID); len(fs) != 1 || !fs[0].FireTime.Equal(utc("2025-06-02T11:00:16.48Z")) ||
		fs[0].ID != "oneoff-sub-ms.1748862016.480.v1" {
		t.Fatalf("sub-millisecond one-off fires = %+v", fs)
	}
	// A one-off whose fire an earlier release recorded at runAt's second
	// (id without milliseconds) is not emitted again under a new id.
	oldAt := utc("2025-06-02T11:00:17.25Z")
	old := sched("oneoff-upgraded", "", "UTC", 2, func(s *model.Schedule) { s.RunAt = &oldAt })
	create(t, st, old)
	legacy := &model.Fire{ID: "oneoff-upgraded.1748862017.v1", ScheduleID: old.ID, TenantID: tenant,
		FireTime: utc("2025-06-02T11:00:17Z"), LocalTime: "2025-06-02T11:00:17Z", Count: 2, Decision: model.FireEmitted, CreatedAt: clk.Now()}
	if _, err := st.FireInsert(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if err := e.Saved(ctx, old, keysOf(t, old)); err != nil {
		t.Fatal(err)
	}
	if fs := firesOf(t, st, old.ID); len(fs) != 1 || fs[0].ID != legacy.ID {
		t.Fatalf("upgraded one-off fires = %+v", fs)
	}
	if evs := eventsOf(t, st, legacy.ID); len(evs) != 2 {
		t.Fatalf("upgraded one-off: %d events of the recorded fire, want 2 (ensured)", len(evs))
	}
	paused := sched("paused-oneoff", "", "UTC", 1, func(s *model.Schedule) { s.RunAt = &runAt; s.State = model.SchedulePaused })
	if err := e.Saved(ctx, paused, keysOf(t, paused)); err != nil || len(firesOf(t, st, paused.ID)) != 0 {
		t.Fatalf("paused one-off: err %v, fires %d", err, len(firesOf(t, st, paused.ID)))
	}

	cr := sched("manual", "0 0 1 1 *", "UTC", 3)
	create(t, st, cr)
	f, err := e.Trigger(ctx, cr, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	at := utc("2025-06-02T10:00:30Z")
	if f.Decision != model.FireTriggered || !f.FireTime.Equal(at) || len(eventsOf(t, st, f.ID)) != 3 {
		t.Fatalf("triggered fire = %+v", f)
	}
	again, err := e.Trigger(ctx, cr, clk.Now().Add(100*time.Millisecond))
	if err != nil || again.ID != f.ID || len(eventsOf(t, st, f.ID)) != 3 || len(firesOf(t, st, cr.ID)) != 1 {
		t.Fatalf("second trigger in the same second: %+v, %v", again, err)
	}
}

func TestBatchWindowSpread(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, st, clk, nil)
	at := utc("2025-06-02T10:00:00Z")
	cases := []struct {
		name   string
		window time.Duration
		spread bool
		launch []time.Duration
	}{
		{"Spread", 2 * time.Hour, true, []time.Duration{0, 30 * time.Minute, time.Hour, 90 * time.Minute}},
		{"WindowOnly", 2 * time.Hour, false, []time.Duration{0, 0, 0, 0}},
		{"NoWindow", 0, true, []time.Duration{0, 0, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sched(tc.name, "* * * * *", "UTC", 4, func(s *model.Schedule) { s.Window, s.Spread = tc.window, tc.spread })
			f, err := e.Trigger(ctx, s, at)
			if err != nil {
				t.Fatal(err)
			}
			evs := eventsOf(t, st, f.ID)
			if len(evs) != 4 {
				t.Fatalf("events = %d", len(evs))
			}
			for i, ev := range evs {
				if !ev.LaunchAt.Equal(at.Add(tc.launch[i])) {
					t.Errorf("event %d launches at %s, want %s", i, ev.LaunchAt, at.Add(tc.launch[i]))
				}
				if tc.window == 0 && ev.Deadline != nil || tc.window > 0 && (ev.Deadline == nil || !ev.Deadline.Equal(at.Add(tc.window))) {
					t.Errorf("event %d deadline %v", i, ev.Deadline)
				}
			}
		})
	}
}

// Invariant 4: the children a pass reads are those of the due keys. Ten
// times more schedules that are not due in the scanned windows (other
// minutes, hours, days, months, weekdays, timezones) must not change what a
// pass reads: if the emitter read by timezone or partition instead of by
// eligible key, the counts would differ.
func TestScanCostFollowsEligibleChildren(t *testing.T) {
	due := []struct{ expr, tz string }{
		{"1 10 * * *", "UTC"}, {"1 12 * * *", "Europe/Berlin"}, {"1 * * * *", "UTC"},
		{"1 10 2 6 *", "UTC"}, {"1 10 * * 1", "UTC"}, {"1 10 * 6 *", "UTC"},
		{"1 10 * * 1#1", "UTC"}, {"1 19 * * *", "Asia/Tokyo"}, {"1 6 * * *", "America/New_York"},
		{"1,31 10 * * *", "UTC"},
	}
	notDue := []struct{ expr, tz string }{
		{"31 10 * * *", "UTC"}, {"1 11 * * *", "UTC"}, {"1 10 3 6 *", "UTC"}, {"1 10 * * 2", "UTC"},
		{"1 10 * 7 *", "UTC"}, {"1 10 * * 1#2", "UTC"}, {"1 13 * * *", "Europe/Berlin"},
		{"1 10 * * *", "Asia/Tokyo"}, {"1 10 * * *", "America/New_York"}, {"45 * * * *", "UTC"},
		{"1 10 L * *", "UTC"}, {"1 10 1 1 *", "Europe/Berlin"},
	}
	build := func(t *testing.T, extra int) (emitter.PassStats, map[string]int) {
		st := openEmbedded(t)
		clk := newClock(utc("2025-06-02T10:00:30Z")) // a Monday
		e := newEmitter(t, st, clk, nil)
		n := 0
		for r := range 4 {
			for i, d := range due {
				create(t, st, sched(idOf("due", r, i), d.expr, d.tz, 1))
				n++
			}
		}
		for r := range extra {
			for i, d := range notDue {
				create(t, st, sched(idOf("idle", r, i), d.expr, d.tz, 1))
			}
		}
		ps := runPass(t, e)
		fires := map[string]int{}
		for r := range 4 {
			for i := range due {
				fires[idOf("due", r, i)] = len(firesOf(t, st, idOf("due", r, i)))
			}
		}
		return ps, fires
	}
	small, fSmall := build(t, 0)
	large, fLarge := build(t, 40) // 480 idle schedules vs 40 due ones
	if small.ChildrenRead != 40 {
		t.Fatalf("children read among due only = %d, want 40 (one per due schedule)", small.ChildrenRead)
	}
	if large.ChildrenRead != small.ChildrenRead {
		t.Fatalf("children read: %d among 10x idle schedules, %d without", large.ChildrenRead, small.ChildrenRead)
	}
	if large.Fires != 40 || small.Fires != 40 {
		t.Fatalf("fires: %d and %d, want 40", small.Fires, large.Fires)
	}
	for id, n := range fSmall {
		if n != 1 || fLarge[id] != 1 {
			t.Fatalf("%s fired %d / %d times", id, n, fLarge[id])
		}
	}
}

func idOf(prefix string, r, i int) string {
	return prefix + "-" + string(rune('a'+r%26)) + string(rune('a'+r/26)) + "-" + string(rune('a'+i))
}

// A large fire streams into the store in batches of BatchSize.
func TestLargeFanOutIsBatched(t *testing.T) {
	base := openEmbedded(t)
	fs := &faultyStore{Store: base}
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	e := newEmitter(t, fs, clk, func(c *emitter.Config, _ *emitter.Deps) { c.BatchSize = 500 })
	s := sched("fanout", "1 10 * * *", "UTC", 5000, func(s *model.Schedule) { s.Window, s.Spread = time.Hour, true })
	create(t, base, s, sched("small", "1 10 * * *", "UTC", 7))
	ps := runPass(t, e)
	if ps.Events != 5007 || fs.eventsWritten.Load() != 5007 {
		t.Fatalf("events = %d written %d", ps.Events, fs.eventsWritten.Load())
	}
	if m := fs.maxBatch.Load(); m != 500 {
		t.Fatalf("largest batch = %d, want 500", m)
	}
	evs := eventsOf(t, base, model.FireID(s.ID, 1, utc("2025-06-02T10:01:00Z")))
	if len(evs) != 5000 {
		t.Fatalf("stored events = %d", len(evs))
	}
	shards := map[int]int{}
	for _, ev := range evs {
		shards[ev.Shard]++
	}
	if len(shards) != 8 {
		t.Fatalf("events use %d of 8 shards", len(shards))
	}
}

func TestLostPartitionIsLeft(t *testing.T) {
	st := openEmbedded(t)
	ctx := context.Background()
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	m := newCountingMetrics()
	e := newEmitter(t, st, clk, func(_ *emitter.Config, d *emitter.Deps) {
		d.Partitions = staticPartitions{0: 1}
		d.Metrics = m
	})
	// Another instance took partition 0 with a newer fence.
	if err := st.WatermarkAdvance(ctx, model.Watermark{Partition: 0, Until: utc("2025-06-02T10:01:00Z"), Fence: 5}); err != nil {
		t.Fatal(err)
	}
	ps := runPass(t, e)
	if m.lost != 1 || ps.Windows != 1 {
		t.Fatalf("lost = %d, stats %+v", m.lost, ps)
	}
	wm, _ := st.WatermarkGet(ctx, 0)
	if !wm.Until.Equal(utc("2025-06-02T10:01:00Z")) || wm.Fence != 5 {
		t.Fatalf("watermark = %+v", wm)
	}
}

type staticPartitions map[int]int64

func (s staticPartitions) Held() map[int]int64 { return s }

func (staticPartitions) Changed() <-chan struct{} { return nil }

func TestStartStop(t *testing.T) {
	st := openEmbedded(t)
	clk := newClock(utc("2025-06-02T10:00:30Z"))
	emitted := make(chan *model.Fire, 10)
	e := newEmitter(t, st, clk, func(_ *emitter.Config, d *emitter.Deps) { d.Emitted = emitted })
	e.Stop() // before Start
	create(t, st, sched("s", "1 10 * * *", "UTC", 1))
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("not started")
	}
	select {
	case f := <-emitted:
		if f.ScheduleID != "s" {
			t.Fatalf("emitted %+v", f)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first pass did not run at start")
	}
	e.Stop()
	e.Stop()
}

// blockingStore holds the first ChildTimezones call of a pass until
// release is closed or its context ends, and reports what it saw.
type blockingStore struct {
	emitter.Store
	entered chan struct{} // closed when the pass reached the store
	release chan struct{} // closing it lets the pass go on
	ctxErr  chan error    // the pass context's error when the call returned
	once    sync.Once
}

func (b *blockingStore) ChildTimezones(ctx context.Context) ([]string, error) {
	first := false
	b.once.Do(func() { first = true })
	if !first {
		return b.Store.ChildTimezones(ctx)
	}
	close(b.entered)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	b.ctxErr <- ctx.Err()
	return b.Store.ChildTimezones(ctx)
}

func TestStopDrains(t *testing.T) {
	newBlocked := func(t *testing.T, drain time.Duration) (*emitter.Emitter, *blockingStore) {
		bs := &blockingStore{Store: openEmbedded(t), entered: make(chan struct{}), release: make(chan struct{}),
			ctxErr: make(chan error, 1)}
		e := newEmitter(t, bs, newClock(utc("2025-06-02T10:00:30Z")), func(c *emitter.Config, _ *emitter.Deps) {
			c.DrainTimeout = drain
		})
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-e.Ready()
		<-bs.entered
		return e, bs
	}

	t.Run("PassInHandFinishesBeforeTheDeadline", func(t *testing.T) {
		e, bs := newBlocked(t, time.Hour)
		stopped := make(chan struct{})
		go func() {
			e.Stop()
			close(stopped)
		}()
		<-e.Stopping()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a pass was in hand")
		default:
		}
		close(bs.release)
		if err := <-bs.ctxErr; err != nil {
			t.Fatalf("pass context ended during the drain: %v", err)
		}
		<-stopped
	})

	t.Run("PassIsCancelledAtTheDeadline", func(t *testing.T) {
		e, bs := newBlocked(t, time.Millisecond)
		e.Stop() // returns only once the pass returned
		select {
		case err := <-bs.ctxErr:
			if err == nil {
				t.Fatal("pass context not cancelled after DrainTimeout")
			}
		default:
			t.Fatal("Stop returned before the pass returned")
		}
	})
}
