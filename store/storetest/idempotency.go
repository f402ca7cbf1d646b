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
}
