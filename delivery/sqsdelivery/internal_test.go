package sqsdelivery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/internal/netguard"
	"github.com/schedulerd/schedulerd/model"
)

func TestFifoID(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		keep     bool
	}{
		{"KeepsEventID", "sch_1.1772366400.v1.7", true},
		{"KeepsPunctuation", `a!"#$%&'()*+,-./:;<=>?@[\]^_{|}~`, true},
		{"HashesEmpty", "", false},
		{"HashesSpace", "a b", false},
		{"HashesNonASCII", "zeitplan-ä", false},
		{"HashesTooLong", strings.Repeat("x", 129), false},
		{"KeepsMaxLength", strings.Repeat("x", 128), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fifoID(tc.in)
			if (got == tc.in) != tc.keep {
				t.Fatalf("fifoID(%q) = %q, keep = %v", tc.in, got, tc.keep)
			}
			if !tc.keep && len(got) != 64 {
				t.Fatalf("fifoID(%q) = %q, want a 64-digit hash", tc.in, got)
			}
		})
	}
}

func TestPlanCutsBatches(t *testing.T) {
	d := &Deliverer{releaseBaseURL: "https://s.example"}
	t.Run("TenEntriesPerBatchInOrder", func(t *testing.T) {
		events := make([]*model.Event, 25)
		for i := range events {
			events[i] = &model.Event{ID: "e" + strconv.Itoa(i), ScheduleID: "s", Target: model.Target{QueueURL: "q"}}
		}
		batches := d.plan(events, make([]delivery.Result, len(events)), nil)
		var sizes []int
		next := 0
		for _, b := range batches {
			sizes = append(sizes, len(b.entries))
			for _, en := range b.entries {
				if en.index != next {
					t.Fatalf("entry for event %d, want %d", en.index, next)
				}
				next++
			}
		}
		if fmt.Sprint(sizes) != "[10 10 5]" {
			t.Fatalf("batch sizes = %v, want [10 10 5]", sizes)
		}
	})
}

// A queue URL outside the tenant's prefixes is refused before any send:
// Permanent, reason ssrf, and in no batch.
func TestPlanChecksTenantQueues(t *testing.T) {
	d := &Deliverer{releaseBaseURL: "https://s.example"}
	rule, err := netguard.NewTargetRule(nil, nil, []string{"https://sqs.eu-west-1.amazonaws.com/111/"})
	if err != nil {
		t.Fatal(err)
	}
	events := []*model.Event{
		{ID: "ok", ScheduleID: "s", Target: model.Target{Type: model.TargetSQS, QueueURL: "https://sqs.eu-west-1.amazonaws.com/111/q"}},
		{ID: "other", ScheduleID: "s", Target: model.Target{Type: model.TargetSQS, QueueURL: "https://sqs.eu-west-1.amazonaws.com/222/q"}},
	}
	results := make([]delivery.Result, len(events))
	batches := d.plan(events, results, rule)
	if len(batches) != 1 || len(batches[0].entries) != 1 || batches[0].entries[0].index != 0 {
		t.Fatalf("batches %+v, want one with the allowed event only", batches)
	}
	r := results[1]
	if !r.Permanent || !errors.Is(r.Err, delivery.ErrTargetRefused) || delivery.ReasonOf(model.TargetSQS, r) != delivery.ReasonSSRF {
		t.Fatalf("refused queue: %+v, want a permanent ssrf refusal", r)
	}
	if results[0].Err != nil {
		t.Fatalf("allowed queue: %v", results[0].Err)
	}
}
