package ui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/schedulerd/schedulerd/ui"
)

// fakeAPI answers the operations the console uses with the agreed shapes
// of the operator API additions (GET /v1/tenants, POST /v1/events/redrive,
// POST /v1/fires/{id}/cancel, GET /v1/summary), so that the console's
// controls for them are exercised before the server has them. It records
// the calls that change something.
type fakeAPI struct {
	mu    sync.Mutex
	calls []string
}

const (
	fakeAdmin  = "admin-key-for-the-fake"
	fakeTenant = "sk_fake_tenant_key"
)

func (f *fakeAPI) record(r *http.Request, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key")+" "+body)
}

func (f *fakeAPI) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/openapi.yaml" {
		io.WriteString(w, "paths:\n  /v1/tenants:\n    post: {}\n    get: {}\n  /v1/events/redrive:\n    post: {}\n"+
			"  /v1/fires/{id}/cancel:\n    post: {}\n  /v1/summary:\n    get: {}\n")
		return
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	admin := strings.HasPrefix(r.URL.Path, "/v1/tenants")
	if (admin && key != fakeAdmin) || (!admin && key != fakeTenant) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"status":403,"title":"Forbidden"}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	schedule := `{"id":"sch_1","name":"nightly","cron":"0 3 * * *","timezone":"UTC","eventCount":4,"spread":false,"priority":0,` +
		`"overlap":"skip","target":{"type":"http","url":"https://example.com/hook"},"maxAttempts":1,"misfire":"fire_once",` +
		`"state":"active","version":1,"children":1,"nextFireTimes":["2030-01-01T03:00:00Z"],"createdAt":"2029-01-01T00:00:00Z","updatedAt":"2029-01-01T00:00:00Z"}`
	fire := func(waiting, cancelled int) string {
		return `{"id":"sch_1.1.v1","scheduleId":"sch_1","fireTime":"2029-06-01T03:00:00Z","localTime":"2029-06-01T03:00:00Z","n":4,` +
			`"decision":"skipped_overlap","note":"the previous fire had not drained","createdAt":"2029-06-01T03:00:00Z",` +
			`"counts":{"waiting":` + itoa(waiting) + `,"inFlight":0,"delivered":0,"released":2,"retrying":0,"dead":0,"cancelled":` + itoa(cancelled) + `}}`
	}
	event := func(i string) string {
		return `{"id":"sch_1.1.v1.` + i + `","scheduleId":"sch_1","fireId":"sch_1.1.v1","fireTime":"2029-06-01T03:00:00Z","index":` + i +
			`,"count":4,"launchAt":"2029-06-01T03:00:00Z","priority":0,"target":{"type":"http","url":"https://example.com/hook"},` +
			`"maxAttempts":1,"status":"dead","attempts":1,"lastError":"HTTP 500","createdAt":"2029-06-01T03:00:00Z","updatedAt":"2029-06-01T03:00:00Z"}`
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/tenants":
		io.WriteString(w, `{"items":[{"id":"ten_a","name":"acme"},{"id":"ten_b","name":"globex"}]}`)
	case "POST /v1/tenants/ten_b/keys":
		f.record(r, "")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"key_1","key":"`+fakeTenant+`","prefix":"sk_fake","tenantId":"ten_b"}`)
	case "GET /v1/schedules":
		io.WriteString(w, `{"items":[`+schedule+`]}`)
	case "GET /v1/schedules/sch_1":
		io.WriteString(w, schedule)
	case "GET /v1/policies":
		io.WriteString(w, `{"items":[]}`)
	case "GET /v1/schedules/sch_1/fires":
		if len(f.recorded()) > 0 && strings.Contains(strings.Join(f.recorded(), "\n"), "/cancel") {
			io.WriteString(w, `{"items":[`+fire(0, 2)+`]}`)
		} else {
			io.WriteString(w, `{"items":[`+fire(2, 0)+`]}`)
		}
	case "POST /v1/fires/sch_1.1.v1/cancel":
		f.record(r, string(body))
		io.WriteString(w, fire(0, 2))
	case "GET /v1/events":
		io.WriteString(w, `{"items":[`+event("0")+`,`+event("1")+`]}`)
	case "POST /v1/events/redrive":
		f.record(r, string(body))
		io.WriteString(w, `{"count":2}`)
	case "GET /v1/summary":
		io.WriteString(w, `{"counts":{"waiting":1,"inFlight":2,"delivered":3,"released":40,"retrying":0,"dead":2,"cancelled":0},`+
			`"policies":[],"lateness":{"p50":0.25,"p90":1.5,"p99":12,"sampled":45},"schedules":{"active":7,"paused":1},"generatedAt":"2029-06-01T03:00:00Z"}`)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"status":404,"title":"Not Found"}`)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestConsoleWithAgreedShapes drives the controls of the operator API
// additions against a fake server that answers with their agreed shapes:
// the admin's tenant switcher, a fire's cancel, the redrive by filter and
// the health page's summary.
func TestConsoleWithAgreedShapes(t *testing.T) {
	chromePath(t)
	fake := &fakeAPI{}
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", ui.Handler()))
	mux.Handle("/", fake)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b := newBrowser(t, t.Context())

	b.run(t, "sign in as admin and switch to a tenant",
		chromedp.Navigate(srv.URL+"/ui/"),
		chromedp.SendKeys(`input[type=password]`, fakeAdmin+kb.Enter),
		setValue(`#tenant-switch`, "ten_b"),
		chromedp.WaitVisible(`#schedule-rows tr[data-id="sch_1"]`))
	checkLabels(t, b, "schedules as admin")

	b.run(t, "cancel a fire's waiting events",
		chromedp.Navigate(srv.URL+"/ui/#/fires/sch_1"),
		chromedp.WaitVisible(`button[data-cancel="sch_1.1.v1"]`),
		chromedp.Click(`button[data-cancel="sch_1.1.v1"]`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(`#fire-rows tr[data-cancelled="2"]`))

	b.run(t, "redrive by filter",
		chromedp.Navigate(srv.URL+"/ui/#/events?status=dead&scheduleId=sch_1"),
		chromedp.WaitVisible(`#event-rows tr[data-status="dead"]`),
		chromedp.Click(`#redrive-matching`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(`//p[text()="Redriven: 2"]`))

	b.run(t, "health from the summary",
		chromedp.Navigate(srv.URL+"/ui/#/health"),
		chromedp.WaitVisible(`//div[@id="lateness"][text()="0.25 s / 1.50 s / 12 s"]`))

	want := []string{
		"POST /v1/tenants/ten_b/keys console-ten_b-",
		"POST /v1/fires/sch_1.1.v1/cancel",
		`POST /v1/events/redrive  {"scheduleId":"sch_1"}`,
	}
	got := fake.recorded()
	if len(got) != len(want) {
		t.Fatalf("calls %q, want %d like %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("call %d: %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}
