package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var apiKeyTests = []namedTest{
	{"CreateGetList", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		// Inserted newest first to check that APIKeyList orders by age.
		keys := []*model.APIKey{
			{ID: "k2", TenantID: "A", Hash: model.HashAPIKey("clear2"), Prefix: "cle2", CreatedAt: at(2 * time.Second)},
			{ID: "k1", TenantID: "A", Hash: model.HashAPIKey("clear1"), Prefix: "cle1", CreatedAt: at(time.Second)},
			{ID: "k3", TenantID: "B", Hash: model.HashAPIKey("clear3"), Prefix: "cle3", CreatedAt: at(0)},
		}
		for _, k := range keys {
			requireNoError(t, d.APIKeyCreate(ctx, k), "APIKeyCreate "+k.ID)
		}

		got, err := d.APIKeyGetByHash(ctx, model.HashAPIKey("clear1"))
		requireNoError(t, err, "APIKeyGetByHash")
		requireEqual(t, got.ID, "k1", "ID")
		requireEqual(t, got.TenantID, "A", "TenantID")
		requireEqual(t, got.Prefix, "cle1", "Prefix")
		requireTime(t, got.CreatedAt, at(time.Second), "CreatedAt")
		if got.RevokedAt != nil {
			t.Fatalf("RevokedAt: got %v, want nil", got.RevokedAt)
		}

		_, err = d.APIKeyGetByHash(ctx, model.HashAPIKey("unknown"))
		requireIs(t, err, model.ErrNotFound, "APIKeyGetByHash unknown")

		listA, err := d.APIKeyList(ctx, "A")
		requireNoError(t, err, "APIKeyList A")
		ids := make([]string, len(listA))
		for i, k := range listA {
			ids[i] = k.ID
		}
		requireIDs(t, ids, []string{"k1", "k2"}, "APIKeyList A")

		listB, err := d.APIKeyList(ctx, "B")
		requireNoError(t, err, "APIKeyList B")
		requireEqual(t, len(listB), 1, "APIKeyList B length")
		requireEqual(t, listB[0].ID, "k3", "APIKeyList B")

		listC, err := d.APIKeyList(ctx, "C")
		requireNoError(t, err, "APIKeyList C")
		requireEqual(t, len(listC), 0, "APIKeyList of a tenant without keys")
	}},
	{"CreateConflicts", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		requireNoError(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k1", TenantID: "A", Hash: "h1", CreatedAt: base}), "APIKeyCreate")
		requireIs(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k1", TenantID: "A", Hash: "h2", CreatedAt: base}), model.ErrConflict, "same id")
		requireIs(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k2", TenantID: "B", Hash: "h1", CreatedAt: base}), model.ErrConflict, "same hash")
		_, err := d.APIKeyGetByHash(ctx, "h2")
		requireIs(t, err, model.ErrNotFound, "rejected key must not be stored")
	}},
	{"Revoke", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		requireNoError(t, d.APIKeyCreate(ctx, &model.APIKey{ID: "k1", TenantID: "A", Hash: "h1", CreatedAt: base}), "APIKeyCreate")

		requireIs(t, d.APIKeyRevoke(ctx, "B", "k1", at(time.Second)), model.ErrNotFound, "revoke by another tenant")
		got, err := d.APIKeyGetByHash(ctx, "h1")
		requireNoError(t, err, "APIKeyGetByHash")
		if got.RevokedAt != nil {
			t.Fatalf("another tenant revoked the key")
		}

		requireNoError(t, d.APIKeyRevoke(ctx, "A", "k1", at(2*time.Second)), "APIKeyRevoke")
		requireNoError(t, d.APIKeyRevoke(ctx, "A", "k1", at(3*time.Second)), "APIKeyRevoke twice")
		got, err = d.APIKeyGetByHash(ctx, "h1")
		requireNoError(t, err, "APIKeyGetByHash revoked")
		requireTimePtr(t, got.RevokedAt, ptr(at(2*time.Second)), "RevokedAt keeps the first time")

		requireIs(t, d.APIKeyRevoke(ctx, "A", "nope", base), model.ErrNotFound, "revoke unknown")
	}},
}
