package storetest

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/store"
)

var leaseTests = []namedTest{
	{"Advertise", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		l, err := d.LeaseAcquire(ctx, "g/member/a", "a", base, time.Minute)
		requireNoError(t, err, "LeaseAcquire")
		requireEqual(t, l.Addr, "", "Addr before any advertisement")
		requireIs(t, d.LeaseAdvertise(ctx, "g/member/a", "b", l.Fence, "http://b"), model.ErrConflict, "LeaseAdvertise by a non-owner")
		requireIs(t, d.LeaseAdvertise(ctx, "g/member/a", "a", l.Fence+1, "http://a"), model.ErrConflict, "LeaseAdvertise with a wrong fence")
		requireIs(t, d.LeaseAdvertise(ctx, "g/member/none", "a", 1, "http://a"), model.ErrConflict, "LeaseAdvertise of a lease never taken")
		requireNoError(t, d.LeaseAdvertise(ctx, "g/member/a", "a", l.Fence, "http://a:8080"), "LeaseAdvertise")
		ls, err := d.LeaseList(ctx, "g/member/")
		requireNoError(t, err, "LeaseList")
		if len(ls) != 1 {
			t.Fatalf("LeaseList: %d leases, want 1", len(ls))
		}
		requireEqual(t, ls[0].Addr, "http://a:8080", "Addr listed")
		requireTime(t, ls[0].ExpiresAt, at(time.Minute), "expiry unchanged by LeaseAdvertise")
		// Renewals keep it; another owner's acquisition clears it.
		r, err := d.LeaseAcquire(ctx, "g/member/a", "a", at(30*time.Second), time.Minute)
		requireNoError(t, err, "LeaseAcquire by the owner")
		requireEqual(t, r.Addr, "http://a:8080", "Addr after a renewal")
		o, err := d.LeaseAcquire(ctx, "g/member/a", "other", at(5*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire of the expired lease")
		requireEqual(t, o.Addr, "", "Addr after another owner took the lease")
	}},
	{"AcquireRenewRelease", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		l, err := d.LeaseAcquire(ctx, "shard/1", "a", base, time.Minute)
		requireNoError(t, err, "LeaseAcquire")
		requireEqual(t, l.Owner, "a", "Owner")
		requireEqual(t, l.Name, "shard/1", "Name")
		requireTime(t, l.ExpiresAt, at(time.Minute), "ExpiresAt")
		if l.Fence <= 0 {
			t.Fatalf("Fence: got %d, want > 0", l.Fence)
		}
		fence := l.Fence

		_, err = d.LeaseAcquire(ctx, "shard/1", "b", at(30*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseAcquire held by another owner")

		again, err := d.LeaseAcquire(ctx, "shard/1", "a", at(30*time.Second), time.Minute)
		requireNoError(t, err, "LeaseAcquire by the owner")
		requireEqual(t, again.Fence, fence, "re-acquire keeps the fence")
		requireTime(t, again.ExpiresAt, at(90*time.Second), "re-acquire extends")

		r, err := d.LeaseRenew(ctx, "shard/1", "a", fence, at(40*time.Second), time.Minute)
		requireNoError(t, err, "LeaseRenew")
		requireEqual(t, r.Fence, fence, "renew keeps the fence")
		requireTime(t, r.ExpiresAt, at(100*time.Second), "renew extends")

		_, err = d.LeaseRenew(ctx, "shard/1", "b", fence, at(40*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew by a non-owner")
		_, err = d.LeaseRenew(ctx, "shard/1", "a", fence-1, at(40*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew with a wrong fence")
		_, err = d.LeaseRenew(ctx, "shard/none", "a", 1, at(40*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew of a lease never taken")

		// Expired but not taken: the owner may still renew.
		r, err = d.LeaseRenew(ctx, "shard/1", "a", fence, at(10*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseRenew after expiry")
		requireEqual(t, r.Fence, fence, "renew after expiry keeps the fence")

		requireIs(t, d.LeaseRelease(ctx, "shard/1", "b", fence), model.ErrConflict, "LeaseRelease by a non-owner")
		requireIs(t, d.LeaseRelease(ctx, "shard/1", "a", fence+1), model.ErrConflict, "LeaseRelease with a wrong fence")
		requireNoError(t, d.LeaseRelease(ctx, "shard/1", "a", fence), "LeaseRelease")
		_, err = d.LeaseRenew(ctx, "shard/1", "a", fence, at(10*time.Minute), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseRenew after release")

		// Released: free for anybody at once, with a larger fence.
		b, err := d.LeaseAcquire(ctx, "shard/1", "b", at(10*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire after release")
		requireEqual(t, b.Owner, "b", "new Owner")
		if b.Fence <= fence {
			t.Fatalf("fence after release: got %d, want > %d", b.Fence, fence)
		}
	}},
	{"ExpireAndSteal", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		a, err := d.LeaseAcquire(ctx, "partition/0", "a", base, time.Minute)
		requireNoError(t, err, "LeaseAcquire a")

		_, err = d.LeaseAcquire(ctx, "partition/0", "b", at(59*time.Second), time.Minute)
		requireIs(t, err, model.ErrConflict, "LeaseAcquire before expiry")

		b, err := d.LeaseAcquire(ctx, "partition/0", "b", at(2*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire after expiry")
		requireEqual(t, b.Owner, "b", "Owner")
		if b.Fence <= a.Fence {
			t.Fatalf("fence after steal: got %d, want > %d", b.Fence, a.Fence)
		}

		_, err = d.LeaseRenew(ctx, "partition/0", "a", a.Fence, at(2*time.Minute), time.Minute)
		requireIs(t, err, model.ErrConflict, "old owner renews after the steal")
		requireIs(t, d.LeaseRelease(ctx, "partition/0", "a", a.Fence), model.ErrConflict, "old owner releases after the steal")

		c, err := d.LeaseAcquire(ctx, "partition/0", "a", at(10*time.Minute), time.Minute)
		requireNoError(t, err, "LeaseAcquire back by a")
		if c.Fence <= b.Fence {
			t.Fatalf("fence after second steal: got %d, want > %d", c.Fence, b.Fence)
		}
	}},
	{"List", func(t *testing.T, d store.Driver) {
		ctx := t.Context()
		for _, name := range []string{"shard/0", "shard/1", "partition/0"} {
			_, err := d.LeaseAcquire(ctx, name, "a", base, time.Minute)
			requireNoError(t, err, "LeaseAcquire "+name)
		}
		got, err := d.LeaseList(ctx, "shard/")
		requireNoError(t, err, "LeaseList")
		names := make([]string, len(got))
		for i, l := range got {
			names[i] = l.Name
			requireEqual(t, l.Owner, "a", "Owner of "+l.Name)
		}
		requireSameIDs(t, names, []string{"shard/0", "shard/1"}, "LeaseList")
	}},
}
