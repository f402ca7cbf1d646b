package master_test

import (
	"bytes"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/model"
)

// TestSpecContract: openapi.yaml lists what the middleware answers for every
// operation, and describes the delivered message as the code sends it.
func TestSpecContract(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("EveryOperationListsItsStatuses", func(t *testing.T) {
		for path, item := range spec.Paths.Map() {
			for method, op := range item.Operations() {
				name := method + " " + path
				if op.Summary == "" {
					t.Errorf("%s: no summary", name)
				}
				public := op.Security != nil && len(*op.Security) == 0
				// Every operation validates its query and path (400) and is
				// rate limited (per tenant, or per address for wrong tokens); the
				// store may be unavailable (503).
				want := []string{"400", "429", "503"}
				if !public {
					want = append(want, "401", "403")
				}
				if strings.Contains(path, "{") {
					want = append(want, "404")
				}
				if op.RequestBody != nil {
					want = append(want, "413")
				}
				for _, p := range op.Parameters {
					if p.Value.Name == "Idempotency-Key" {
						want = append(want, "409", "422") // in progress; other body
					}
				}
				for _, code := range want {
					if op.Responses.Value(code) == nil {
						t.Errorf("%s: does not list %s", name, code)
					}
				}
			}
		}
	})
	t.Run("FireDecisionIsTheModelsEnum", func(t *testing.T) {
		got := enumOf(spec.Components.Schemas["Fire"].Value.Properties["decision"].Value)
		want := []string{string(model.FireEmitted), string(model.FireLate), string(model.FireSkippedOverlap),
			string(model.FireCancelledByNext), string(model.FireTriggered), string(model.FireSkippedManual), string(model.FireSkippedCalendar),
			string(model.FireBackfill), string(model.FireAfter)}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("Fire.decision enum %v, want %v", got, want)
		}
	})
	t.Run("DeliveryMessageMatchesTheCode", func(t *testing.T) {
		if spec.Webhooks["eventDelivery"] == nil || spec.Webhooks["eventDelivery"].Post == nil {
			t.Fatal("no eventDelivery webhook")
		}
		body := spec.Webhooks["eventDelivery"].Post.RequestBody.Value.Content.Get("application/json").Schema
		if body.Ref != "#/components/schemas/DeliveryMessage" {
			t.Fatalf("eventDelivery body is %q, want the DeliveryMessage schema", body.Ref)
		}
		for schema, typ := range map[string]reflect.Type{
			"DeliveryMessage": reflect.TypeFor[delivery.Message](),
			"DeliveryRelease": reflect.TypeFor[delivery.Release](),
		} {
			s := spec.Components.Schemas[schema].Value
			var fields []string
			for i := range typ.NumField() {
				name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				fields = append(fields, name)
				required := !strings.Contains(opts, "omit")
				if required != slices.Contains(s.Required, name) {
					t.Errorf("%s.%s: required in the spec %v, always sent by the code %v", schema, name, !required, required)
				}
			}
			var props []string
			for p := range s.Properties {
				props = append(props, p)
			}
			sort.Strings(fields)
			sort.Strings(props)
			if !slices.Equal(fields, props) {
				t.Errorf("%s properties %v, the code sends %v", schema, props, fields)
			}
		}
	})
}

func enumOf(s *openapi3.Schema) []string {
	var out []string
	for _, v := range s.Enum {
		out = append(out, v.(string))
	}
	sort.Strings(out)
	return out
}

// TestPayloadNullRefused: a null payload is refused with 400 naming payload
// (as openapi.yaml says), and nothing is stored.
func TestPayloadNullRefused(t *testing.T) {
	h := newHarness(t)
	_, c := h.tenant("acme")
	body := `{"name":"s","cron":"0 3 * * *","target":{"type":"http","url":"https://a.example.com/x"},"payload":null}`
	r, err := c.CreateScheduleWithBodyWithResponse(h.ctx, nil, "application/json", bytes.NewReader([]byte(body)))
	wantProblem(t, err, r.HTTPResponse, r.Body, http.StatusBadRequest, "payload")
	l, err := c.ListSchedulesWithResponse(h.ctx, nil)
	mustStatus(t, err, l.StatusCode(), l.Body, http.StatusOK)
	if len(l.JSON200.Items) != 0 {
		t.Fatalf("a schedule was stored: %s", l.Body)
	}
}
