package master

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
	"github.com/schedulerd/schedulerd/schedule"
)

// problemTypeBase prefixes the type URI of every problem.
const problemTypeBase = "https://schedulerd.dev/problems/"

// problem is an error that already knows its HTTP answer.
type problem struct {
	status     int
	kind       string // last segment of the type URI
	title      string
	detail     string
	fields     []api.FieldProblem
	retryAfter int // seconds; 0: no Retry-After header
	header     map[string]string
}

func (p *problem) Error() string {
	if p.detail != "" {
		return p.title + ": " + p.detail
	}
	return p.title
}

// fieldErrors collects the validation failures of one request.
type fieldErrors []*model.FieldError

func (fe fieldErrors) Error() string {
	parts := make([]string, len(fe))
	for i, e := range fe {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (fe fieldErrors) Is(target error) bool { return target == model.ErrInvalid }

func (fe *fieldErrors) add(field, reason string) {
	*fe = append(*fe, &model.FieldError{Field: field, Reason: reason})
}

func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return fe
}

// invalid is a 422 naming one field.
func invalid(field, reason string) error {
	return &model.FieldError{Field: field, Reason: reason}
}

func badRequest(detail string, fields ...api.FieldProblem) *problem {
	return &problem{status: http.StatusBadRequest, kind: "bad-request", title: "Request does not match the API description", detail: detail, fields: fields}
}

func notFound() *problem {
	return &problem{status: http.StatusNotFound, kind: "not-found", title: "Not Found", detail: "no such object"}
}

func conflict(detail string) *problem {
	return &problem{status: http.StatusConflict, kind: "conflict", title: "Conflict", detail: detail}
}

// nameConflict is a 409 naming the field whose value another object has.
func nameConflict(field, reason string) *problem {
	return &problem{status: http.StatusConflict, kind: "already-exists", title: "Already exists", detail: field + ": " + reason,
		fields: []api.FieldProblem{{Field: field, Reason: reason}}}
}

func unavailable(detail string) *problem {
	return &problem{status: http.StatusServiceUnavailable, kind: "unavailable", title: "Service Unavailable", detail: detail, retryAfter: 1}
}

// handleError is echo's HTTPErrorHandler: the one place where errors become
// HTTP answers. Only unexpected errors (500) are logged as errors.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := s.toProblem(err, c)
	body := api.Problem{
		Type:   problemTypeBase + p.kind,
		Title:  p.title,
		Status: p.status,
	}
	if p.detail != "" {
		body.Detail = &p.detail
	}
	if inst := c.Request().URL.Path; inst != "" {
		body.Instance = &inst
	}
	if len(p.fields) > 0 {
		body.Errors = &p.fields
	}
	h := c.Response().Header()
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	for k, v := range p.header {
		h.Set(k, v)
	}
	b, _ := json.Marshal(body)
	h.Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.status)
	if c.Request().Method != http.MethodHead {
		_, _ = c.Response().Write(b)
	}
}

func (s *Server) toProblem(err error, c echo.Context) *problem {
	var (
		p    *problem
		fe   fieldErrors
		one  *model.FieldError
		he   *echo.HTTPError
		mbe  *http.MaxBytesError
		sErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &fe), errors.As(err, (*schedule.Errors)(&fe)):
		out := make([]api.FieldProblem, len(fe))
		for i, e := range fe {
			out[i] = api.FieldProblem{Field: e.Field, Reason: e.Reason}
		}
		return &problem{status: http.StatusUnprocessableEntity, kind: "validation", title: "Invalid request", detail: fe.Error(), fields: out}
	case errors.As(err, &one):
		return &problem{status: http.StatusUnprocessableEntity, kind: "validation", title: "Invalid request", detail: one.Error(),
			fields: []api.FieldProblem{{Field: one.Field, Reason: one.Reason}}}
	case errors.Is(err, model.ErrInvalid):
		return &problem{status: http.StatusUnprocessableEntity, kind: "validation", title: "Invalid request", detail: err.Error()}
	case errors.Is(err, model.ErrNotFound):
		return notFound()
	case errors.Is(err, model.ErrConflict):
		return conflict("the object changed meanwhile or is in use; read it again and retry")
	case errors.Is(err, model.ErrUnavailable):
		s.log.Warn().Ctx(c.Request().Context()).Err(err).Str("path", c.Path()).Msg("store unavailable")
		return unavailable("the store is unavailable; retry later")
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.As(err, &sErr):
		return badRequest("the body is not valid JSON: "+sErr.Error(), api.FieldProblem{Field: "body", Reason: sErr.Error()})
	case errors.As(err, &he):
		return fromEchoError(he)
	}
	s.log.Error().Ctx(c.Request().Context()).Err(err).Str("method", c.Request().Method).Str("path", c.Path()).Msg("unexpected error")
	return &problem{status: http.StatusInternalServerError, kind: "internal", title: "Internal Server Error", detail: "an unexpected error was logged"}
}

func tooLarge(limit int64) *problem {
	return &problem{status: http.StatusRequestEntityTooLarge, kind: "too-large", title: "Request body too large",
		detail: "the request body is larger than " + strconv.FormatInt(limit, 10) + " bytes",
		fields: []api.FieldProblem{{Field: "body", Reason: "larger than " + strconv.FormatInt(limit, 10) + " bytes"}}}
}

// fromEchoError translates echo's own errors: unknown routes (404), wrong
// methods (405) and parameter binding failures of the generated wrapper (400).
func fromEchoError(he *echo.HTTPError) *problem {
	msg := http.StatusText(he.Code)
	if m, ok := he.Message.(string); ok && m != "" {
		msg = m
	}
	switch he.Code {
	case http.StatusNotFound:
		return &problem{status: http.StatusNotFound, kind: "not-found", title: "Not Found", detail: "no such route"}
	case http.StatusBadRequest:
		p := badRequest(msg)
		// The generated wrapper says "Invalid format for parameter NAME: ...".
		if rest, ok := strings.CutPrefix(msg, "Invalid format for parameter "); ok {
			if name, reason, ok := strings.Cut(rest, ": "); ok {
				p.fields = []api.FieldProblem{{Field: name, Reason: reason}}
			}
		}
		return p
	}
	kind := strings.ToLower(strings.ReplaceAll(http.StatusText(he.Code), " ", "-"))
	if kind == "" {
		kind = "error"
	}
	return &problem{status: he.Code, kind: kind, title: http.StatusText(he.Code), detail: msg}
}
