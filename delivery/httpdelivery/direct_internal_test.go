package httpdelivery

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
)

// rawServer accepts connections on 127.0.0.1 and, for each request read,
// sends its raw bytes on got and answers 200 with an empty body.
func rawServer(t *testing.T) (addr string, got <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var raw bytes.Buffer
				br := bufio.NewReader(io.TeeReader(c, &raw))
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.Copy(io.Discard, req.Body); err != nil {
						return
					}
					// What the tee read beyond this request is still in br.
					n := raw.Len() - br.Buffered()
					ch <- bytes.Clone(raw.Bytes()[:n])
					raw.Next(n)
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// netHTTPRequest is the request net/http's Transport sends for e, built as
// deliverOne builds it for the targets that stay on net/http.
func netHTTPRequest(t *testing.T, d *Deliverer, e *model.Event, got <-chan []byte) []byte {
	t.Helper()
	body, err := json.Marshal(delivery.NewMessage(e, d.cfg.ReleaseBaseURL))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.Target.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ts := d.cfg.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	req.Header.Set(HeaderEventID, e.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(d.cfg.SigningSecret, ts, body))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return <-got
}

func TestDirectRequestBytes(t *testing.T) {
	addr, got := rawServer(t)
	_, port, _ := net.SplitHostPort(addr)
	d, err := New(Config{
		SigningSecret:  []byte("secret"),
		ReleaseBaseURL: "https://scheduler.example:8443/",
		Now:            func() time.Time { return time.Unix(1772366400, 0) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	deadline := time.Unix(1772367000, 0).UTC()
	expires := deadline.Add(time.Minute)
	for _, target := range []string{
		"http://" + addr,
		"http://" + addr + "/hooks/run?tenant=a&x=%20y#frag",
		"http://localhost:" + port + "/p%2Fq/",
	} {
		t.Run(target, func(t *testing.T) {
			e := &model.Event{
				ID: "sch_1.1772366400.v1.7", ScheduleID: "sch_1", FireID: "sch_1.1772366400.v1",
				FireTime: time.Unix(1772366400, 0), Index: 7, Count: 50, Deadline: &deadline,
				Target:   model.Target{Type: model.TargetHTTP, URL: target},
				Payload:  json.RawMessage(`{"a": [1, 2], "b": "c d"}`),
				PolicyID: "pol", TokenExpiresAt: &expires, ReleaseToken: "tok", Fence: 3, Attempts: 1,
			}
			want := netHTTPRequest(t, d, e, got)
			if tg := d.targets.get(target, d.cfg.UserAgent); tg.direct == nil {
				t.Fatalf("target %s does not take the direct path", target)
			}
			if res := d.Deliver(context.Background(), []*model.Event{e})[0]; res.Err != nil {
				t.Fatalf("Deliver: %v", res.Err)
			}
			if direct := <-got; !bytes.Equal(direct, want) {
				t.Fatalf("direct path sent\n%q\nnet/http sends\n%q", direct, want)
			}
		})
	}
}

func TestDirectTargets(t *testing.T) {
	const ua = DefaultUserAgent
	for _, tc := range []struct {
		url    string
		direct bool
	}{
		{"http://127.0.0.1:8080/x?y=1", true},
		{"http://consumer.internal/x", true},
		{"http://consumer.internal:/x", true},
		{"https://consumer.internal/x", false},          // TLS and HTTP/2 stay on net/http
		{"http://user:pass@consumer.internal/x", false}, // Authorization header
		{"http://bücher.example/x", false},              // punycode
		{"http://[fe80::1%25eth0]:8080/x", false},       // zone dropped from Host
		{"http://consumer.internal/a b", true},          // escaped by RequestURI
	} {
		u := (&targetCache{}).get(tc.url, ua)
		if u.url == nil {
			t.Fatalf("%s: not parsed", tc.url)
		}
		if got := u.direct != nil; got != tc.direct {
			t.Errorf("%s: direct = %v, want %v", tc.url, got, tc.direct)
		}
	}
	if tg := (&targetCache{}).get("http://consumer.internal/x", "agent\r\nX-Evil: 1"); tg.direct != nil {
		t.Error("a user agent with a line break takes the direct path")
	}
}
