package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var auditTests = []namedTest{
	{"AppendListByTenantObjectAndTime", testAuditList},
	{"AppendKeepsExisting", testAuditAppendKeeps},
	{"DeleteBefore", testAuditDeleteBefore},
}

// auditRecord is a record of tenant on object made at base+sec seconds,
// with the id the master gives it (model.IDSource).
func auditRecord(ids *model.IDSource, tenant, object string, sec int) *model.AuditRecord {
	at := base.Add(time.Duration(sec) * time.Second)
	return &model.AuditRecord{
		ID: ids.New(tenant, model.AuditIDPrefix, at), At: at, TenantID: tenant, KeyPrefix: "sk_abc",
		Action: "updateSchedule", ObjectID: object, Version: int64(sec + 1),
		Diff: json.RawMessage(`{"name":{"before":"a","after":"b"}}`), Note: "n", RequestID: "req-" + object,
	}
}

func auditIDs(rs []*model.AuditRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func testAuditList(t *testing.T, d store.Driver) {
	ctx := context.Background()
	var ids model.IDSource
	a1 := auditRecord(&ids, "t1", "sch_1", 0)
	a1.Previous = json.RawMessage(`{"id":"sch_1","version":1}`)
	a2 := auditRecord(&ids, "t1", "sch_2", 10)
	b1 := auditRecord(&ids, "t2", "sch_3", 20)
	a3 := auditRecord(&ids, "t1", "sch_1", 30)
	requireNoError(t, d.AuditAppend(ctx, []*model.AuditRecord{a1, a2}), "append")
	requireNoError(t, d.AuditAppend(ctx, []*model.AuditRecord{b1, a3}), "append")
	requireNoError(t, d.AuditAppend(ctx, nil), "append none")

	list := func(p store.AuditListParams) []*model.AuditRecord {
		t.Helper()
		if p.Limit == 0 {
			p.Limit = 100
		}
		got, err := d.AuditList(ctx, &p)
		requireNoError(t, err, "audit list")
		return got
	}
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t1"})), []string{a1.ID, a2.ID, a3.ID}, "tenant t1")
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t2"})), []string{b1.ID}, "tenant t2")
	requireIDs(t, auditIDs(list(store.AuditListParams{})), []string{a1.ID, a2.ID, b1.ID, a3.ID}, "every tenant")
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t1", ObjectID: "sch_1"})), []string{a1.ID, a3.ID}, "object")
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t2", ObjectID: "sch_1"})), nil, "object of another tenant")
	requireIDs(t, auditIDs(list(store.AuditListParams{ObjectID: "sch_3"})), []string{b1.ID}, "object, every tenant")
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t1", From: base.Add(10 * time.Second), To: base.Add(30 * time.Second)})),
		[]string{a2.ID}, "[from, to)")
	requireIDs(t, auditIDs(list(store.AuditListParams{From: base.Add(5 * time.Second)})), []string{a2.ID, b1.ID, a3.ID}, "from, every tenant")
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t1", Limit: 2})), []string{a1.ID, a2.ID}, "page 1")
	requireIDs(t, auditIDs(list(store.AuditListParams{TenantID: "t1", After: a2.ID, Limit: 2})), []string{a3.ID}, "page 2")

	got := list(store.AuditListParams{TenantID: "t1", ObjectID: "sch_1", Limit: 1})[0]
	requireEqual(t, got.TenantID, "t1", "tenant")
	requireEqual(t, got.KeyPrefix, "sk_abc", "key prefix")
	requireEqual(t, got.Action, "updateSchedule", "action")
	requireEqual(t, got.Version, int64(1), "version")
	requireEqual(t, got.Note, "n", "note")
	requireEqual(t, got.RequestID, "req-sch_1", "request id")
	requireTime(t, got.At, a1.At, "at")
	requireJSON(t, got.Diff, a1.Diff, "diff")
	requireJSON(t, got.Previous, a1.Previous, "previous")
}

func testAuditAppendKeeps(t *testing.T, d store.Driver) {
	ctx := context.Background()
	var ids model.IDSource
	r := auditRecord(&ids, "t1", "pol_1", 0)
	requireNoError(t, d.AuditAppend(ctx, []*model.AuditRecord{r}), "append")
	again := *r
	again.Note = "changed"
	r2 := auditRecord(&ids, "t1", "pol_1", 1)
	requireNoError(t, d.AuditAppend(ctx, []*model.AuditRecord{&again, r2}), "append again")
	got, err := d.AuditList(ctx, &store.AuditListParams{TenantID: "t1", Limit: 10})
	requireNoError(t, err, "list")
	requireIDs(t, auditIDs(got), []string{r.ID, r2.ID}, "records")
	requireEqual(t, got[0].Note, "n", "the first write stays")
}

func testAuditDeleteBefore(t *testing.T, d store.Driver) {
	ctx := context.Background()
	var ids model.IDSource
	old1 := auditRecord(&ids, "t1", "sch_1", 0)
	old2 := auditRecord(&ids, "t2", "sch_2", 1)
	keep := auditRecord(&ids, "t1", "sch_1", 5)
	requireNoError(t, d.AuditAppend(ctx, []*model.AuditRecord{old1, old2, keep}), "append")
	n, err := d.AuditDeleteBefore(ctx, base.Add(5*time.Second), 1)
	requireNoError(t, err, "delete")
	requireEqual(t, n, 1, "deleted, limit 1")
	n, err = d.AuditDeleteBefore(ctx, base.Add(5*time.Second), 10)
	requireNoError(t, err, "delete")
	requireEqual(t, n, 1, "deleted, the rest")
	got, err := d.AuditList(ctx, &store.AuditListParams{Limit: 10})
	requireNoError(t, err, "list")
	requireIDs(t, auditIDs(got), []string{keep.ID}, "kept")
	got, err = d.AuditList(ctx, &store.AuditListParams{ObjectID: "sch_1", Limit: 10})
	requireNoError(t, err, "list by object")
	requireIDs(t, auditIDs(got), []string{keep.ID}, "kept, by object")
}
