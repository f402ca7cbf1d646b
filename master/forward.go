package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/internal/logkey"
	"github.com/schedulerd/schedulerd/model"
)

// TokenOwners tells which instance writes the tokens of an event's policy:
// the holder of the event's queue shard, whose throttle runs the policy's
// bucket. A release or extend that reaches another instance is forwarded
// there, so that every token write of a policy goes through one process
// (early dispatch relies on it; see throttle/early.go).
type TokenOwners interface {
	// TokenOwner returns "" when this instance owns e's tokens, otherwise
	// the API base URL of the instance that does. model.ErrUnavailable when
	// no live owner with an address is known.
	TokenOwner(ctx context.Context, e *model.Event) (string, error)
}

// ForwardedHeader marks a release or extend forwarded by another instance
// to the owner of the event's tokens. An instance that gets one and does
// not own them (the shard moved meanwhile) answers 503 instead of
// forwarding again.
const ForwardedHeader = "Schedulerd-Forwarded"

// forwardTimeout bounds one forwarded call, the owner's store writes
// included.
const forwardTimeout = 10 * time.Second

// maxForwardReply bounds the owner's reply that is passed on.
const maxForwardReply = 64 << 10

// forwardTokens forwards the release or extend c (whose decoded body is
// in) of e to the instance that owns e's tokens, and answers with its
// reply. It reports false, doing nothing, when this instance serves the
// call itself (it owns the tokens, or no TokenOwners is configured). When
// the owner is unknown or unreachable the answer is 503 with Retry-After,
// so that the consumer tries again.
func (s *Server) forwardTokens(c echo.Context, e *model.Event, in any) (bool, error) {
	if s.owners == nil {
		return false, nil
	}
	ctx := c.Request().Context()
	owner, err := s.owners.TokenOwner(ctx, e)
	switch {
	case errors.Is(err, model.ErrUnavailable):
		return true, unavailable("no instance owns the event's policy right now; retry")
	case err != nil:
		return true, err
	case owner == "":
		return false, nil
	case c.Request().Header.Get(ForwardedHeader) != "":
		return true, unavailable("the event's policy moved to another instance; retry")
	}
	body, err := json.Marshal(in)
	if err != nil {
		return true, err
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(owner, "/")+c.Request().URL.Path, bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	req.Header.Set(ForwardedHeader, "1")
	s.injectTrace(c, req.Header)
	for _, h := range []string{echo.HeaderAuthorization, echo.HeaderXRequestID} {
		if v := c.Request().Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := s.forwarder.Do(req)
	if err != nil {
		s.log.Warn().Err(err).Str(logkey.Event, e.ID).Str("owner", owner).Msg("forwarding to the policy's owner failed")
		return true, unavailable("the instance that owns the event's policy did not answer; retry")
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardReply))
	if err != nil {
		s.log.Warn().Err(err).Str(logkey.Event, e.ID).Str("owner", owner).Msg("reading the policy owner's answer failed")
		return true, unavailable("the instance that owns the event's policy did not answer; retry")
	}
	s.forwards.Add(1)
	for _, h := range []string{"Retry-After", echo.HeaderXRequestID} {
		if v := resp.Header.Get(h); v != "" {
			c.Response().Header().Set(h, v)
		}
	}
	return true, c.Blob(resp.StatusCode, resp.Header.Get(echo.HeaderContentType), reply)
}

// TokenForwards counts the releases and extends this instance forwarded
// to the owner of their event's policy and got an answer for.
func (s *Server) TokenForwards() int64 { return s.forwards.Load() }
