package master_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// bodyOperation is an operation of the spec that takes a JSON body, with
// the key that may call it.
type bodyOperation struct {
	method, path string // path with its parameters filled in
	key          string // "": none (release, extend)
}

// tenantKey creates a tenant and returns its API key.
func (h *harness) tenantKey(name string) string {
	h.t.Helper()
	tr, err := h.admin.CreateTenantWithResponse(h.ctx, nil, client.TenantCreate{Name: name})
	mustStatus(h.t, err, tr.StatusCode(), tr.Body, http.StatusCreated)
	kr, err := h.admin.CreateAPIKeyWithResponse(h.ctx, tr.JSON201.Id, nil)
	mustStatus(h.t, err, kr.StatusCode(), kr.Body, http.StatusCreated)
	return kr.JSON201.Key
}

// bodyOperations lists every operation of the spec with a request body.
func bodyOperations(t *testing.T, tenantKey string) []bodyOperation {
	t.Helper()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	var out []bodyOperation
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			o := bodyOperation{method: method, path: param.ReplaceAllString(path, "x_1"), key: tenantKey}
			switch {
			case op.Security != nil && len(*op.Security) == 0:
				o.key = ""
			case slices.Contains(op.Tags, "admin"):
				o.key = testAdminKey
			}
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b bodyOperation) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	if len(out) < 10 {
		t.Fatalf("only %d operations with a body in the spec", len(out))
	}
	return out
}

// do sends body (sent chunked, without Content-Length, when chunked) to o.
func (o bodyOperation) do(t *testing.T, h *harness, body string, chunked bool) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length from http.NewRequest
	}
	req, err := http.NewRequestWithContext(h.ctx, o.method, h.url+o.path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	return h.send(h.client(""), req)
}

// depthReason is the start of the reason of the refusal of a deep body.
const depthReason = "objects and arrays nest deeper than 64 levels"

// nest wraps inner in levels of open and close.
func nest(open, close string, levels int, inner string) string {
	return strings.Repeat(open, levels) + inner + strings.Repeat(close, levels)
}

// TestDeepBodiesAreRefused: on every operation that takes a JSON body, with
// or without a key, a body nesting deeper than 64 levels is answered 400
// naming the body by the depth check, before anything decodes it (no other
// answer names the depth), whether it is small or fills the body limit
// (1 MiB; 16 KiB without a key), declared or chunked. Decoding such a body cost CPU time quadratic in its
// depth.
func TestDeepBodiesAreRefused(t *testing.T) {
	h := newHarness(t)
	for _, o := range bodyOperations(t, h.tenantKey("deep")) {
		t.Run(o.method+" "+o.path, func(t *testing.T) {
			limit := master.DefaultMaxBodyBytes
			if o.key == "" {
				limit = 16 << 10 // operations without a key
			}
			objects := nest(`{"a":`, `}`, (limit-64)/6, `1`) // just under the limit
			if len(objects) >= limit || len(objects) < limit-256 {
				t.Fatalf("a body of %d bytes", len(objects))
			}
			bodies := []struct {
				name    string
				body    string
				chunked bool
			}{
				{"ObjectsOverTheLimit", nest(`{"a":`, `}`, 65, `1`), false},
				{"MixedOverTheLimit", `{"name":"n","payload":` + nest(`[{"a":`, `}]`, 32, `1`) + `}`, false},
				{"FullBodyOfObjects", objects, false},
				{"FullBodyOfObjectsChunked", objects, true},
				{"FullBodyOfArrays", nest(`[`, `]`, (limit-64)/2, ``), false},
			}
			for _, b := range bodies {
				resp, body := o.do(t, h, b.body, b.chunked)
				p := wantProblem(t, nil, resp, body, http.StatusBadRequest, "body")
				if !strings.HasPrefix(reasonOf(p, "body"), depthReason) {
					t.Fatalf("%s: answered %s, not by the depth check", b.name, body)
				}
			}
			// At the limit the body goes on to the other checks.
			resp, body := o.do(t, h, nest(`{"a":`, `}`, 64, `1`), false)
			if resp.StatusCode/100 != 4 || strings.Contains(string(body), depthReason) {
				t.Fatalf("a body of 64 levels answered %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestDeepPayloadAtTheLimit: a schedule whose payload brings the body to 64
// levels is created; one more level is refused and nothing is stored.
func TestDeepPayloadAtTheLimit(t *testing.T) {
	h := newHarness(t)
	tid, c := h.tenant("payloads")
	create := func(levels int) (*client.CreateScheduleResponse, error) {
		body := `{"name":"deep","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":` +
			nest(`[`, `]`, levels, `"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["`) + `}`
		return c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", strings.NewReader(body))
	}
	r, err := create(63) // with the body's object: 64
	mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
	r, err = create(64)
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "body")
	wantReason(t, p, "body", depthReason)
	if list, err := h.st.ScheduleList(h.ctx, &storeListParams{TenantID: tid, Limit: 10}); err != nil || len(list) != 1 {
		t.Fatalf("%d schedules stored (%v), want the one created", len(list), err)
	}
}

// TestBodiesOverTheSizeLimit: on every operation with a body, one over the
// limit is answered 413 naming the body, declared or chunked; the limit of
// the operations without a key (release, extend) is 16 KiB.
func TestBodiesOverTheSizeLimit(t *testing.T) {
	h := newHarness(t)
	for _, o := range bodyOperations(t, h.tenantKey("big")) {
		t.Run(o.method+" "+o.path, func(t *testing.T) {
			limit := master.DefaultMaxBodyBytes
			switch {
			case o.path == "/v1/schedules/batch":
				limit = master.DefaultMaxBatchBodyBytes
			case o.key == "":
				limit = 16 << 10 // operations without a key
			}
			big := `{"a":"` + strings.Repeat("x", limit) + `"}`
			for _, chunked := range []bool{false, true} {
				resp, body := o.do(t, h, big, chunked)
				wantProblem(t, nil, resp, body, http.StatusRequestEntityTooLarge, "body")
			}
		})
	}
}

// TestPublicBodyLimit: release and extend take bodies up to 16 KiB, more
// than their longest valid body.
func TestPublicBodyLimit(t *testing.T) {
	h := newHarness(t)
	for _, op := range []string{"release", "extend"} {
		t.Run(op, func(t *testing.T) {
			o := bodyOperation{method: http.MethodPost, path: "/v1/events/ev_1/" + op}
			escaped := strings.Repeat(`\u0041`, 512) // the longest token, each character escaped
			resp, body := o.do(t, h, `{"token":"`+escaped+`"`+strings.Repeat(" ", 16<<10-len(escaped)-12)+`}`, false)
			mustStatus(t, nil, resp.StatusCode, body, http.StatusNotFound) // read and checked: no such event
			resp, body = o.do(t, h, `{"token":"`+escaped+`"`+strings.Repeat(" ", 16<<10-len(escaped)-11)+`}`, false)
			wantProblem(t, nil, resp, body, http.StatusRequestEntityTooLarge, "body")
		})
	}
}

// heldCreates is a store whose first ScheduleCreateMany signals entered
// and waits for release.
type heldCreates struct {
	*embedded.Store
	first            atomic.Bool
	entered, release chan struct{}
}

func (h *heldCreates) ScheduleCreateMany(ctx context.Context, items []store.ScheduleNew) ([]error, error) {
	if h.first.CompareAndSwap(false, true) {
		close(h.entered)
		<-h.release
	}
	return h.Store.ScheduleCreateMany(ctx, items)
}

// TestBatchBodiesShareABudget: a batch whose body would take the batch
// memory past BatchBodyBudget waits for room and, given none within
// BatchBodyWait, answers 503 with Retry-After; once the batch holding the
// room is answered, the next one is served.
func TestBatchBodiesShareABudget(t *testing.T) {
	held := &heldCreates{entered: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, func(c *master.Config, d *master.Deps) {
		c.MaxBatchBodyBytes, c.BatchBodyBudget = 1<<20, 1<<20
		c.BatchBodyWait = 50 * time.Millisecond
		held.Store = d.Store.(*embedded.Store)
		d.Store = held
	})
	t.Cleanup(func() {
		select {
		case <-held.release:
		default:
			close(held.release) // before the server closes
		}
	})
	key := h.tenantKey("acme")
	item := `{"name":"a","runAt":"2030-01-02T03:04:05Z","target":{"type":"http","url":"https://consumer.example.com/hook"}}`
	body := `{"items":[` + item + `]}`
	post := func() (int, string, error) {
		req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url+"/v1/schedules/batch", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Retry-After") + " " + string(b), nil
	}

	// The first batch takes the whole budget (it counts at least
	// MaxBodyBytes) and holds it while its write is held.
	type answer struct {
		status int
		text   string
		err    error
	}
	first := make(chan answer, 1)
	go func() {
		st, text, err := post()
		first <- answer{st, text, err}
	}()
	<-held.entered
	if st, text, err := post(); err != nil || st != http.StatusServiceUnavailable || strings.HasPrefix(text, " ") {
		t.Fatalf("a batch over the budget: %d %s %v; want 503 with Retry-After", st, text, err)
	}
	close(held.release)
	if a := <-first; a.err != nil || a.status != http.StatusOK {
		t.Fatalf("the batch holding the budget: %d %s %v", a.status, a.text, a.err)
	}
	if st, text, err := post(); err != nil || st != http.StatusOK {
		t.Fatalf("a batch after the budget was given back: %d %s %v", st, text, err)
	}
}
