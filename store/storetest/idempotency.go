package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var idempotencyTests = []namedTest{
	{"PutGetDelete", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		first := &model.IdempotencyRecord{TenantID: "A", Key: "k", RequestHash: "rh1", Status: 201, Body: []byte(`{"id":"s1"}`), CreatedAt: base}
		_, err := d.IdempotencyPut(ctx, first)
		requireNoError(t, err, "IdempotencyPut")

		second := &model.IdempotencyRecord{TenantID: "A", Key: "k", RequestHash: "rh2", Status: 400, Body: []byte(`{}`), CreatedAt: at(time.Second)}
		prev, err := d.IdempotencyPut(ctx, second)
		requireIs(t, err, model.ErrConflict, "IdempotencyPut twice")
		if prev == nil {
			t.Fatalf("IdempotencyPut twice: want the existing record")
		}
		requireEqual(t, prev.RequestHash, "rh1", "existing RequestHash")
		requireEqual(t, prev.Status, 201, "existing Status")

		got, err := d.IdempotencyGet(ctx, "A", "k")
		requireNoError(t, err, "IdempotencyGet")
		requireEqual(t, got.RequestHash, "rh1", "RequestHash")
		requireEqual(t, got.Status, 201, "Status")
		requireEqual(t, string(got.Body), `{"id":"s1"}`, "Body")
		requireTime(t, got.CreatedAt, base, "CreatedAt")

		_, err = d.IdempotencyGet(ctx, "B", "k")
		requireIs(t, err, model.ErrNotFound, "IdempotencyGet of another tenant")

		// The same key in another tenant is a different record.
		_, err = d.IdempotencyPut(ctx, &model.IdempotencyRecord{TenantID: "B", Key: "k", RequestHash: "rhB", Status: 201, CreatedAt: at(time.Hour)})
		requireNoError(t, err, "IdempotencyPut same key other tenant")

		n, err := d.IdempotencyDeleteBefore(ctx, at(time.Minute))
		requireNoError(t, err, "IdempotencyDeleteBefore")
		requireEqual(t, n, 1, "IdempotencyDeleteBefore deleted")
		_, err = d.IdempotencyGet(ctx, "A", "k")
		requireIs(t, err, model.ErrNotFound, "IdempotencyGet after delete")
		_, err = d.IdempotencyGet(ctx, "B", "k")
		requireNoError(t, err, "IdempotencyGet of the newer record")
	}},
	{"PutMany", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		_, err := d.IdempotencyPut(ctx, &model.IdempotencyRecord{TenantID: "A", Key: "old", RequestHash: "rh0", Status: 201, Body: []byte(`{}`), CreatedAt: base})
		requireNoError(t, err, "IdempotencyPut")
		rec := func(tenant, key, hash string) *model.IdempotencyRecord {
			return &model.IdempotencyRecord{TenantID: tenant, Key: key, RequestHash: hash, Status: 201, Body: []byte(`{"k":"` + key + `"}`), CreatedAt: base}
		}
		existing, err := d.IdempotencyPutMany(ctx, []*model.IdempotencyRecord{
			rec("A", "k1", "rh1"), rec("A", "old", "rhX"), rec("B", "old", "rhB"), rec("A", "k1", "rhY"),
		})
		requireNoError(t, err, "IdempotencyPutMany")
		requireEqual(t, len(existing), 4, "results")
		if existing[0] != nil || existing[2] != nil {
			t.Fatalf("IdempotencyPutMany: new records reported as existing: %+v, %+v", existing[0], existing[2])
		}
		if existing[1] == nil || existing[3] == nil {
			t.Fatalf("IdempotencyPutMany: want the existing records for the taken keys, got %+v, %+v", existing[1], existing[3])
		}
		requireEqual(t, existing[1].RequestHash, "rh0", "existing record of a stored key")
		requireEqual(t, existing[3].RequestHash, "rh1", "existing record of a key repeated in the call")
		for _, c := range []struct{ tenant, key, hash string }{{"A", "k1", "rh1"}, {"A", "old", "rh0"}, {"B", "old", "rhB"}} {
			got, err := d.IdempotencyGet(ctx, c.tenant, c.key)
			requireNoError(t, err, "IdempotencyGet "+c.tenant+"/"+c.key)
			requireEqual(t, got.RequestHash, c.hash, "RequestHash of "+c.tenant+"/"+c.key)
		}
	}},
}
