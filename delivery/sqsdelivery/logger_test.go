package sqsdelivery_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"

	"github.com/schedulerd/schedulerd/delivery/sqsdelivery"
	"github.com/schedulerd/schedulerd/model"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The SDK's own log lines (here its request log, which it prints when
// asked by ClientLogMode) arrive as zerolog JSON lines on Config.Logger.
func TestSDKLogLinesGoThroughZerolog(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"__type":"InternalFailure","message":"down"}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	var out syncBuffer
	d, err := sqsdelivery.New(context.Background(), sqsdelivery.Config{
		Region:   "us-east-1",
		Endpoint: srv.URL,
		Logger:   zerolog.New(&out).Level(zerolog.DebugLevel),
		LoadOptions: []func(*config.LoadOptions) error{
			config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
			})),
		},
		ClientOptions: []func(*sqs.Options){func(o *sqs.Options) {
			o.ClientLogMode = aws.LogRequest | aws.LogRetries
			o.RetryMaxAttempts = 2
		}},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	d.Deliver(context.Background(), []*model.Event{testEvent("sch_1", 0, srv.URL+"/000000000000/q")}) // fails: the server answers 500
	var request, retry bool
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if line["component"] != "aws-sdk" {
			continue
		}
		msg, _ := line["message"].(string)
		if line["level"] != "debug" {
			t.Errorf("SDK debug line at level %v: %s", line["level"], sc.Text())
		}
		request = request || strings.Contains(msg, "POST /")
		retry = retry || strings.Contains(msg, "retry")
	}
	if !request || !retry {
		t.Fatalf("SDK request and retry lines did not both reach the zerolog logger (request %v, retry %v); got:\n%s", request, retry, out.String())
	}
}
