//go:build unix

package httpdelivery_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

// pacedSinkEnv makes the test binary a sink (pacedSink) instead of running
// tests.
const pacedSinkEnv = "HTTPDELIVERY_PACED_SINK"

func TestMain(m *testing.M) {
	if os.Getenv(pacedSinkEnv) != "" {
		pacedSink()
		return
	}
	os.Exit(m.Run())
}

// pacedSink answers 204 to every request on a new port of 127.0.0.1, which
// it prints, until its standard input closes (its parent ended).
func pacedSink() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
}

// startPacedSink starts pacedSink in a child process and returns its URL.
func startPacedSink(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), pacedSinkEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("sink's address: %v", err)
	}
	return "http://" + strings.TrimSpace(addr) + "/"
}

// pacedInterval is the mean time between the handler's wakes in the
// 50,000-events-over-60-s spread (one wake per launch gap of 4 ms that holds
// a launch: about 13,000 wakes).
const pacedInterval = 4600 * time.Microsecond

// BenchmarkHTTPDeliveryPaced measures the floor under the spread's CPU: one
// op is one wake of a goroutine sleeping until its instant, pacedInterval
// after the previous one, that then does nothing (Wake), sends one POST
// with a bare net/http client (NetHTTP), or delivers one event with the
// Deliverer (Deliverer). The sink runs in a child process, so cpu-us/op is
// the sender's alone: what a process that wakes this often pays before any
// claim, queue or store write. Run it with -benchtime 2000x (9 s each).
func BenchmarkHTTPDeliveryPaced(b *testing.B) {
	url := startPacedSink(b)
	body := bytes.Repeat([]byte("x"), 400)
	b.Run("Wake", func(b *testing.B) {
		paced(b, func() error { return nil })
	})
	b.Run("NetHTTP", func(b *testing.B) {
		c := &http.Client{Timeout: 10 * time.Second}
		paced(b, func() error {
			resp, err := c.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		})
	})
	b.Run("Deliverer", func(b *testing.B) {
		d := newDeliverer(b, httpdelivery.Config{Now: time.Now})
		ctx := context.Background()
		i := 0
		paced(b, func() error {
			i++
			return d.Deliver(ctx, []*model.Event{testEvent("sch_1.1772366400.v1."+strconv.Itoa(i), url)})[0].Err
		})
	})
}

// paced runs op once per pacedInterval, b.N times, and reports the
// process's CPU per op.
func paced(b *testing.B, op func() error) {
	if err := op(); err != nil { // a kept connection, as in a running handler
		b.Fatal(err)
	}
	b.ResetTimer()
	cpuStart := processCPU(b)
	next := time.Now()
	for range b.N {
		next = next.Add(pacedInterval)
		time.Sleep(time.Until(next))
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpuStart).Microseconds())/float64(b.N), "cpu-us/op")
}
