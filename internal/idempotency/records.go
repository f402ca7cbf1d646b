// Package idempotency keeps the answers of creates made under an
// idempotency key, so that a retry of the request gets the first answer
// instead of a second object. Answers are stored sealed (seal.go): one
// may carry a secret, such as a new API key.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/schedulerd/schedulerd/model"
)

// ErrReused: the key was recorded with another request.
var ErrReused = errors.New("idempotency key already used with a different request")

// ErrUnreadable: the key's answer was sealed under a secret the server no
// longer has; the object exists, its first answer is lost.
var ErrUnreadable = errors.New("the first answer to this idempotency key cannot be read (the server's secret changed); use a new key")

// Store keeps the records.
type Store interface {
	IdempotencyGet(ctx context.Context, tenantID, key string) (*model.IdempotencyRecord, error)
	IdempotencyPutMany(ctx context.Context, rs []*model.IdempotencyRecord) ([]*model.IdempotencyRecord, error)
}

// Answer is a recorded answer: its HTTP status and body.
type Answer struct {
	Status int
	Body   []byte
}

// Entry is an answer to record under Key in Scope (a tenant, or the
// admin key) for the request of Hash.
type Entry struct {
	Scope, Key, Hash string
	Answer
}

// Records reads and writes the records.
type Records struct {
	store Store
	seal  *sealer
	wait  time.Duration
	clock clockwork.Clock
}

// Options configure Records.
type Options struct {
	// Secret seals the answers (derived, so it may be the signing
	// secret); Previous are earlier secrets whose records still open.
	// Empty: a random key, records then replay only in this process.
	Secret   []byte
	Previous [][]byte
	// Wait is how long Await waits for a concurrent request's record.
	Wait time.Duration
	// Clock defaults to the real clock.
	Clock clockwork.Clock
}

// New returns the records of st.
func New(st Store, o Options) (*Records, error) {
	seal, err := newSealer(o.Secret, o.Previous)
	if err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	return &Records{store: st, seal: seal, wait: o.Wait, clock: o.Clock}, nil
}

// Hash identifies a request by the parts given (method and path, then the
// body, say): a key reused with other parts is ErrReused.
func Hash(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Get returns the answer recorded under key in scope for the request of
// hash; nil when there is none. ErrReused, ErrUnreadable.
func (r *Records) Get(ctx context.Context, scope, key, hash string) (*Answer, error) {
	rec, err := r.store.IdempotencyGet(ctx, scope, key)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return r.open(rec, hash)
}

// Await is Get that waits, up to Options.Wait, for the record a concurrent
// request with the same key is about to write; nil when none came.
func (r *Records) Await(ctx context.Context, scope, key, hash string) (*Answer, error) {
	found, err := r.AwaitAll(ctx, scope, []Wanted{{Key: key, Hash: hash}})
	if err != nil {
		return nil, err
	}
	return found[0].Answer, found[0].Err
}

// Wanted is a key whose record Await waits for, and the request's hash.
type Wanted struct{ Key, Hash string }

// AwaitAll is Await for several keys at once, waiting at most Options.Wait
// in all: Found per key, zero for a key whose record did not come.
func (r *Records) AwaitAll(ctx context.Context, scope string, ws []Wanted) ([]Found, error) {
	found := make([]Found, len(ws))
	deadline := r.clock.Now().Add(r.wait)
	for {
		left := 0
		for i, w := range ws {
			if found[i] != (Found{}) {
				continue
			}
			a, err := r.Get(ctx, scope, w.Key, w.Hash)
			switch {
			case errors.Is(err, ErrReused), errors.Is(err, ErrUnreadable):
				found[i].Err = err
			case err != nil:
				return nil, err
			case a != nil:
				found[i].Answer = a
			default:
				left++
			}
		}
		if left == 0 || !r.clock.Now().Before(deadline) {
			return found, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.clock.After(50 * time.Millisecond):
		}
	}
}

// Found is what Put found under an entry's key recorded before it: the
// answer to replay, or its error (ErrReused, ErrUnreadable). The zero
// Found: the entry was recorded.
type Found struct {
	Answer *Answer
	Err    error
}

// Put records es, sealed, and returns per entry what an earlier request
// recorded under its key (a concurrent request won).
func (r *Records) Put(ctx context.Context, es []Entry) ([]Found, error) {
	recs := make([]*model.IdempotencyRecord, len(es))
	now := r.clock.Now().UTC()
	for i, e := range es {
		sealed, err := r.seal.seal(e.Body, e.Scope, e.Key, e.Hash)
		if err != nil {
			return nil, err
		}
		recs[i] = &model.IdempotencyRecord{TenantID: e.Scope, Key: e.Key, RequestHash: e.Hash, Status: e.Status, Body: sealed, CreatedAt: now}
	}
	existing, err := r.store.IdempotencyPutMany(ctx, recs)
	if err != nil {
		return nil, fmt.Errorf("store %d idempotency records: %w", len(recs), err)
	}
	found := make([]Found, len(es))
	for i, old := range existing {
		if old != nil {
			found[i].Answer, found[i].Err = r.open(old, es[i].Hash)
		}
	}
	return found, nil
}

// open is the answer of rec for the request of hash.
func (r *Records) open(rec *model.IdempotencyRecord, hash string) (*Answer, error) {
	if rec.RequestHash != hash {
		return nil, ErrReused
	}
	body, err := r.seal.open(rec.Body, rec.TenantID, rec.Key, rec.RequestHash)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return &Answer{Status: rec.Status, Body: body}, nil
}
