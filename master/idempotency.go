package master

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/create"
	"github.com/schedulerd/schedulerd/internal/idempotency"
	"github.com/schedulerd/schedulerd/model"
)

// createFunc performs a create with the given new object id and returns the
// status and the response body.
type createFunc func(id string) (int, any, error)

// recoverFunc returns the answer for an object that already exists under the
// id derived from an Idempotency-Key but has no idempotency record (the first
// request crashed between its write and its record). Nil: cannot recover.
type recoverFunc func(id string) (int, any, error)

// idempotent runs the create of an object other than a schedule (those are
// the create package's) under the request's Idempotency-Key, if any.
//
// Without a key it runs create with a new id. With a key: an answer
// recorded for the same request is replayed; one for another request
// answers 422. Else the object gets an id derived from the key, so
// concurrent retries collide in the store (ErrConflict) instead of making
// duplicates; the loser waits for the winner's record and replays it, or
// when none comes recovers the object (recoverObj). Only
// successful answers are recorded (internal/idempotency).
func (s *Server) idempotent(c echo.Context, prefix string, create createFunc, recoverObj recoverFunc) error {
	key := c.Request().Header.Get("Idempotency-Key")
	scope := callerOf(c).scope()
	if key == "" {
		status, body, err := create(s.ids.New(scope, prefix, s.now()))
		if err != nil {
			return err
		}
		return c.JSON(status, body)
	}
	ctx := c.Request().Context()
	hash := requestHash(c)
	a, err := s.records.Get(ctx, scope, key, hash)
	if err != nil || a != nil {
		return s.answerRecorded(c, a, err)
	}
	id := model.KeyedID(prefix, scope, key)
	status, body, err := create(id)
	if errors.Is(err, model.ErrConflict) {
		// A concurrent retry (wait for its record) or a first attempt that
		// crashed before recording.
		a, err := s.records.Await(ctx, scope, key, hash)
		if err != nil || a != nil {
			return s.answerRecorded(c, a, err)
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
	found, err := s.records.Put(ctx, []idempotency.Entry{{Scope: scope, Key: key, Hash: hash, Answer: idempotency.Answer{Status: status, Body: b}}})
	if err != nil {
		// The object exists; its answer is not recorded.
		s.log.Warn().Err(err).Str("key", key).Msg("storing idempotency record failed")
	} else if f := found[0]; f != (idempotency.Found{}) {
		return s.answerRecorded(c, f.Answer, f.Err)
	}
	return c.JSONBlob(status, b)
}

// requestHash identifies the request an Idempotency-Key comes with.
func requestHash(c echo.Context) string {
	raw, _ := c.Get(ctxRawBody).([]byte)
	return idempotency.Hash([]byte(c.Request().Method+" "+c.Request().URL.Path+"\n"), raw)
}

// answerRecorded answers with a, an answer recorded under the request's
// Idempotency-Key, or with the error of reading it.
func (s *Server) answerRecorded(c echo.Context, a *idempotency.Answer, err error) error {
	if err != nil {
		return keyProblem(err, "Idempotency-Key", "request")
	}
	c.Response().Header().Set("Idempotent-Replayed", "true")
	return c.JSONBlob(a.Status, a.Body)
}

// keyProblem is the answer to err of a create under an idempotency key
// named field, given with a what (request, item).
func keyProblem(err error, field, what string) error {
	switch {
	case errors.Is(err, idempotency.ErrReused):
		return &problem{status: http.StatusUnprocessableEntity, kind: "idempotency-key-reused", title: "Idempotency-Key reused",
			detail: "this " + field + " was used with a different " + what,
			fields: []api.FieldProblem{{Field: field, Reason: "already used with a different " + what}}}
	case errors.Is(err, idempotency.ErrUnreadable):
		return conflict(idempotency.ErrUnreadable.Error())
	case errors.Is(err, create.ErrConflict):
		return conflict("the " + what + " conflicts with an existing object")
	}
	var full *create.DiskFullError
	if errors.As(err, &full) {
		return &problem{status: http.StatusInsufficientStorage, kind: "insufficient-storage", title: "Insufficient Storage", detail: full.Reason}
	}
	return err
}
