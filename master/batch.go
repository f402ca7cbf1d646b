package master

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/schedulerd/schedulerd/cron"
	"github.com/schedulerd/schedulerd/internal/guard"
	"github.com/schedulerd/schedulerd/master/internal/batchanswer"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
	"github.com/schedulerd/schedulerd/store"
)

// opCreateSchedulesBatch is the operation whose body the validation
// middleware leaves to the handler (items are validated one by one).
const opCreateSchedulesBatch = "createSchedulesBatch"

// batchKeyPrefix keeps the idempotency keys of batch items apart from
// Idempotency-Key headers: the same text in both names two requests.
const batchKeyPrefix = "batch-item:"

// batchItem is one item of a batch create on its way through the handler.
type batchItem struct {
	raw  json.RawMessage
	key  string // idempotencyKey, "" if none
	hash string // of raw, when key is set
	m    model.Schedule
	comp *schedule.Compiled
	done bool // out holds the item's answer
	// stored before this request (recoverItem): its fires may exist
	recovered bool
	// its planned fires were written with it (ScheduleCreateMany)
	planned bool
	out     api.ScheduleBatchItemResult
}

// batchDiskNeed estimates the disk space the write of items not yet
// answered needs.
func batchDiskNeed(items []batchItem) uint64 {
	var need uint64
	for i := range items {
		it := &items[i]
		if it.done {
			continue
		}
		events := 0
		if it.comp != nil && it.comp.Schedule.RunAt != nil {
			events = it.comp.Schedule.EventCount // written in the same commit
		}
		need += guard.WriteNeed(len(it.raw), events)
	}
	return need
}

// CreateSchedulesBatch implements POST /v1/schedules/batch: every item is
// validated and answered on its own, the valid ones are stored with one
// ScheduleCreateMany, in the same commit as the fires the emitter plans for
// them (planBatch); the fires of the others are emitted after it
// (emitBatch).
func (s *Server) CreateSchedulesBatch(c echo.Context) error {
	raws, decoded, itemErrs, err := s.batchItems(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	who := callerOf(c)
	scope := who.scope()
	rules, err := s.rulesOf(ctx, who.tenantID)
	if err != nil {
		return err
	}
	lim := s.limitsFor(rules)
	now := s.now().UTC() // of every item: read once
	items := make([]batchItem, len(raws))
	keyAt := make(map[string]int)
	policies := make(map[string]bool) // compileKnowing
	for i, raw := range raws {
		it := &items[i]
		it.raw = raw
		it.out.Index = i
		var in api.ScheduleBatchItem
		if err := itemErrs[i]; err != nil {
			if it.done, err = s.itemFailed(c, it, err); err != nil {
				return err
			}
			continue
		}
		if decoded != nil {
			in = decoded[i]
		} else if err := decodeJSON(raw, &in); err != nil {
			if it.done, err = s.itemFailed(c, it, err); err != nil {
				return err
			}
			continue
		}
		if in.IdempotencyKey != nil {
			it.key = *in.IdempotencyKey
			if j, ok := keyAt[it.key]; ok {
				it.done, _ = s.itemFailed(c, it, invalid("idempotencyKey", "repeats the key of items["+strconv.Itoa(j)+"]"))
				continue
			}
			keyAt[it.key] = i
			sum := sha256.Sum256(append([]byte("POST /v1/schedules/batch item\n"), raw...))
			it.hash = hex.EncodeToString(sum[:])
		}
		it.comp, err = s.compileKnowing(ctx, who.tenantID, s.specFromCreate(createOf(&in)), lim, now, policies)
		if err != nil {
			if it.done, err = s.itemFailed(c, it, err); err != nil {
				return err
			}
			continue
		}
	}

	// Items answered before: replay them.
	for i := range items {
		it := &items[i]
		if it.done || it.key == "" {
			continue
		}
		rec, err := s.store.IdempotencyGet(ctx, scope, batchKeyPrefix+it.key)
		switch {
		case err == nil:
			s.replayItem(c, it, rec)
		case !errors.Is(err, model.ErrNotFound):
			return err
		}
	}

	// The disk guard, with the room this write needs, and the tenant's
	// quotas, as for a single create.
	if err := s.checkDiskFor(batchDiskNeed(items)); err != nil {
		return err
	}
	if err := s.batchQuotas(c, who.tenantID, rules, items); err != nil {
		return err
	}

	// Store the rest in one write.
	var (
		news = make([]store.ScheduleNew, 0, len(items))
		at   = make([]int, 0, len(items)) // news[j] is items[at[j]]
	)
	unkeyed := 0
	for i := range items {
		if !items[i].done && items[i].key == "" {
			unkeyed++
		}
	}
	ids := s.ids.newIDsAt(scope, prefixSchedule, now, unkeyed)
	for i := range items {
		it := &items[i]
		if it.done {
			continue
		}
		it.m = it.comp.Schedule
		if it.key != "" {
			it.m.ID = idFor(prefixSchedule, scope, batchKeyPrefix+it.key)
		} else {
			it.m.ID, ids = ids[0], ids[1:]
		}
		it.m.TenantID = who.tenantID
		it.m.Partition = model.PartitionOf(it.m.ID, s.cfg.Partitions)
		it.m.Version, it.m.State = 1, model.ScheduleActive
		it.m.CreatedAt, it.m.UpdatedAt = now, now
		news = append(news, store.ScheduleNew{Schedule: &it.m, Children: it.comp.Children(&it.m)})
		at = append(at, i)
	}
	saved := make([]*batchItem, 0, len(news))
	if len(news) > 0 {
		keys := make([][]cron.Key, len(news))
		for j, i := range at {
			keys[j] = items[i].comp.Keys
		}
		pctx := context.WithoutCancel(ctx) // the plans' context
		plans, err := s.planBatch(pctx, news, keys)
		if err != nil {
			plans.finish(pctx, errBatchNotStored)
			return err
		}
		res, err := s.store.ScheduleCreateMany(ctx, news)
		if err == nil && len(res) != len(news) {
			err = fmt.Errorf("the store reported %d results of %d items", len(res), len(news))
		}
		if err != nil {
			plans.finish(pctx, err)
			return err
		}
		// Every plan learns its item's result before anything can fail the
		// request: a conflicting item wrote nothing, and the quota its fires
		// took goes back.
		for j, rerr := range res {
			if rerr != nil {
				plans.done(pctx, j, nil, rerr)
			} else {
				items[at[j]].planned = plans.done(pctx, j, news[j].Fires, nil)
			}
		}
		for j, rerr := range res {
			it := &items[at[j]]
			switch {
			case rerr == nil:
				saved = append(saved, it)
			case errors.Is(rerr, model.ErrConflict) && it.key != "":
				// A concurrent batch with the same key, or a first attempt
				// that stored the item and failed before recording it.
				ok, err := s.recoverItem(c, it)
				if err != nil {
					return err
				}
				if ok {
					saved = append(saved, it)
				}
			default:
				if it.done, err = s.itemFailed(c, it, rerr); err != nil {
					return err
				}
			}
		}
	}

	// Emit, then answer and record.
	if len(saved) > 0 && s.emitter != nil {
		if err := s.emitBatch(context.WithoutCancel(ctx), saved); err != nil {
			return err
		}
	}
	var (
		recs   []*model.IdempotencyRecord
		recFor []*batchItem
	)
	answered := s.now()
	for _, it := range saved {
		out := scheduleOutAt(&it.m, it.comp, answered)
		it.done = true
		it.out.Status, it.out.Schedule = http.StatusCreated, out
		if it.key == "" {
			continue
		}
		b, err := batchanswer.AppendSchedule(nil, out)
		if err != nil {
			return err
		}
		key := batchKeyPrefix + it.key
		sealed, err := s.seal.seal(b, scope, key, it.hash)
		if err != nil {
			return err
		}
		recs = append(recs, &model.IdempotencyRecord{TenantID: scope, Key: key, RequestHash: it.hash, Status: http.StatusCreated, Body: sealed, CreatedAt: now})
		recFor = append(recFor, it)
	}
	if len(recs) > 0 {
		existing, err := s.store.IdempotencyPutMany(ctx, recs)
		if err != nil {
			// The schedules exist; a retry finds them through recoverItem.
			s.log.Warn().Err(err).Int("records", len(recs)).Msg("storing the idempotency records of a batch failed")
		}
		for j, old := range existing {
			if old != nil {
				s.replayItem(c, recFor[j], old)
			}
		}
	}

	out := api.ScheduleBatchResult{Items: make([]api.ScheduleBatchItemResult, len(items))}
	for i := range items {
		out.Items[i] = items[i].out
		if items[i].out.Status == http.StatusCreated {
			out.Created++
		} else {
			out.Failed++
		}
	}
	return writeBatchResult(c, &out, &s.answers)
}

// errBatchNotStored is what the planned fires of a batch are told when
// planning fails before the write.
var errBatchNotStored = errors.New("the batch was not stored")

// batchPlans holds, per item of a ScheduleCreateMany, the function that
// takes the write's result for the fires a CreatePlanner planned in it
// (nil: none planned).
type batchPlans []func(ctx context.Context, inserted []bool, events int, err error)

// planBatch has the emitter plan the fires of each new schedule in news,
// whose children keys are keys (CreatePlanner: a one-off's small fire),
// and puts them in its Fires, so
// that ScheduleCreateMany writes them in the schedule's commit. The others
// (cron schedules, large or deferred fires) are left to emitBatch. On an
// error the plans made so far are returned for the caller to finish.
func (s *Server) planBatch(ctx context.Context, news []store.ScheduleNew, keys [][]cron.Key) (batchPlans, error) {
	if s.planner == nil {
		return nil, nil
	}
	plans := make(batchPlans, len(news))
	for j := range news {
		m := news[j].Schedule
		if m.State != model.ScheduleActive {
			continue
		}
		fs, done, err := s.planner.PlanCreated(ctx, m, keys[j])
		if err != nil {
			return plans, fmt.Errorf("plan the fires of schedule %s: %w", m.ID, err)
		}
		news[j].Fires, plans[j] = fs, done
	}
	return plans, nil
}

// done gives item j's plan the result of its write, fs when the item was
// stored (all of them inserted: the store writes them with the schedule)
// or err, and reports whether there was a plan; each plan is finished once.
func (ps batchPlans) done(ctx context.Context, j int, fs []store.FireNew, err error) bool {
	if j >= len(ps) || ps[j] == nil {
		return false
	}
	done := ps[j]
	ps[j] = nil
	if err != nil {
		done(ctx, nil, 0, err)
		return true
	}
	inserted := make([]bool, len(fs))
	events := 0
	for i, fn := range fs {
		inserted[i] = true
		events += len(fn.Events)
	}
	done(ctx, inserted, events, nil)
	return true
}

// finish gives err to every plan not finished yet.
func (ps batchPlans) finish(ctx context.Context, err error) {
	for j := range ps {
		ps.done(ctx, j, nil, err)
	}
}

// emitBatch has the fires of the saved items that were not planned with
// their write emitted through SavedMany: cron schedules, large or deferred
// fires, and items stored by an earlier attempt (recovered).
func (s *Server) emitBatch(ctx context.Context, saved []*batchItem) error {
	var (
		ss   []*model.Schedule
		keys [][]cron.Key
	)
	for _, it := range saved {
		if it.m.State != model.ScheduleActive || it.planned {
			continue
		}
		ss = append(ss, &it.m)
		keys = append(keys, it.comp.Keys)
	}
	if len(ss) > 0 {
		if err := s.emitter.SavedMany(ctx, ss, keys); err != nil {
			s.log.Warn().Err(err).Int("schedules", len(ss)).Msg("emitting the fires of a batch failed")
			return err
		}
	}
	return nil
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
		ExcludeCalendars: in.ExcludeCalendars, OnExcluded: in.OnExcluded,
	}
}

// itemFailed makes err the answer of it when it is the client's (4xx) and
// reports whether it did; an error of the server fails the whole request.
func (s *Server) itemFailed(c echo.Context, it *batchItem, err error) (bool, error) {
	if !isClientError(err) {
		return false, err
	}
	p := s.toProblem(err, c)
	prefix := "items[" + strconv.Itoa(it.out.Index) + "]"
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
	it.out.Status, it.out.Problem, it.out.Schedule = p.status, &body, nil
	return true, nil
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

// replayItem answers it with rec, the record of its idempotency key.
func (s *Server) replayItem(c echo.Context, it *batchItem, rec *model.IdempotencyRecord) {
	if rec.RequestHash != it.hash {
		_, _ = s.itemFailed(c, it, &problem{status: http.StatusUnprocessableEntity, kind: "idempotency-key-reused", title: "Idempotency-Key reused",
			detail: "this idempotencyKey was used with a different item",
			fields: []api.FieldProblem{{Field: "idempotencyKey", Reason: "already used with a different item"}}})
		return
	}
	body, err := s.seal.open(rec.Body, rec.TenantID, rec.Key, rec.RequestHash)
	var out api.Schedule
	if err == nil {
		err = json.Unmarshal(body, &out)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("key", rec.Key).Msg("replaying the idempotency record of a batch item")
		_, _ = s.itemFailed(c, it, conflict("the first answer to this idempotencyKey cannot be read (the server's secret changed); use a new key"))
		return
	}
	replayed := true
	it.done = true
	it.out.Status, it.out.Schedule, it.out.Problem, it.out.Replayed = rec.Status, &out, nil, &replayed
}

// recoverItem answers an item whose id exists already: with the record of
// its key if a concurrent request wrote it meanwhile (done), else with the
// stored schedule, whose emission the caller finishes (true).
func (s *Server) recoverItem(c echo.Context, it *batchItem) (bool, error) {
	ctx := c.Request().Context()
	scope := callerOf(c).scope()
	rec, err := s.store.IdempotencyGet(ctx, scope, batchKeyPrefix+it.key)
	switch {
	case err == nil:
		s.replayItem(c, it, rec)
		return false, nil
	case !errors.Is(err, model.ErrNotFound):
		return false, err
	}
	m, err := s.store.ScheduleGet(ctx, callerOf(c).tenantID, it.m.ID)
	if errors.Is(err, model.ErrNotFound) {
		it.done, _ = s.itemFailed(c, it, conflict("the item conflicts with an existing object"))
		return false, nil
	}
	if err != nil {
		return false, err
	}
	comp, err := schedule.FromSchedule(m, s.cfg.MaxChildren)
	if err != nil {
		return false, err
	}
	it.m, it.comp, it.recovered = *m, comp, true
	replayed := true
	it.out.Replayed = &replayed
	return true, nil
}

// batchQuotas refuses, item by item in order, the items that would take the
// tenant past maxSchedules or maxEventsStored.
func (s *Server) batchQuotas(c echo.Context, tenantID string, r *tenantRules, items []batchItem) error {
	ctx := c.Request().Context()
	for i := range items {
		it := &items[i]
		if it.done {
			continue
		}
		qerr := s.checkSchedulesQuota(ctx, tenantID, r, it.comp.Schedule.EventCount)
		if qerr == nil {
			continue
		}
		var p *problem
		if !errors.As(qerr, &p) {
			return qerr
		}
		var err error
		if it.done, err = s.itemFailed(c, it, qerr); err != nil {
			return err
		}
	}
	return nil
}
