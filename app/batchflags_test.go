package app

import (
	"strings"
	"testing"
)

// The http_batch request bounds: defaults, values (flag over environment)
// and refusals naming the flag.
func TestHTTPBatchFlags(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig(nil, mongoEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPBatchMaxEvents != 500 || c.HTTPBatchMaxBytes != 1<<20 {
		t.Fatalf("defaults: %d events, %d bytes; want 500, 1 MiB", c.HTTPBatchMaxEvents, c.HTTPBatchMaxBytes)
	}
	c, err = ParseConfig([]string{"-http-batch-max-events", "50"}, mongoEnv(map[string]string{
		"SCHEDULER_HTTP_BATCH_MAX_EVENTS": "70", "SCHEDULER_HTTP_BATCH_MAX_BYTES": "65536"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPBatchMaxEvents != 50 || c.HTTPBatchMaxBytes != 65536 {
		t.Fatalf("got %d events, %d bytes; want 50 (flag over environment), 65536", c.HTTPBatchMaxEvents, c.HTTPBatchMaxBytes)
	}
	for _, args := range [][]string{
		{"-http-batch-max-events", "0"}, {"-http-batch-max-events", "10001"}, {"-http-batch-max-events", "many"},
		{"-http-batch-max-bytes", "1023"}, {"-http-batch-max-bytes", "67108865"},
	} {
		_, err := ParseConfig(args, mongoEnv(nil))
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")+":") {
			t.Errorf("%v: error %v, want one naming %s", args, err, args[0])
		}
	}
}
