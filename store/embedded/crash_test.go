package embedded_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/internal/testkit/testseed"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
	"github.com/schedulerd/schedulerd/store/storetest"
)

// The crash test checks the contract's durability promise: a write the
// driver acknowledged survives kill -9. The test binary runs itself as a
// child (TestCrashChild, enabled by crashDirEnv) that writes events,
// schedules and policy tokens from several goroutines and prints one ACK
// line per acknowledged write. The parent reads those lines, sends SIGKILL
// after a random number of them, reopens the store and checks every
// acknowledged write. Several rounds reuse the directory, so recovery of a
// store that was itself recovered is exercised too.

const (
	crashDirEnv   = "SCHEDULERD_EMBEDDED_CRASH_DIR"
	crashRoundEnv = "SCHEDULERD_EMBEDDED_CRASH_ROUND"
	crashPolicy   = "crash-policy"
)

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	rng := rand.New(rand.NewPCG(testseed.GetOrClock(t, "SCHEDULERD_CRASH_SEED"), 0))
	dir := t.TempDir()

	acked := map[string][]string{} // kind -> ids
	tokens := 0
	for round := range 3 {
		killAfter := 20 + rng.IntN(300)
		lines := runCrashChild(t, dir, round, killAfter)
		if len(lines) < killAfter {
			t.Fatalf("round %d: child acknowledged %d writes before it ended, want at least %d", round, len(lines), killAfter)
		}
		for _, l := range lines {
			kind, id, _ := strings.Cut(l, " ")
			if kind == "token" {
				tokens++
				continue
			}
			acked[kind] = append(acked[kind], id)
		}
		t.Logf("round %d: killed after %d acknowledged writes (%d read in total)", round, killAfter, len(lines))
		verifyCrashStore(t, dir, acked, tokens)
	}
}

// runCrashChild starts the child, kills it with SIGKILL once it has
// acknowledged killAfter writes, and returns every acknowledgement it printed
// (including the ones still in the pipe when it died).
func runCrashChild(t *testing.T, dir string, round, killAfter int) []string {
	t.Helper()
	// The deadline only bounds a broken child; the kill itself is triggered
	// by the acknowledgements read below.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashRoundEnv+"="+strconv.Itoa(round))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	var lines []string
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		ack, ok := strings.CutPrefix(sc.Text(), "ACK ")
		if !ok {
			continue
		}
		lines = append(lines, ack)
		if !killed && len(lines) >= killAfter {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited by itself after %d acknowledgements: %v", len(lines), err)
	}
	return lines
}

func verifyCrashStore(t *testing.T, dir string, acked map[string][]string, tokens int) {
	t.Helper()
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer func() { _ = s.Close() }()
	ctx := t.Context()

	for _, id := range acked["event"] {
		if _, err := s.EventGetByID(ctx, id); err != nil {
			t.Fatalf("acknowledged event %s lost: %v", id, err)
		}
	}
	// One-offs saved with their event in the row; the claimed ones moved
	// into groups.
	if err := embedded.CheckOneRecords(s); err != nil {
		t.Fatal(err)
	}
	for _, id := range acked["oneoff"] {
		if _, err := s.EventGetByID(ctx, id); err != nil {
			t.Fatalf("acknowledged one-off's event %s lost: %v", id, err)
		}
	}
	for _, id := range acked["claimed"] {
		if e, err := s.EventGetByID(ctx, id); err != nil || e.Status != model.EventScheduled {
			t.Fatalf("acknowledged claim of %s lost: %+v, %v", id, e, err)
		}
	}
	for _, id := range acked["schedule"] {
		sc, err := s.ScheduleGet(ctx, "crash-tenant", id)
		if err != nil {
			t.Fatalf("acknowledged schedule %s lost: %v", id, err)
		}
		children, err := s.ChildrenFind(ctx, &store.ChildrenFindParams{Partition: sc.Partition, Timezone: sc.Timezone,
			Keys: []model.ChildKey{{LaunchExpression: "H:3", Minute: 0}}})
		if err != nil {
			t.Fatalf("ChildrenFind: %v", err)
		}
		found := false
		for _, c := range children {
			found = found || c.ScheduleID == id
		}
		if !found {
			t.Fatalf("children of acknowledged schedule %s lost", id)
		}
	}
	p, err := s.PolicyGetByID(ctx, crashPolicy)
	if err != nil {
		t.Fatalf("policy lost: %v", err)
	}
	// A token acquired but not yet printed when the child died is also in
	// InUse, so InUse may exceed the acknowledged count, never fall short.
	if p.InUse < tokens {
		t.Fatalf("policy InUse %d, but %d token acquisitions were acknowledged", p.InUse, tokens)
	}
	t.Logf("verified %d events, %d schedules, %d one-offs (%d claimed), %d tokens (InUse %d)", len(acked["event"]), len(acked["schedule"]),
		len(acked["oneoff"]), len(acked["claimed"]), tokens, p.InUse)
}

// TestCrashChild is the child process of TestCrashRecovery. It writes until
// it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestCrashRecovery")
	}
	round := os.Getenv(crashRoundEnv)
	s, err := embedded.Open(dir, embedded.Options{LockTimeout: -1})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ctx := context.Background()
	p := &model.Policy{ID: crashPolicy, TenantID: "crash-tenant", Name: "crash", MaxInFlight: 1 << 30, Version: 1}
	if err := s.PolicyCreate(ctx, p); err != nil && !errors.Is(err, model.ErrConflict) {
		t.Fatalf("policy: %v", err)
	}

	var mu sync.Mutex
	ack := func(kind, id string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("ACK %s %s\n", kind, id)
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "crash child: %v\n", err)
		os.Exit(2)
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	wg.Go(func() { // events in batches, as the emitter writes them
		for b := 0; ; b++ {
			fire := base.Add(time.Duration(b) * time.Minute)
			fireID := model.FireID("crash-r"+round, 1, fire)
			var events []*model.Event
			for i := range 20 {
				events = append(events, &model.Event{ID: model.EventID(fireID, i), TenantID: "crash-tenant",
					ScheduleID: "crash-r" + round, FireID: fireID, FireTime: fire, Index: i, Count: 20,
					LaunchAt: fire, Status: model.EventPending, Shard: i % 4, PolicyID: crashPolicy})
			}
			if _, err := s.EventInsertMany(ctx, events); err != nil {
				fail(err)
			}
			for _, e := range events {
				ack("event", e.ID)
			}
		}
	})
	wg.Go(func() { // schedules with children
		for i := 0; ; i++ {
			sc := &model.Schedule{ID: fmt.Sprintf("crash-r%s-s%d", round, i), TenantID: "crash-tenant", Cron: "0 3 * * *",
				Timezone: "UTC", EventCount: 1, State: model.ScheduleActive, Version: 1, Partition: i % 2}
			child := model.Child{ScheduleID: sc.ID, TenantID: sc.TenantID, ScheduleVersion: 1, Partition: sc.Partition,
				Timezone: sc.Timezone, LaunchExpression: "H:3", Minute: 0}
			if err := storetest.CreateSchedule(ctx, s, sc, []model.Child{child}); err != nil {
				fail(err)
			}
			ack("schedule", sc.ID)
		}
	})
	wg.Go(func() { // one-offs saved with their fire and event, then claimed
		fence, _ := strconv.Atoi(round)
		for b := 0; ; b++ {
			var items []store.ScheduleNew
			for i := range 10 {
				id := fmt.Sprintf("crash-r%s-o%d-%d", round, b, i)
				runAt := base.Add(time.Duration(b*10+i) * time.Second)
				sc := &model.Schedule{ID: id, TenantID: "crash-tenant", RunAt: &runAt, Timezone: "UTC", EventCount: 1,
					Target: model.Target{Type: model.TargetHTTP, URL: "https://c.example.com/"}, MaxAttempts: 3,
					State: model.ScheduleActive, Version: 1, CreatedAt: base, UpdatedAt: base}
				f := &model.Fire{ID: model.FireID(id, 1, runAt), ScheduleID: id, TenantID: sc.TenantID, FireTime: runAt,
					LocalTime: runAt.Format(time.RFC3339), Count: 1, Decision: model.FireEmitted, CreatedAt: base}
				e := &model.Event{ID: model.EventID(f.ID, 0), TenantID: sc.TenantID, ScheduleID: id, FireID: f.ID, FireTime: runAt,
					Count: 1, LaunchAt: runAt, Target: sc.Target, MaxAttempts: 3, Shard: 7, Status: model.EventPending,
					CreatedAt: base, UpdatedAt: base}
				items = append(items, store.ScheduleNew{Schedule: sc, Fires: []store.FireNew{{Fire: f, Events: []*model.Event{e}}}})
			}
			if _, err := s.ScheduleCreateMany(ctx, items); err != nil {
				fail(err)
			}
			for _, it := range items {
				ack("oneoff", it.Fires[0].Events[0].ID)
			}
			if b%2 == 1 {
				claimed, err := s.EventClaimDue(ctx, &store.EventClaimParams{Shard: 7, Fence: int64(fence + 1), DueBefore: base.Add(time.Duration(b*10) * time.Second), Limit: 7})
				if err != nil {
					fail(err)
				}
				for _, e := range claimed {
					ack("claimed", e.ID)
				}
			}
		}
	})
	for range 2 {
		wg.Go(func() { // policy tokens: concurrent compare-and-set writes
			for {
				n, err := s.PolicyAcquireTokens(ctx, crashPolicy, 1)
				if err != nil || n != 1 {
					fail(fmt.Errorf("acquire: %d, %v", n, err))
				}
				ack("token", "1")
			}
		})
	}
	wg.Wait()
}
