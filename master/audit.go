package master

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

// The audit: every mutating call that succeeds appends records
// (recordAudit) of the changes its handler noted (noteChange), or one
// record naming the call's path object when it noted none. Releases and
// extends (the consumers' calls, public and high-volume) are not recorded.
// The records are written after the change, in their own write: a call
// whose record fails to be written still answers its success, and the
// failure is logged.

// auditValueMax is the longest value a diff shows; a longer one is shown
// as its size.
const auditValueMax = 1 << 10

// auditSkipped are the members a diff leaves out: bookkeeping that changes
// with every write, and the hash of a key.
var auditSkipped = map[string]bool{
	"version": true, "updatedAt": true, "createdAt": true, "intervalNext": true,
	"tokensInUse": true, "tokenTimeouts": true, "hash": true, "partition": true,
	"effectiveLimit": true, "limitReason": true, "limitChangedAt": true, "holdTime": true,
	"tenantId": true, // the record's own
}

// auditDurations are the members the model stores as nanoseconds and the
// API writes as Go durations ("15m0s"); a diff shows them as the API does.
var auditDurations = map[string]bool{"window": true, "jitter": true, "interval": true, "tokenTimeout": true}

// auditChange is one change a handler notes.
type auditChange struct {
	tenantID string // "": the caller's
	objectID string
	version  int64
	before   any // nil for a create
	after    any // nil for a delete
	// previous is the schedule as stored before the change, kept for its
	// versions.
	previous *model.Schedule
	note     string
}

// auditLog collects the changes of one request.
type auditLog struct {
	mu      sync.Mutex
	changes []auditChange
	note    string
}

type auditKey struct{}

// noteChange records ch for the request of ctx; a no-op outside one.
func noteChange(ctx context.Context, ch auditChange) {
	if l, ok := ctx.Value(auditKey{}).(*auditLog); ok {
		l.mu.Lock()
		l.changes = append(l.changes, ch)
		l.mu.Unlock()
	}
}

// noteAudit sets the note of the request's records.
func noteAudit(ctx context.Context, note string) {
	if l, ok := ctx.Value(auditKey{}).(*auditLog); ok {
		l.mu.Lock()
		l.note = note
		l.mu.Unlock()
	}
}

// lowerFirst is id with its first letter in lower case: the embedded spec
// capitalises operation ids.
func lowerFirst(id string) string {
	if id == "" {
		return id
	}
	return strings.ToLower(id[:1]) + id[1:]
}

// audited reports whether rt's calls are recorded.
func audited(rt *route, method string) bool {
	return rt != nil && !rt.public && method != http.MethodGet && method != http.MethodHead
}

// recordAudit appends the audit records of a mutating call that succeeded.
// It runs after authenticate.
func (s *Server) recordAudit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rt := s.routeOf(c)
		if !audited(rt, c.Request().Method) {
			return next(c)
		}
		l := &auditLog{}
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), auditKey{}, l)))
		err := next(c)
		if err != nil || c.Response().Status >= 400 {
			return err
		}
		l.mu.Lock()
		recs := s.auditRecords(c, rt, l)
		l.mu.Unlock()
		if werr := s.store.AuditAppend(context.WithoutCancel(c.Request().Context()), recs); werr != nil {
			s.log.Warn().Err(werr).Str("action", rt.action).Int("records", len(recs)).Msg("the audit records of a call could not be written")
		}
		return nil
	}
}

// auditRecords builds the records of a call from the changes noted.
func (s *Server) auditRecords(c echo.Context, rt *route, l *auditLog) []*model.AuditRecord {
	who, _ := c.Get(ctxCaller).(*caller)
	if who == nil {
		who = &caller{}
	}
	base := model.AuditRecord{
		At: s.now().UTC(), TenantID: who.tenantID, KeyPrefix: who.keyPrefix,
		Action: rt.action, Note: l.note,
		RequestID: cmp.Or(c.Response().Header().Get(echo.HeaderXRequestID), c.Request().Header.Get(echo.HeaderXRequestID)),
	}
	if len(base.RequestID) > 200 {
		base.RequestID = base.RequestID[:200]
	}
	if who.admin {
		base.KeyPrefix = "admin"
		base.TenantID = c.Param("id") // the tenant routes
	}
	if len(l.changes) == 0 {
		l.changes = []auditChange{{objectID: c.Param("id")}}
		if who.admin {
			l.changes[0].tenantID = base.TenantID
		}
	}
	ids := s.ids.NewN(who.scope(), model.AuditIDPrefix, base.At, len(l.changes))
	out := make([]*model.AuditRecord, len(l.changes))
	for i, ch := range l.changes {
		r := base
		r.ID = ids[i]
		r.ObjectID, r.Version = ch.objectID, ch.version
		if ch.tenantID != "" {
			r.TenantID = ch.tenantID
		}
		if ch.note != "" {
			r.Note = ch.note
		}
		if ch.before != nil || ch.after != nil {
			r.Diff = auditDiff(ch.before, ch.after)
		}
		if ch.previous != nil {
			r.Previous, _ = json.Marshal(ch.previous)
		}
		out[i] = &r
	}
	return out
}

// auditDiff is the JSON object of the top-level members that differ
// between before and after (either may be nil), each {before, after};
// nil when nothing differs.
func auditDiff(before, after any) json.RawMessage {
	b, a := members(before), members(after)
	names := make([]string, 0, len(b)+len(a))
	for k := range b {
		names = append(names, k)
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	diff := map[string]map[string]json.RawMessage{}
	for _, k := range names {
		bv, inB := b[k]
		av, inA := a[k]
		if auditSkipped[k] || inB && inA && bytes.Equal(bv, av) {
			continue
		}
		ch := map[string]json.RawMessage{}
		if inB {
			ch["before"] = shown(bv)
		}
		if inA {
			ch["after"] = shown(av)
		}
		diff[k] = ch
	}
	if len(diff) == 0 {
		return nil
	}
	out, _ := json.Marshal(diff)
	return out
}

// members are v's JSON members (none for nil).
func members(v any) map[string]json.RawMessage {
	if v == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	for k := range auditDurations {
		var ns int64
		if v, ok := m[k]; ok && json.Unmarshal(v, &ns) == nil {
			m[k], _ = json.Marshal(time.Duration(ns).String())
		}
	}
	return m
}

// shown is v, or its size when it is too long to show.
func shown(v json.RawMessage) json.RawMessage {
	if len(v) <= auditValueMax {
		return v
	}
	return json.RawMessage(`{"bytes":` + strconv.Itoa(len(v)) + `}`)
}

// ListAudit implements GET /v1/audit.
func (s *Server) ListAudit(c echo.Context, params api.ListAuditParams) error {
	after, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	who := callerOf(c)
	limit := s.pageSize(params.Limit)
	p := &store.AuditListParams{TenantID: who.tenantID, ObjectID: deref(params.ObjectId, ""), After: after, Limit: min(limit+1, 1000)}
	if params.TenantId != nil {
		if !who.admin {
			return invalid("tenantId", "only the admin key selects a tenant; a tenant key sees its own records")
		}
		p.TenantID = *params.TenantId
	}
	if p.From, p.To, err = timeRange(params.From, params.To); err != nil {
		return err
	}
	items, err := s.store.AuditList(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := api.AuditList{Items: make([]api.AuditRecord, 0, min(len(items), limit))}
	for i, r := range items {
		if i == limit {
			break
		}
		out.Items = append(out.Items, auditOut(r))
	}
	if len(items) > limit {
		out.NextCursor = encodeCursor(items[limit-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}

func auditOut(r *model.AuditRecord) api.AuditRecord {
	o := api.AuditRecord{Id: r.ID, At: r.At, TenantId: r.TenantID, Action: r.Action}
	if r.KeyPrefix != "" {
		o.KeyPrefix = &r.KeyPrefix
	}
	if r.ObjectID != "" {
		o.ObjectId = &r.ObjectID
	}
	if r.Version != 0 {
		o.Version = &r.Version
	}
	if r.Note != "" {
		o.Note = &r.Note
	}
	if r.RequestID != "" {
		o.RequestId = &r.RequestID
	}
	if len(r.Diff) > 0 {
		var d map[string]api.AuditChange
		if json.Unmarshal(r.Diff, &d) == nil {
			o.Diff = &d
		}
	}
	return o
}

// versionsReadMax bounds the audit records a list of versions reads.
const versionsReadMax = 10000

// ListScheduleVersions implements GET /v1/schedules/{id}/versions: the
// current schedule, then the versions its audit records kept (each
// change's record keeps the version it replaced), newest first. Who and
// when of a version come from the record that stored it.
func (s *Server) ListScheduleVersions(c echo.Context, id api.ID, params api.ListScheduleVersionsParams) error {
	cur, err := decodeCursor(params.Cursor)
	if err != nil {
		return err
	}
	below := int64(0) // versions below it (0: from the newest)
	if cur != "" {
		if below, err = strconv.ParseInt(cur, 10, 64); err != nil || below < 1 {
			return badCursor()
		}
	}
	ctx := c.Request().Context()
	tenant := callerOf(c).tenantID
	m, err := s.store.ScheduleGet(ctx, tenant, id)
	if err != nil {
		return err
	}
	var recs []*model.AuditRecord
	p := &store.AuditListParams{TenantID: tenant, ObjectID: id, Limit: 1000}
	for len(recs) < versionsReadMax {
		page, err := s.store.AuditList(ctx, p)
		if err != nil {
			return err
		}
		recs = append(recs, page...)
		if len(page) < p.Limit {
			break
		}
		p.After = page[len(page)-1].ID
	}
	by := map[int64]*model.AuditRecord{} // the record that stored a version
	kept := map[int64]*model.Schedule{m.Version: m}
	for _, r := range recs {
		// The first record of a version stored it; later ones (a trigger)
		// only name it.
		if r.Version > 0 && by[r.Version] == nil {
			by[r.Version] = r
		}
		if len(r.Previous) > 0 {
			var old model.Schedule
			if json.Unmarshal(r.Previous, &old) == nil && old.ID == m.ID && kept[old.Version] == nil {
				kept[old.Version] = &old
			}
		}
	}
	versions := make([]int64, 0, len(kept))
	for v := range kept {
		if below == 0 || v < below {
			versions = append(versions, v)
		}
	}
	slices.SortFunc(versions, func(a, b int64) int { return int(b - a) })
	limit := s.pageSize(params.Limit)
	out := api.ScheduleVersionList{Items: []api.ScheduleVersion{}}
	for i, v := range versions {
		if i == limit {
			out.NextCursor = encodeCursor(strconv.FormatInt(versions[i-1], 10))
			break
		}
		sm := kept[v]
		o, err := s.scheduleOut(sm)
		if err != nil {
			return err
		}
		item := api.ScheduleVersion{Version: v, At: sm.UpdatedAt, Current: v == m.Version, Schedule: *o}
		if r := by[v]; r != nil {
			item.At = r.At
			item.Action = &r.Action
			if r.KeyPrefix != "" {
				item.KeyPrefix = &r.KeyPrefix
			}
			if r.Note != "" {
				item.Note = &r.Note
			}
			if r.RequestID != "" {
				item.RequestId = &r.RequestID
			}
		}
		out.Items = append(out.Items, item)
	}
	return c.JSON(http.StatusOK, out)
}

// batchAuditNote is the note of a batch create's one record: how many
// schedules it created and the range of their ids.
func batchAuditNote(ids []string) string {
	if len(ids) == 0 {
		return "created 0 schedules"
	}
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString("created ")
	b.WriteString(strconv.Itoa(len(ids)))
	b.WriteString(" schedules, ids ")
	b.WriteString(ids[0])
	if len(ids) > 1 {
		b.WriteString(" to ")
		b.WriteString(ids[len(ids)-1])
	}
	return b.String()
}
