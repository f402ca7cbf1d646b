package master_test

import (
	"bytes"
	"github.com/jonboulle/clockwork"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
)

// TestBodyScan: what encoding/json would accept silently is a 400 naming the
// problem, and nothing is stored.
func TestBodyScan(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	for name, tc := range map[string]struct {
		body, field, reason string
	}{
		"TrailingWord":     {`{"name":"p1","maxInFlight":1} xyz`, "body", "data after the JSON value"},
		"TrailingValue":    {`{"name":"p1","maxInFlight":1}{"name":"p2","maxInFlight":1}`, "body", "data after the JSON value"},
		"DuplicateKey":     {`{"name":"a","name":"b","maxInFlight":1}`, "name", `duplicate key "name"`},
		"InvalidUTF8":      {"{\"name\":\"a\xff\xfeb\",\"maxInFlight\":1}", "name", "not valid UTF-8"},
		"NUL":              {`{"name":"a\u0000b","maxInFlight":1}`, "name", "contains U+0000 (NUL)"},
		"InvalidUTF8InKey": {"{\"n\xffame\":\"a\",\"maxInFlight\":1}", "n\ufffdame", "not valid UTF-8"},
		// encoding/json matches keys case-insensitively: "Name" would win.
		"CaseVariantKey": {`{"name":"a","Name":"b","maxInFlight":1}`, "Name", "unknown field"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := c.CreatePolicyWithBodyWithResponse(h.ctx, nil, "application/json", bytes.NewReader([]byte(tc.body)))
			p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, tc.field)
			if got := reasonOf(p, tc.field); got != tc.reason {
				t.Fatalf("reason %q, want %q", got, tc.reason)
			}
		})
	}
	t.Run("NestedDuplicateKey", func(t *testing.T) {
		body := `{"name":"s","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example.com/x","url":"https://b.example.com/x"}}`
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", bytes.NewReader([]byte(body)))
		p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "target.url")
		if got := reasonOf(p, "target.url"); got != `duplicate key "url"` {
			t.Fatalf("reason %q", got)
		}
	})
	t.Run("NULInArrayElement", func(t *testing.T) {
		body := `{"name":"s","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example.com/x"},"payload":{"tags":["ok","b\u0000d"]}}`
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", bytes.NewReader([]byte(body)))
		wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "payload.tags.1")
	})
	t.Run("SameKeyInSiblingObjectsIsFine", func(t *testing.T) {
		body := `{"name":"s","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example.com/x"},"payload":{"a":{"k":1},"b":{"k":2}}}`
		r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", bytes.NewReader([]byte(body)))
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusCreated)
	})
	t.Run("NothingStored", func(t *testing.T) {
		r, err := c.ListPoliciesWithResponse(h.ctx)
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
		if n := len(r.JSON200.Items); n != 0 {
			t.Fatalf("%d policies stored from rejected bodies", n)
		}
	})
}

// TestUnknownQueryParameter: a misspelt filter is a 400 naming it instead of
// an unfiltered answer.
func TestUnknownQueryParameter(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	for _, path := range []string{"/v1/events?schedule=sch_x", "/v1/schedules?limit=5&sate=active", "/v1/policies?cursor=x"} {
		req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
		resp, body := h.send(c, req)
		field := map[string]string{"/v1/events?schedule=sch_x": "schedule", "/v1/schedules?limit=5&sate=active": "sate", "/v1/policies?cursor=x": "cursor"}[path]
		wantProblem(t, nil, resp, body, http.StatusBadRequest, field)
	}
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/events?scheduleId=sch_x", nil)
	resp, body := h.send(c, req)
	mustStatus(t, nil, resp.StatusCode, body, http.StatusOK)
}

// TestPathIDs: an empty or over-long path id is a 400 naming id, as
// openapi.yaml lists, on authenticated and token-authorised operations.
func TestPathIDs(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/v1/schedules//pause"},
		{http.MethodGet, "/v1/schedules/" + strings.Repeat("x", 201)},
		{http.MethodPost, "/v1/events//release"},
	} {
		req, _ := http.NewRequest(tc.method, h.url+tc.path, strings.NewReader(`{"token":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, body := h.send(c, req)
		wantProblem(t, nil, resp, body, http.StatusBadRequest, "id")
	}
}

// TestMalformedCursor: every list operation answers 400 naming cursor to a
// cursor it did not hand out, including base64url text that decodes.
func TestMalformedCursor(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	s := h.cronSchedule(c, "s")
	for _, cur := range []string{"zzz", "YWJj", "%%%"} {
		r1, err := c.ListSchedulesWithResponse(h.ctx, &client.ListSchedulesParams{Cursor: ptr(cur)})
		wantProblem(t, err, r1.HTTPResponse, r1.Body, http.StatusBadRequest, "cursor")
		r2, err := c.ListEventsWithResponse(h.ctx, &client.ListEventsParams{Cursor: ptr(cur)})
		wantProblem(t, err, r2.HTTPResponse, r2.Body, http.StatusBadRequest, "cursor")
		r3, err := c.ListScheduleFiresWithResponse(h.ctx, s.Id, &client.ListScheduleFiresParams{Cursor: ptr(cur)})
		wantProblem(t, err, r3.HTTPResponse, r3.Body, http.StatusBadRequest, "cursor")
	}
}

// TestPolicyNameTaken: a duplicate name is a 409 naming name, not the
// "changed meanwhile" answer of a lost compare-and-set.
func TestPolicyNameTaken(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	first := h.policy(c, "gpu", 1)
	r, err := c.CreatePolicyWithResponse(h.ctx, nil, client.PolicyCreate{Name: "gpu", MaxInFlight: 2})
	p := wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusConflict, "name")
	if got := reasonOf(p, "name"); got != `a policy named "gpu" already exists: `+first.Id {
		t.Fatalf("reason %q", got)
	}
	other := h.policy(c, "cpu", 1)
	u, err := c.UpdatePolicyWithResponse(h.ctx, other.Id, client.PolicyUpdate{Name: ptr("gpu")})
	wantProblem(t, err, u.HTTPResponse, u.Body, http.StatusConflict, "name")
	// Another tenant may use the name.
	_, c2 := h.tenant("other")
	h.policy(c2, "gpu", 1)
}

// TestBadKeysAnswerAlike: a revoked key and an unknown key get the same 401.
func TestBadKeysAnswerAlike(t *testing.T) {
	h := newHarness(t)
	tid, _ := h.tenant("acme")
	kr, err := h.admin.CreateAPIKeyWithResponse(h.ctx, tid, nil)
	mustStatus(t, err, kr.StatusCode(), kr.Body, http.StatusCreated)
	rv, err := h.admin.RevokeAPIKeyWithResponse(h.ctx, tid, kr.JSON201.Id)
	mustStatus(t, err, rv.StatusCode(), rv.Body, http.StatusNoContent)

	revoked, err := h.client(kr.JSON201.Key).ListPoliciesWithResponse(h.ctx)
	wantProblem(t, err, revoked.HTTPResponse, revoked.Body, http.StatusUnauthorized, "")
	unknown, err := h.client("sk_" + kr.JSON201.Key[3:len(kr.JSON201.Key)-2] + "xx").ListPoliciesWithResponse(h.ctx)
	wantProblem(t, err, unknown.HTTPResponse, unknown.Body, http.StatusUnauthorized, "")
	if !bytes.Equal(revoked.Body, unknown.Body) {
		t.Fatalf("bodies differ:\nrevoked %s\nunknown %s", revoked.Body, unknown.Body)
	}
	for _, hd := range []string{"WWW-Authenticate", "Content-Type"} {
		if a, b := revoked.HTTPResponse.Header.Get(hd), unknown.HTTPResponse.Header.Get(hd); a != b {
			t.Fatalf("%s differs: %q vs %q", hd, a, b)
		}
	}
}

// TestWrongTokensLimited: past Max wrong release or extend tokens in a
// window from one address, or aimed at one event from any addresses, a
// wrong token answers 429 with Retry-After until the window ends; a correct
// token is served all along.
func TestWrongTokensLimited(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, func(c *master.Config, d *master.Deps) {
		c.WrongTokens = master.WrongTokens{Max: 3, Window: time.Minute}
		d.Clock = clock
	})
	tid, c := h.tenant("acme")
	s := h.cronSchedule(c, "s")
	// from is an anonymous client whose requests come from 127.0.0.n.
	from := func(t *testing.T, n byte) *client.ClientWithResponses {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, n)}}
		tr := &http.Transport{DialContext: d.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		cl, err := client.NewClientWithResponses(h.url, client.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	wrong := func(t *testing.T, cl *client.ClientWithResponses, id string, i int, want int) {
		t.Helper()
		var r *http.Response
		var body []byte
		if i%2 == 0 {
			rr, err := cl.ReleaseEventWithResponse(h.ctx, id, client.ReleaseRequest{Token: "wrong-" + strconv.Itoa(i)})
			if err != nil {
				t.Fatal(err)
			}
			r, body = rr.HTTPResponse, rr.Body
		} else {
			rr, err := cl.ExtendEventWithResponse(h.ctx, id, client.ExtendRequest{Token: "wrong-" + strconv.Itoa(i)})
			if err != nil {
				t.Fatal(err)
			}
			r, body = rr.HTTPResponse, rr.Body
		}
		wantProblem(t, nil, r, body, want, "")
		if want == http.StatusTooManyRequests {
			if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 || ra > 60 {
				t.Fatalf("Retry-After %q, want 1..60", r.Header.Get("Retry-After"))
			}
		}
	}
	release := func(t *testing.T, cl *client.ClientWithResponses, e *model.Event) {
		t.Helper()
		r, err := cl.ReleaseEventWithResponse(h.ctx, e.ID, client.ReleaseRequest{Token: e.ReleaseToken})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusOK)
	}

	t.Run("PerAddress", func(t *testing.T) {
		guesser := from(t, 2)
		target, other := h.insertEvent(tid, s.Id, "", model.EventDelivering), h.insertEvent(tid, s.Id, "", model.EventDelivering)
		for i := range 3 {
			wrong(t, guesser, target.ID, i, http.StatusNotFound)
		}
		wrong(t, guesser, other.ID, 3, http.StatusTooManyRequests)
		// The right tokens from the same address are served.
		release(t, guesser, target)
		release(t, guesser, other)
		// Tenant operations are not affected.
		l, err := c.ListPoliciesWithResponse(h.ctx)
		mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
	})
	t.Run("PerEventOverAddresses", func(t *testing.T) {
		target := h.insertEvent(tid, s.Id, "", model.EventDelivering)
		for i := range 3 {
			wrong(t, from(t, byte(10+i)), target.ID, i, http.StatusNotFound)
		}
		wrong(t, from(t, 13), target.ID, 3, http.StatusTooManyRequests)
		// Another event's guesses from a fresh address are not.
		wrong(t, from(t, 14), h.insertEvent(tid, s.Id, "", model.EventDelivering).ID, 0, http.StatusNotFound)
		release(t, from(t, 15), target)
	})
	t.Run("WindowEnds", func(t *testing.T) {
		target := h.insertEvent(tid, s.Id, "", model.EventDelivering)
		guesser := from(t, 20)
		for i := range 3 {
			wrong(t, guesser, target.ID, i, http.StatusNotFound)
		}
		wrong(t, guesser, target.ID, 3, http.StatusTooManyRequests)
		clock.Advance(time.Minute)
		wrong(t, guesser, target.ID, 4, http.StatusNotFound)
	})
}

// send does req with c's key and returns the response and its body.
func (h *harness) send(c *client.ClientWithResponses, req *http.Request) (*http.Response, []byte) {
	h.t.Helper()
	for _, edit := range c.ClientInterface.(*client.Client).RequestEditors {
		if err := edit(h.ctx, req); err != nil {
			h.t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, b
}

// TestWrongTokensLimitOff: WrongTokens.Max < 0 turns the limit off.
func TestWrongTokensLimitOff(t *testing.T) {
	h := newHarness(t, func(c *master.Config, _ *master.Deps) { c.WrongTokens.Max = -1 })
	anon := h.client("")
	for range 100 {
		r, err := anon.ReleaseEventWithResponse(h.ctx, "ev_unknown", client.ReleaseRequest{Token: "wrong"})
		mustStatus(t, err, r.StatusCode(), r.Body, http.StatusNotFound)
	}
}
