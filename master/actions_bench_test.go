package master_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// BenchmarkScheduleActions measures one page of POST /v1/schedules/actions
// over 1,000 schedules selected by a label: the real HTTP API on
// 127.0.0.1, the embedded store on disk and the real emitter. One
// operation is a bulk pause of the 1,000 and a bulk resume of them (two
// calls, 2,000 compare-and-sets).
//
//	go test -run '^$' -bench ScheduleActions -benchtime 10x ./master/
func BenchmarkScheduleActions(b *testing.B) {
	serverMemory(b)
	st, err := embedded.Open(b.TempDir(), embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	em, err := emitter.New(emitter.Config{Partitions: 4, Owner: "bench"}, emitter.Deps{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := master.New(benchConfig(), master.Deps{Store: st, Emitter: em, Tokens: countingTokens{st: st, n: new(atomic.Int64)}, Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	hc := &http.Client{}
	key := benchTenantKey(b, hc, ts.URL)
	var body bytes.Buffer
	body.WriteString(`{"items":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"name":"s%d","cron":"0 3 * * *","target":{"type":"http","url":"https://consumer.example.com/hook"},"labels":{"team":"billing"}}`, i)
	}
	body.WriteString(`]}`)
	var buf bytes.Buffer
	if err := postBench(hc, ts.URL, key, body.Bytes(), 1000, &buf); err != nil {
		b.Fatal(err)
	}
	c, err := client.NewClientWithResponses(ts.URL, client.WithHTTPClient(hc), client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}))
	if err != nil {
		b.Fatal(err)
	}
	team := map[string]string{"team": "billing"}
	b.ResetTimer()
	for b.Loop() {
		for _, action := range []client.ScheduleAction{client.ScheduleActionPause, client.ScheduleActionResume} {
			r, err := c.ScheduleActionsWithResponse(context.Background(), client.ScheduleActionRequest{Action: action, Selector: client.ScheduleSelector{Labels: &team}})
			if err != nil || r.StatusCode() != http.StatusOK || r.JSON200.Changed != 1000 {
				b.Fatalf("%s: %v, status %d: %s", action, err, r.StatusCode(), r.Body)
			}
		}
	}
}
