package master

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/create"
	"github.com/schedulerd/schedulerd/internal/idempotency"
	"github.com/schedulerd/schedulerd/model"
)

// opCreateSchedulesBatch is the operation whose body the validation
// middleware leaves to the handler (items are validated one by one).
const opCreateSchedulesBatch = "createSchedulesBatch"

// batchKeyPrefix keeps the idempotency keys of batch items apart from
// Idempotency-Key headers: the same text in both names two requests.
const batchKeyPrefix = "batch-item:"

// CreateSchedulesBatch implements POST /v1/schedules/batch: every item is
// validated and answered on its own; the valid ones are created together
// by the create use case (createSchedules), in one store write.
func (s *Server) CreateSchedulesBatch(c echo.Context) error {
	raws, decoded, itemErrs, err := s.batchItems(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := callerOf(c)
	rules, err := s.rulesOf(ctx, who.tenantID)
	if err != nil {
		return err
	}
	lim := s.limitsFor(rules)
	now := s.now().UTC() // of every item: read once
	raw, _ := c.Get(ctxRawBody).([]byte)
	share := len(raw) / max(len(raws), 1) // an item's part of the body when its own is not kept
	items := make([]create.Item, len(raws))
	keyAt := make(map[string]int)
	policies := make(map[string]bool) // compileKnowing
	for i, raw := range raws {
		it := &items[i]
		it.Size = cmp.Or(len(raw), share)
		if it.Err = itemErrs[i]; it.Err != nil {
			continue
		}
		var in api.ScheduleBatchItem
		if decoded != nil {
			in = decoded[i]
		} else if it.Err = decodeJSON(raw, &in); it.Err != nil {
			continue
		}
		if in.IdempotencyKey != nil {
			if j, ok := keyAt[*in.IdempotencyKey]; ok {
				it.Err = invalid("idempotencyKey", "repeats the key of items["+strconv.Itoa(j)+"]")
				continue
			}
			keyAt[*in.IdempotencyKey] = i
			it.Key = batchKeyPrefix + *in.IdempotencyKey
			it.Hash = idempotency.Hash([]byte("POST /v1/schedules/batch item\n"), raw)
		}
		it.Compiled, it.Err = s.compileKnowing(ctx, who.tenantID, s.specFromCreate(createOf(&in)), lim, now, policies)
	}
	res, err := s.createSchedules(c, rules, items)
	if err != nil {
		return keyProblem(err, "idempotencyKey", "item")
	}
	out := api.ScheduleBatchResult{Items: make([]api.ScheduleBatchItemResult, len(items))}
	answered := s.now()
	var created []string
	for i, r := range res {
		o := &out.Items[i]
		o.Index = i
		switch {
		case r.Err != nil:
			if err := s.itemFailed(c, o, keyProblem(r.Err, "idempotencyKey", "item")); err != nil {
				return err
			}
		case r.Replay != nil:
			var sch api.Schedule
			if err := json.Unmarshal(r.Replay.Body, &sch); err != nil {
				return fmt.Errorf("replay the answer of items[%d]: %w", i, err)
			}
			o.Status, o.Schedule, o.Replayed = r.Replay.Status, &sch, new(true)
		default:
			o.Status, o.Schedule = http.StatusCreated, scheduleOutAt(r.Schedule, r.Compiled, answered)
			if r.Recovered {
				o.Replayed = new(true)
			} else {
				created = append(created, r.Schedule.ID)
			}
		}
		if o.Status == http.StatusCreated {
			out.Created++
		} else {
			out.Failed++
		}
	}
	// One audit record for the batch: its count and id range.
	noteAudit(c.Request().Context(), batchAuditNote(created))
	return writeBatchResult(c, &out, &s.answers)
}

// batchItems validates a batch body against the spec, as the middleware
// validates other bodies but in one pass for all items, and returns its
// items with the validation failure of each (nil: valid). A failure outside
// the items fails the request. When decodeBatch passed the body, decoded
// holds its items (nil otherwise: the caller decodes them), and items only
// those that have an idempotencyKey (the others are nil).
func (s *Server) batchItems(c echo.Context) (items []json.RawMessage, decoded []api.ScheduleBatchItem, itemErrs []error, err error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != echo.MIMEApplicationJSON {
		reason := "header Content-Type has unexpected value " + strconv.Quote(ct)
		return nil, nil, nil, badRequest(reason, api.FieldProblem{Field: "Content-Type", Reason: reason})
	}
	raw, _ := c.Get(ctxRawBody).([]byte)
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, nil, badRequest("the body is required", api.FieldProblem{Field: "body", Reason: "is required"})
	}
	// Validated and decoded at once when every item is plainly valid.
	if decoded, ok := decodeBatch(raw); ok && len(decoded) >= 1 && len(decoded) <= s.cfg.MaxBatchItems {
		items := make([]json.RawMessage, len(decoded)) // only a keyed item's is read
		if keyed(decoded) {
			if items, ok = batchItemsOf(raw); !ok || len(items) != len(decoded) {
				return nil, nil, nil, errors.New("master: batch items counted differently by two decoders")
			}
		}
		return items, decoded, make([]error, len(items)), nil
	}
	raws, itemErrs, err := s.validateBatch(c, raw)
	return raws, nil, itemErrs, err
}

// validateBatch is batchItems for a body decodeBatch did not accept: the spec's validator on the whole body, its failures split
// by item.
func (s *Server) validateBatch(c echo.Context, raw []byte) ([]json.RawMessage, []error, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, nil, badRequest("not valid JSON: "+err.Error(), api.FieldProblem{Field: "body", Reason: "not valid JSON: " + err.Error()})
	}
	// The limit first: a body of too many items is not validated at all.
	n := 0
	if obj, ok := v.(map[string]any); ok {
		items, _ := obj["items"].([]any)
		n = len(items)
	}
	if n > s.cfg.MaxBatchItems {
		reason := "at most " + itoa(s.cfg.MaxBatchItems) + " items, got " + itoa(n)
		return nil, nil, &problem{status: http.StatusRequestEntityTooLarge, kind: "too-large", title: "Too many items",
			detail: "items: " + reason, fields: []api.FieldProblem{{Field: "items", Reason: reason}}}
	}
	rt := s.routeOf(c)
	bodySchema := batchBodySchema(rt)
	if bodySchema == nil {
		return nil, nil, errors.New("master: the spec has no schema for batch bodies")
	}
	var env struct {
		Items []json.RawMessage `json:"items"`
	}
	opts := []openapi3.SchemaValidationOption{openapi3.VisitAsRequest(), openapi3.MultiErrors()}
	if rt.spec.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	var itemErrs []error
	if rt.body.acceptsValue(rt, v) {
		// Valid as a whole (see bodySchema): no items fail.
	} else if err := bodySchema.VisitJSON(v, opts...); err != nil {
		var p *problem
		if !errors.As(translateValidation(err), &p) {
			return nil, nil, err
		}
		perItem := map[int][]api.FieldProblem{}
		var rest []api.FieldProblem
		for _, f := range p.fields {
			if i, field, ok := itemOfField(f.Field); ok && i < n {
				perItem[i] = append(perItem[i], api.FieldProblem{Field: field, Reason: f.Reason})
			} else {
				rest = append(rest, f)
			}
		}
		if len(rest) > 0 {
			detail := make([]string, len(rest))
			for i, f := range rest {
				detail[i] = f.Field + ": " + f.Reason
			}
			return nil, nil, badRequest(strings.Join(detail, "; "), rest...)
		}
		itemErrs = make([]error, n)
		for i, fields := range perItem {
			detail := make([]string, len(fields))
			for j, f := range fields {
				detail[j] = f.Field + ": " + f.Reason
			}
			itemErrs[i] = badRequest(strings.Join(detail, "; "), fields...)
		}
	}
	if err := decodeJSON(raw, &env); err != nil {
		return nil, nil, err
	}
	switch {
	case itemErrs == nil:
		itemErrs = make([]error, len(env.Items))
	case len(itemErrs) != len(env.Items):
		return nil, nil, errors.New("master: batch items counted differently by two decoders")
	}
	return env.Items, itemErrs, nil
}

// keyed reports whether an item has an idempotencyKey.
func keyed(items []api.ScheduleBatchItem) bool {
	for i := range items {
		if items[i].IdempotencyKey != nil {
			return true
		}
	}
	return false
}

// itemOfField splits a field of the batch body, "items.3.target.url", into
// the item's index and its field within the item ("target.url"; "" for
// the item itself).
func itemOfField(field string) (int, string, bool) {
	rest, ok := strings.CutPrefix(field, "items.")
	if !ok {
		return 0, "", false
	}
	idx, inner, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return 0, "", false
	}
	return i, inner, true
}

// batchBodySchema is the schema of the route's body.
func batchBodySchema(rt *route) *openapi3.Schema {
	if rt == nil || rt.operation.RequestBody == nil || rt.operation.RequestBody.Value == nil {
		return nil
	}
	mt := rt.operation.RequestBody.Value.Content.Get(echo.MIMEApplicationJSON)
	if mt == nil || mt.Schema == nil {
		return nil
	}
	return mt.Schema.Value
}

// createOf is the ScheduleCreate of a batch item.
func createOf(in *api.ScheduleBatchItem) *api.ScheduleCreate {
	return &api.ScheduleCreate{
		Name: in.Name, Cron: in.Cron, Fields: in.Fields, RunAt: in.RunAt, Timezone: in.Timezone,
		EventCount: in.EventCount, PolicyId: in.PolicyId, Window: in.Window, Spread: in.Spread,
		Priority: in.Priority, Overlap: in.Overlap, Target: in.Target, Payload: in.Payload,
		MaxAttempts: in.MaxAttempts, StartAt: in.StartAt, EndAt: in.EndAt, Misfire: in.Misfire,
		Jitter:   in.Jitter,
		Deadline: in.Deadline, OnDeadline: in.OnDeadline, MaxEventAge: in.MaxEventAge,
		Labels:           in.Labels,
		ExcludeCalendars: in.ExcludeCalendars, OnExcluded: in.OnExcluded,
		Interval: in.Interval, Crons: in.Crons,
		Notify: in.Notify, After: in.After,
	}
}

// itemFailed makes err the answer of o when it is the client's (4xx); an
// error of the server fails the whole request.
func (s *Server) itemFailed(c echo.Context, o *api.ScheduleBatchItemResult, err error) error {
	if !isClientError(err) {
		return err
	}
	p := s.toProblem(err, c)
	prefix := "items[" + strconv.Itoa(o.Index) + "]"
	body := api.Problem{Type: problemTypeBase + p.kind, Title: p.title, Status: p.status}
	if p.detail != "" {
		d := prefix + ": " + p.detail
		body.Detail = &d
	}
	if len(p.fields) > 0 {
		fields := make([]api.FieldProblem, len(p.fields))
		for i, f := range p.fields {
			fields[i] = api.FieldProblem{Field: itemField(prefix, f.Field), Reason: f.Reason}
		}
		body.Errors = &fields
	}
	o.Status, o.Problem, o.Schedule = p.status, &body, nil
	return nil
}

// itemField names field of an item: "items[3].cron"; the item's "body" is
// the item itself.
func itemField(prefix, field string) string {
	if field == "" || field == "body" {
		return prefix
	}
	return prefix + "." + field
}

// isClientError reports whether err is the request's fault, answered 4xx
// by toProblem.
func isClientError(err error) bool {
	var p *problem
	if errors.As(err, &p) {
		return p.status >= 400 && p.status < 500
	}
	return errors.Is(err, model.ErrInvalid) || errors.Is(err, model.ErrNotFound) || errors.Is(err, model.ErrConflict)
}
