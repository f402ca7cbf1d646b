package master

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
)

// createFunc performs a create with the given new object id and returns the
// status and the response body.
type createFunc func(id string) (int, any, error)

// recoverFunc returns the answer for an object that already exists under the
// id derived from an Idempotency-Key but has no idempotency record (the first
// request crashed between its write and its record). Nil: cannot recover.
type recoverFunc func(id string) (int, any, error)

// idempotent runs a create under the request's Idempotency-Key, if any.
//
// Without a key it runs create with a random id. With a key: a stored record
// for the same request is replayed; one for another request answers 422. Else
// the object gets an id derived from the key, so concurrent retries collide in
// the store (ErrConflict) instead of making duplicates; the loser waits for
// the winner's record and replays it. Only successful answers are recorded,
// sealed (see sealer): the record holds no clear answer.
func (s *Server) idempotent(c echo.Context, prefix string, create createFunc, recoverObj recoverFunc) error {
	key := c.Request().Header.Get("Idempotency-Key")
	if key == "" {
		status, body, err := create(s.ids.newID(callerOf(c).scope(), prefix))
		if err != nil {
			return err
		}
		return c.JSON(status, body)
	}
	ctx := c.Request().Context()
	scope := callerOf(c).scope()
	raw, _ := c.Get(ctxRawBody).([]byte)
	sum := sha256.Sum256([]byte(c.Request().Method + " " + c.Request().URL.Path + "\n" + string(raw)))
	hash := hex.EncodeToString(sum[:])

	rec, err := s.store.IdempotencyGet(ctx, scope, key)
	switch {
	case err == nil:
		return s.replay(c, rec, hash)
	case !errors.Is(err, model.ErrNotFound):
		return err
	}

	id := idFor(prefix, scope, key)
	status, body, err := create(id)
	if errors.Is(err, model.ErrConflict) {
		// Someone created the object with this id: a concurrent retry (wait
		// for its record) or a first attempt that crashed before recording.
		deadline := s.now().Add(s.cfg.IdempotencyWait)
		for {
			rec, gerr := s.store.IdempotencyGet(ctx, scope, key)
			if gerr == nil {
				return s.replay(c, rec, hash)
			}
			if !errors.Is(gerr, model.ErrNotFound) {
				return gerr
			}
			if !s.now().Before(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if recoverObj == nil {
			return conflict("a request with this Idempotency-Key is in progress or failed; use a new key")
		}
		status, body, err = recoverObj(id)
		if errors.Is(err, model.ErrNotFound) {
			return conflict("the object conflicts with an existing one")
		}
	}
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	sealed, err := s.seal.seal(b, scope, key, hash)
	if err != nil {
		return err
	}
	rec = &model.IdempotencyRecord{TenantID: scope, Key: key, RequestHash: hash, Status: status, Body: sealed, CreatedAt: s.now().UTC()}
	if existing, perr := s.store.IdempotencyPut(ctx, rec); perr != nil {
		if errors.Is(perr, model.ErrConflict) && existing != nil {
			return s.replay(c, existing, hash)
		}
		// The object exists; a retry will find it through recoverObj.
		s.log.Warn().Err(perr).Str("key", key).Msg("storing idempotency record failed")
	}
	return c.JSONBlob(status, b)
}

func (s *Server) replay(c echo.Context, rec *model.IdempotencyRecord, hash string) error {
	if rec.RequestHash != hash {
		return &problem{status: http.StatusUnprocessableEntity, kind: "idempotency-key-reused", title: "Idempotency-Key reused",
			detail: "this Idempotency-Key was used with a different request",
			fields: []api.FieldProblem{{Field: "Idempotency-Key", Reason: "already used with a different request"}}}
	}
	body, err := s.seal.open(rec.Body, rec.TenantID, rec.Key, rec.RequestHash)
	if err != nil {
		// Sealed under another secret: the object exists, its answer is lost.
		s.log.Warn().Err(err).Str("key", rec.Key).Msg("replaying idempotency record")
		return conflict("the first answer to this Idempotency-Key cannot be read (the server's secret changed); use a new key")
	}
	c.Response().Header().Set("Idempotent-Replayed", "true")
	return c.JSONBlob(rec.Status, body)
}
