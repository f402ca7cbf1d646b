package storetest

import (
	"testing"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var tenantTests = []namedTest{
	{"CreateGet", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		want := &model.Tenant{ID: "t1", Name: "Tenant One", CreatedAt: base}
		requireNoError(t, d.TenantCreate(ctx, want), "TenantCreate")

		got, err := d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet")
		requireEqual(t, got.ID, want.ID, "ID")
		requireEqual(t, got.Name, want.Name, "Name")
		requireTime(t, got.CreatedAt, want.CreatedAt, "CreatedAt")

		requireIs(t, d.TenantCreate(ctx, &model.Tenant{ID: "t1", Name: "again"}), model.ErrConflict, "duplicate TenantCreate")
		got, err = d.TenantGet(ctx, "t1")
		requireNoError(t, err, "TenantGet after duplicate")
		requireEqual(t, got.Name, want.Name, "Name after duplicate")

		_, err = d.TenantGet(ctx, "nope")
		requireIs(t, err, model.ErrNotFound, "TenantGet unknown")
	}},
}
