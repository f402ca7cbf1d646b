package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCreateFlags checks that the body flags of policies create and
// schedules create reach the API's fields.
func TestCreateFlags(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }

	rated := decode[struct {
		RatePerSecond    float64 `json:"ratePerSecond"`
		Burst            int     `json:"burst"`
		ConcurrencyKey   string  `json:"concurrencyKey"`
		MaxInFlight      int     `json:"maxInFlight"`
		MaxInFlightTotal int     `json:"maxInFlightTotal"`
	}](t, tk("policies", "create", "--name", "rated", "--max-in-flight", "2", "--rate-per-second", "5.5", "--burst", "10",
		"--concurrency-key", "/customerId", "--max-in-flight-total", "8", "--json").ok(t))
	if rated.RatePerSecond != 5.5 || rated.Burst != 10 || rated.ConcurrencyKey != "/customerId" || rated.MaxInFlight != 2 || rated.MaxInFlightTotal != 8 {
		t.Fatalf("policies create: %+v", rated)
	}
	tk("policies", "create", "--name", "adaptive", "--max-in-flight", "4", "--adaptive-min", "1").ok(t).has(t, `(?m)^adaptive 1 to 4, now \d+$`)
	tk("policies", "create", "--name", "bad", "--max-in-flight", "2", "--burst", "3").fails(t, exitFail, `burst: `)

	sched := decode[struct {
		Priority int    `json:"priority"`
		Window   string `json:"window"`
		Spread   bool   `json:"spread"`
		Overlap  string `json:"overlap"`
		Misfire  string `json:"misfire"`
		StartAt  string `json:"startAt"`
		EndAt    string `json:"endAt"`
	}](t, tk("schedules", "create", "--name", "spread", "--cron", "0 3 * * *", "--target", s.consumer, "--priority", "3",
		"--window", "1h", "--spread", "--overlap", "skip", "--misfire", "fire_all",
		"--start-at", "2099-01-01T00:00:00Z", "--end-at", "2099-12-31T00:00:00Z", "--json").ok(t))
	if sched.Priority != 3 || sched.Window != "1h0m0s" || !sched.Spread || sched.Overlap != "skip" || sched.Misfire != "fire_all" ||
		sched.StartAt != "2099-01-01T00:00:00Z" || sched.EndAt != "2099-12-31T00:00:00Z" {
		t.Fatalf("schedules create: %+v", sched)
	}
	tk("schedules", "create", "--name", "x", "--cron", "0 3 * * *", "--target", s.consumer, "--overlap", "sometimes").fails(t, exitFail, `overlap`)

	up := decode[idOnly](t, tk("schedules", "create", "--name", "up", "--cron", "0 3 * * *", "--target", s.consumer,
		"--notify", "fire.finished,fire.has_dead=https://ops.example.com/hook",
		"--notify", "event.dead=sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/alerts", "--json").ok(t)).ID
	tk("schedules", "get", up).ok(t).has(t, `(?m)^notify\s+fire.finished,fire.has_dead=https://ops.example.com/hook$`).
		has(t, `(?m)^\s+event.dead=sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/alerts$`)
	down := decode[struct {
		After struct {
			ScheduleID string `json:"scheduleId"`
			When       string `json:"when"`
		} `json:"after"`
	}](t, tk("schedules", "create", "--name", "down", "--after", up, "--after-when", "succeeded", "--target", s.consumer, "--json").ok(t))
	if down.After.ScheduleID != up || down.After.When != "succeeded" {
		t.Fatalf("schedules create --after: %+v", down)
	}
	tk("schedules", "create", "--name", "x", "--after", "sch_nope", "--target", s.consumer).fails(t, exitFail, `after.scheduleId`)
	tk("schedules", "create", "--name", "x", "--cron", "0 3 * * *", "--target", s.consumer, "--notify", "https://ops.example.com/").fails(t, exitUsage, `KINDS=ADDRESS`)
	tk("schedules", "create", "--file", "x.json", "--priority", "1").fails(t, exitUsage, `--file and --priority`)
}

// TestEventsLastErrorShowsTheCause checks that the LAST ERROR column of
// events ls shows why the delivery failed, not the event's id.
func TestEventsLastErrorShowsTheCause(t *testing.T) {
	s := startServer(t)
	key := tenantKey(t, s)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "the consumer's database is down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	tk := func(args ...string) result { return cli(t, s.url, key, args...) }
	sched := decode[idOnly](t, tk("schedules", "create", "--name", "failing", "--cron", "0 3 * * *",
		"--target", failing.URL+"/hook", "--max-attempts", "1", "--json").ok(t)).ID
	tk("schedules", "trigger", sched).ok(t)

	// The event is dead after its one attempt; the store says when.
	deadline := time.Now().Add(30 * time.Second)
	var r result
	for {
		r = tk("events", "ls", "--schedule", sched, "--status", "dead")
		if strings.Contains(r.ok(t).out, " dead ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead event after 30s:\n%s", r.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.has(t, `(?m)^\S+\s+dead\s+`+sched+`\s+\S+\s+\S+\s+1\s+status 500: the consumer's database is down$`)
	id := strings.Fields(strings.Split(r.out, "\n")[1])[0]
	if n := strings.Count(r.out, id); n != 1 {
		t.Fatalf("the row names the event %d times:\n%s", n, r.out)
	}
	// events get shows the whole error.
	tk("events", "get", id).ok(t).has(t, `(?m)^last error\s+.*event `+regexp.QuoteMeta(id)+`: POST \S+/hook: status 500: the consumer's database is down$`)
}
