package master_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/app"
	"github.com/schedulerd/schedulerd/client"
	"github.com/schedulerd/schedulerd/emitter"
	"github.com/schedulerd/schedulerd/master"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store/embedded"
)

// BenchmarkBatchIntake measures one-off jobs created per second through
// POST /v1/schedules/batch: the real HTTP API on 127.0.0.1, the embedded
// store on disk and the real emitter (each one-off's fire and event are
// written on save). One operation is one batch of batchSize items; clients
// batches are in flight at once.
//
// The store's one commit goroutine bounds it (the rows and index keys of
// each one-off's schedule, fire and event); the NoEmitter case measures the
// intake without the fires. Figures: docs/benchmarks.md, Intake.
//
//	go test -run '^$' -bench BatchIntake -benchtime 20x ./master/
func BenchmarkBatchIntake(b *testing.B) {
	for _, bc := range []struct {
		name    string
		clients int
		keyed   bool
		emit    bool
	}{
		{"NoKeys", 4, false, true},
		{"IdempotencyKeys", 4, true, true},
		{"NoKeys16Clients", 16, false, true},
		// Without an emitter: the intake alone (validation, one store
		// write), not the writing of each one-off's fire and event.
		{"NoKeysNoEmitter", 4, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) { benchBatchIntake(b, 1000, bc.clients, bc.keyed, bc.emit) })
	}
}

// serverMemory runs a benchmark with the garbage collector and memory
// limit that schedulerd starts with.
func serverMemory(b *testing.B) {
	_, restore := app.ApplyMemorySettings(app.DefaultGCPercent, app.DefaultMemoryLimitPercent, os.Getenv, os.DirFS("/"))
	b.Cleanup(restore)
}

func benchBatchIntake(b *testing.B, batchSize, clients int, keyed, emit bool) {
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
	deps := master.Deps{Store: st, Tokens: countingTokens{st: st, n: new(atomic.Int64)}, Logger: zerolog.Nop()}
	if emit {
		deps.Emitter = em
	}
	srv, err := master.New(benchConfig(), deps)
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	key := benchTenantKey(b, hc, ts.URL)

	runAt := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	body := func(batch int) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"items":[`)
		for i := range batchSize {
			if i > 0 {
				buf.WriteByte(',')
			}
			k := ""
			if keyed {
				k = fmt.Sprintf(`"idempotencyKey":"b%d-%d",`, batch, i)
			}
			fmt.Fprintf(&buf, `{%s"name":"job-%d-%d","runAt":"%s","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":%d}}`,
				k, batch, i, runAt, i)
		}
		buf.WriteString(`]}`)
		return buf.Bytes()
	}
	// Bodies are built before the timer. Without idempotency keys a few
	// are posted in turn (every post creates new schedules): holding b.N
	// of them would grow the heap with b.N and space out the garbage
	// collection the server pays for.
	distinct := b.N
	if !keyed {
		distinct = min(b.N, 2*clients)
	}
	bodies := make([][]byte, distinct)
	for i := range bodies {
		bodies[i] = body(i)
	}
	work := make(chan []byte)
	errs := make(chan error, clients)
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	for range clients {
		go func() {
			var buf bytes.Buffer
			for p := range work {
				if err := postBench(hc, ts.URL, key, p, batchSize, &buf); err != nil {
					errs <- err
					for range work {
					}
					return
				}
			}
			errs <- nil
		}()
	}
	for i := range b.N {
		work <- bodies[i%distinct]
	}
	close(work)
	for range clients {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "jobs/s")
	// The CPU of the whole process (server, store, clients, garbage
	// collection) while the timer ran: less swayed than the rate by what
	// else runs on the machine.
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N*batchSize), "cpu-µs/job")
	}
}

// postBench posts one batch body and checks that all want items were
// created. It reads the answer into buf (reused by its caller) and parses
// only its leading counts, so that the client costs little next to the
// server it measures: the answer of a batch starts with "created" and
// "failed" (the field order of api.ScheduleBatchResult).
func postBench(hc *http.Client, url, key string, body []byte, want int, buf *bytes.Buffer) error {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/schedules/batch", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	raw := buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, raw)
	}
	prefix := fmt.Appendf(nil, `{"created":%d,"failed":0,"items":[`, want)
	if !bytes.HasPrefix(raw, prefix) {
		return fmt.Errorf("created %d items? %.300s", want, raw)
	}
	return nil
}

// benchTenantKey creates a tenant and returns its API key.
func benchTenantKey(b *testing.B, hc *http.Client, url string) string {
	b.Helper()
	admin, err := client.NewClientWithResponses(url, client.WithHTTPClient(hc),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+testAdminKey)
			return nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	tr, err := admin.CreateTenantWithResponse(context.Background(), nil, client.TenantCreate{Name: "bench"})
	if err != nil || tr.JSON201 == nil {
		b.Fatalf("create tenant: %v %s", err, tr.Body)
	}
	kr, err := admin.CreateAPIKeyWithResponse(context.Background(), tr.JSON201.Id, nil)
	if err != nil || kr.JSON201 == nil {
		b.Fatalf("create key: %v %s", err, kr.Body)
	}
	return kr.JSON201.Key
}

// BenchmarkSingleCreate64 measures one-off schedules created per second
// through POST /v1/schedules by 64 concurrent clients: the real HTTP API on
// 127.0.0.1, the embedded store on disk and the real emitter (each
// one-off's fire and event are written on save). One operation is one
// create.
//
//	go test -run '^$' -bench SingleCreate64 -benchtime 5000x ./master/
func BenchmarkSingleCreate64(b *testing.B) {
	const clients = 64
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
	deps := master.Deps{Store: st, Emitter: em, Tokens: countingTokens{st: st, n: new(atomic.Int64)}, Logger: zerolog.Nop()}
	srv, err := master.New(benchConfig(), deps)
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	key := benchTenantKey(b, hc, ts.URL)

	runAt := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"name":"job-%d","runAt":"%s","target":{"type":"http","url":"https://consumer.example.com/hook"},"payload":{"order":%d}}`,
			i, runAt, i)
	}
	var next atomic.Int64
	errs := make(chan error, clients)
	b.ResetTimer()
	for range clients {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					errs <- nil
					return
				}
				if err := postCreate(hc, ts.URL, key, bodies[i]); err != nil {
					next.Store(int64(len(bodies))) // the others stop too
					errs <- err
					return
				}
			}
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

func postCreate(hc *http.Client, url, key string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/schedules", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, raw)
	}
	return nil
}

// benchConfig lifts the tenant's maxSchedules quota (default 10,000) above
// what a benchmark creates. The quota checks run as configured by default.
func benchConfig() master.Config {
	return master.Config{AdminKey: testAdminKey, Partitions: 4, TenantQuotas: model.TenantQuotas{MaxSchedules: 10_000_000}}
}
