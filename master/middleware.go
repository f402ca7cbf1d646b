package master

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/schedulerd/schedulerd/api"
	"github.com/schedulerd/schedulerd/model"
)

// Context keys set by the middleware.
const (
	ctxCaller  = "master.caller"
	ctxRawBody = "master.body"
	// the body of createSchedule, when decodeScheduleCreate accepted it
	ctxScheduleCreate = "master.scheduleCreate"
)

// opCreateSchedule is the operation whose body the middleware may decode
// for the handler.
const opCreateSchedule = "createSchedule"

// isJSON reports whether r's Content-Type is application/json.
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	return err == nil && mt == echo.MIMEApplicationJSON
}

// caller is the authenticated principal of a request.
type caller struct {
	admin    bool
	tenantID string
	keyID    string
	// keyPrefix is the displayed prefix of the caller's key (pausedBy).
	keyPrefix string
	// policyID is set for a consumer key: the one policy it may brake.
	policyID string
}

// scope is the caller's namespace for rate limits and idempotency records.
func (c *caller) scope() string {
	if c.admin {
		return "admin"
	}
	return c.tenantID
}

// buildRoutes indexes the spec's operations by echo's route syntax.
func buildRoutes(spec *openapi3.T) map[string]*route {
	out := make(map[string]*route)
	for path, item := range spec.Paths.Map() {
		echoPath := regexp.MustCompile(`\{([^}]+)\}`).ReplaceAllString(path, ":$1")
		for method, op := range item.Operations() {
			r := &route{path: path, method: method, pathItem: item, operation: op, spec: spec, query: map[string]bool{},
				pathOnly: true, pathLen: map[string][2]int{}}
			for _, ps := range []openapi3.Parameters{item.Parameters, op.Parameters} {
				for _, p := range ps {
					if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
						sc := p.Value.Schema
						r.query[p.Value.Name] = sc != nil && sc.Value != nil && sc.Value.Type.Is(openapi3.TypeArray)
					}
					if min, max, ok := plainPathString(p); ok {
						r.pathLen[p.Value.Name] = [2]int{min, max}
					} else {
						r.pathOnly = false
					}
				}
			}
			if op.Security != nil && len(*op.Security) == 0 {
				r.public = true
			}
			for _, t := range op.Tags {
				if t == "admin" {
					r.admin = true
				}
			}
			r.batch = strings.EqualFold(op.OperationID, opCreateSchedulesBatch) // the embedded spec capitalises ids
			r.create = strings.EqualFold(op.OperationID, opCreateSchedule)
			r.anyCaller = adminOrTenantOps[strings.ToLower(op.OperationID)]
			r.action = lowerFirst(op.OperationID)
			out[method+" "+echoPath] = r
		}
	}
	return out
}

// checkQuery answers 400 for a query parameter the operation does not
// declare, and for one given twice that takes one value: a misspelt filter
// must not silently widen the answer, nor a second one be ignored.
func (r *route) checkQuery(q map[string][]string) error {
	var out []api.FieldProblem
	for name, values := range q {
		repeatable, known := r.query[name]
		switch {
		case !known:
			out = append(out, api.FieldProblem{Field: name, Reason: "unknown query parameter"})
		case len(values) > 1 && !repeatable:
			out = append(out, api.FieldProblem{Field: name, Reason: "must be given at most once"})
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	detail := make([]string, len(out))
	for i, f := range out {
		detail[i] = f.Field + ": " + f.Reason
	}
	return badRequest(strings.Join(detail, "; "), out...)
}

// plainPathString reports whether p is a path parameter of type string
// whose only constraints are its length bounds (max 0: none).
func plainPathString(p *openapi3.ParameterRef) (min, max int, ok bool) {
	if p.Value == nil || p.Value.In != openapi3.ParameterInPath || p.Value.Schema == nil || p.Value.Schema.Value == nil ||
		p.Value.Content != nil {
		return 0, 0, false
	}
	sc := p.Value.Schema.Value
	plain := *sc
	plain.MinLength, plain.MaxLength, plain.Extensions = 0, nil, nil
	if !sc.Type.Is(openapi3.TypeString) || !reflect.DeepEqual(plain, openapi3.Schema{Type: sc.Type}) {
		return 0, 0, false
	}
	if sc.MaxLength != nil {
		max = int(*sc.MaxLength)
	}
	return int(sc.MinLength), max, true
}

// plainParamsValid checks what kin-openapi would check of a route whose
// parameters are all plain path strings (route.pathOnly): their lengths.
func (r *route) plainParamsValid(params map[string]string) bool {
	for name, b := range r.pathLen {
		v, ok := params[name]
		n := utf8.RuneCountInString(v)
		if !ok || n < b[0] || b[1] > 0 && n > b[1] {
			return false
		}
	}
	return true
}

func (s *Server) routeOf(c echo.Context) *route {
	return s.routes[c.Request().Method+" "+c.Path()]
}

func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error().Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Str("path", c.Path()).Msg("handler panicked")
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// publicBodyBytes limits the bodies of the operations that need no key
// (release, extend: a token of at most 512 characters and a duration), so
// that what anyone may send costs little to read and check.
const publicBodyBytes = 16 << 10

// limitBody answers 413 for a declared Content-Length over the limit and caps
// the body reader so that an undeclared large body fails when it passes the
// limit, before it was read whole.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		limit := s.cfg.MaxBodyBytes
		if rt := s.routeOf(c); rt != nil && rt.batch {
			limit = s.cfg.MaxBatchBodyBytes
		} else if rt != nil && rt.public {
			limit = min(limit, publicBodyBytes)
		}
		if r.ContentLength > limit {
			return tooLarge(limit)
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		}
		return next(c)
	}
}

func unauthorized(detail string) *problem {
	return &problem{status: http.StatusUnauthorized, kind: "unauthorized", title: "Unauthorized", detail: detail,
		header: map[string]string{"WWW-Authenticate": `Bearer realm="schedulerd"`}}
}

func forbidden(detail string) *problem {
	return &problem{status: http.StatusForbidden, kind: "forbidden", title: "Forbidden", detail: detail}
}

// badKey is the detail of the 401 for an unknown or revoked key.
const badKey = "the API key is not valid"

// authenticate resolves the bearer key to the admin or a tenant. Operations
// with `security: []` (release, extend) need no key.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rt := s.routeOf(c)
		if rt == nil || rt.public {
			return next(c)
		}
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		scheme, key, ok := strings.Cut(h, " ")
		key = strings.TrimSpace(key)
		if h == "" {
			return unauthorized("missing Authorization: Bearer <key> header")
		}
		if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
			return unauthorized("the Authorization header must be Bearer <key>")
		}
		var who *caller
		if s.cfg.AdminKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.AdminKey)) == 1 {
			who = &caller{admin: true}
		} else {
			k, err := s.store.APIKeyGetByHash(c.Request().Context(), model.HashAPIKey(key))
			switch {
			case errors.Is(err, model.ErrNotFound) || err == nil && k.RevokedAt != nil:
				// One answer for both: it does not tell whether a key existed.
				return unauthorized(badKey)
			case err != nil:
				return err
			}
			who = &caller{tenantID: k.TenantID, keyID: k.ID, keyPrefix: k.Prefix, policyID: k.PolicyID}
		}
		op := strings.ToLower(rt.operation.OperationID)
		if err := checkScope(who, op, c.Param("id")); err != nil {
			return err
		}
		switch {
		case rt.admin && !who.admin:
			return forbidden("this operation needs the admin key")
		case !rt.admin && who.admin && !rt.anyCaller:
			return forbidden("the admin key cannot call tenant operations; use a tenant key")
		}
		c.Set(ctxCaller, who)
		return next(c)
	}
}

// rateLimit applies the per tenant token bucket to authenticated requests.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		who, _ := c.Get(ctxCaller).(*caller)
		if s.limiter == nil || who == nil {
			return next(c)
		}
		if ok, wait := s.limiter.allow(who.scope()); !ok {
			secs := int((wait + 999_999_999) / 1_000_000_000)
			if secs < 1 {
				secs = 1
			}
			return &problem{status: http.StatusTooManyRequests, kind: "rate-limited", title: "Too Many Requests",
				detail: "the tenant's request rate limit is exhausted; retry after " + strconv.Itoa(secs) + "s", retryAfter: secs}
		}
		return next(c)
	}
}

// boundBatchBodies has a batch create take room for its body in the
// BatchBodyBudget before the body is read, and give it back when answered:
// the memory of batch intake follows the budget, not the number of
// clients. Its Content-Length is the room it takes (the body limit when it
// has none), at least MaxBodyBytes, as a small batch's items cost more
// per byte than a large one's; it waits up to BatchBodyWait, then answers
// 503.
func (s *Server) boundBatchBodies(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rt := s.routeOf(c)
		if rt == nil || !rt.batch {
			return next(c)
		}
		n := c.Request().ContentLength
		if n < 0 || n > s.cfg.MaxBatchBodyBytes {
			n = s.cfg.MaxBatchBodyBytes
		}
		n = max(n, s.cfg.MaxBodyBytes)
		ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.BatchBodyWait)
		defer cancel()
		if err := s.batches.Acquire(ctx, n); err != nil {
			if c.Request().Context().Err() != nil {
				return c.Request().Context().Err()
			}
			return unavailable("batch creates are using the server's batch memory (BatchBodyBudget); retry later")
		}
		defer s.batches.Release(n)
		return next(c)
	}
}

// limitWrongTokens answers 429 instead of 404 to a wrong release token
// (release and extend answer 404 to one, or to an unknown event) once its
// client address, or its event, had WrongTokens.Max wrong ones in the
// window: guesses spread over many addresses are counted against the event
// they aim at. The token is checked first and a correct one is always
// served, so that neither guesses from a consumer's address (behind one
// NAT) nor guesses aimed at its event block its releases.
func (s *Server) limitWrongTokens(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rt := s.routeOf(c)
		if s.wrongTokens == nil || rt == nil || !rt.public {
			return next(c)
		}
		err := next(c)
		var p *problem
		if !errors.Is(err, model.ErrNotFound) && !(errors.As(err, &p) && p.status == http.StatusNotFound) {
			return err
		}
		wait := max(s.wrongTokens.fail("addr "+s.clientAddr(c)), s.wrongTokens.fail("event "+c.Param("id")))
		if wait <= 0 {
			return err
		}
		secs := int((wait + time.Second - 1) / time.Second)
		return &problem{status: http.StatusTooManyRequests, kind: "rate-limited", title: "Too Many Requests",
			detail: "too many wrong release tokens from this address or for this event; retry after " + strconv.Itoa(secs) + "s", retryAfter: secs}
	}
}

// clientAddr is the address wrong tokens are counted by: the peer address,
// unless the runtime configured echo's IPExtractor for a trusted proxy
// (echo's default would trust any client's X-Forwarded-For).
func (s *Server) clientAddr(c echo.Context) string {
	if s.echo.IPExtractor != nil {
		return c.RealIP()
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		return c.Request().RemoteAddr
	}
	return host
}

var validationOptions = &openapi3filter.Options{
	MultiError:          true,
	SkipSettingDefaults: true,
	AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
}

// bodylessValidationOptions leave the body out: to the batch handler,
// which validates each item on its own so that one bad item fails only
// itself, or to the precompiled schema that accepted it (bodySchema).
var bodylessValidationOptions = &openapi3filter.Options{
	MultiError:          true,
	SkipSettingDefaults: true,
	ExcludeRequestBody:  true,
	AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
}

// validateRequest reads the body (bounded by limitBody), keeps it for the
// handler and validates the request against the embedded spec.
func (s *Server) validateRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		rt := s.routeOf(c)
		if rt == nil {
			return next(c)
		}
		r := c.Request()
		var body []byte
		if r.Body != nil && r.Body != http.NoBody {
			b, err := readBody(r.Body, r.ContentLength)
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					return tooLarge(mbe.Limit)
				}
				return badRequest("reading the body failed: " + err.Error())
			}
			body = b
		}
		if rt.operation.RequestBody == nil {
			body = nil // bodies of operations without one are ignored
		}
		if err := checkDepth(body); err != nil {
			return err
		}
		if err := scanBody(body); err != nil {
			return err
		}
		if err := rt.checkQuery(r.URL.Query()); err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		c.Set(ctxRawBody, body)

		params := make(map[string]string, len(c.ParamNames()))
		for i, name := range c.ParamNames() {
			params[name] = c.ParamValues()[i]
		}
		in := &openapi3filter.RequestValidationInput{
			Request:    r,
			PathParams: params,
			Route: &routers.Route{
				Spec: rt.spec, Path: rt.path, PathItem: rt.pathItem,
				Method: rt.method, Operation: rt.operation,
			},
			Options: validationOptions,
		}
		var create api.ScheduleCreate
		switch {
		case rt.batch:
			in.Options = bodylessValidationOptions
		case rt.create && isJSON(r) && decodeScheduleCreate(body, &create):
			// Validated and decoded at once (see decodeScheduleCreate).
			c.Set(ctxScheduleCreate, &create)
			in.Options = bodylessValidationOptions
		case rt.body.accepts(rt, r, body):
			// A valid body needs no second look (see bodySchema); an
			// invalid one gets kin-openapi's answer below.
			in.Options = bodylessValidationOptions
		}
		// kin-openapi compiles a parameter's schema on every call: a route
		// whose parameters are plain path strings, with its body accepted
		// above or none, is checked here instead.
		bodyDone := in.Options == bodylessValidationOptions || rt.operation.RequestBody == nil
		if !(bodyDone && rt.pathOnly && rt.plainParamsValid(params)) {
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				return translateValidation(err)
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		return next(c)
	}
}

// readBody reads a body of size bytes (-1: unknown) into one buffer of
// that size, where io.ReadAll would grow its buffer several times.
func readBody(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead)) // room for ReadFrom's last read, which sees EOF
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

var propertyRe = regexp.MustCompile(`^property "([^"]+)" is (unsupported|missing)$`)

// translateValidation turns kin-openapi's errors into a 400 naming each field.
func translateValidation(err error) error {
	var out []api.FieldProblem
	var walk func(err error, param string)
	walk = func(err error, param string) {
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, x := range e {
				walk(x, param)
			}
			return
		case *openapi3filter.RequestError:
			name := param
			if e.Parameter != nil {
				name = e.Parameter.Name
			}
			if e.Err == nil {
				out = append(out, api.FieldProblem{Field: orBody(name), Reason: e.Reason})
				return
			}
			var (
				se *openapi3.SchemaError
				me openapi3.MultiError
				pe *openapi3filter.ParseError
			)
			if e.Parameter == nil && !errors.As(e.Err, &se) && !errors.As(e.Err, &me) {
				reason := e.Err.Error()
				field := "body"
				switch {
				case strings.Contains(reason, "Content-Type") || strings.Contains(e.Reason, "Content-Type"):
					field = "Content-Type"
				case errors.As(e.Err, &pe):
					reason = "not valid JSON: " + pe.Error()
				}
				out = append(out, api.FieldProblem{Field: field, Reason: reason})
				return
			}
			walk(e.Err, name)
			return
		case *openapi3.SchemaError:
			var ve *jsonschema.ValidationError
			if errors.As(e, &ve) {
				// The JSON Schema 2020-12 validator of OpenAPI 3.1 documents:
				// report the leaves, which say what is wrong where.
				var me openapi3.MultiError
				if e.Origin != nil && errors.As(e.Origin, &me) {
					walk(me, param)
					return
				}
				out = append(out, schemaLeaf(ve, param)...)
				return
			}
			path := e.JSONPointer()
			reason := e.Reason
			if e.SchemaField == "format" && e.Schema != nil {
				reason = formatReason(e.Schema.Format)
			}
			if m := propertyRe.FindStringSubmatch(reason); m != nil {
				if len(path) == 0 || path[len(path)-1] != m[1] {
					path = append(path, m[1])
				}
				if m[2] == "unsupported" {
					reason = "unknown field"
				} else {
					reason = "is required"
				}
			}
			field := strings.Join(path, ".")
			if param != "" {
				field = strings.TrimSuffix(param+"."+field, ".")
			}
			out = append(out, api.FieldProblem{Field: orBody(field), Reason: reason})
			return
		}
		var mbe *http.MaxBytesError
		reason := err.Error()
		switch {
		case errors.As(err, &mbe):
			out = append(out, api.FieldProblem{Field: "body", Reason: "too large"})
		case strings.Contains(reason, "Content-Type"):
			out = append(out, api.FieldProblem{Field: "Content-Type", Reason: reason})
		default:
			out = append(out, api.FieldProblem{Field: orBody(param), Reason: reason})
		}
	}
	walk(err, "")
	detail := make([]string, len(out))
	for i, f := range out {
		detail[i] = f.Field + ": " + f.Reason
	}
	return badRequest(strings.Join(detail, "; "), out...)
}

// formatReason says what a value of a string format looks like; the
// validator's own text quotes the whole regular expression.
func formatReason(format string) string {
	switch format {
	case "date-time":
		return `not an RFC 3339 date-time such as "2026-01-02T15:04:05Z"`
	case "date":
		return `not a date such as "2026-01-02"`
	}
	return "not in the format " + strconv.Quote(format)
}

var english = message.NewPrinter(language.English)

// schemaLeaf names the fields of one failure of the JSON Schema validator.
func schemaLeaf(ve *jsonschema.ValidationError, param string) []api.FieldProblem {
	field := func(extra ...string) string {
		parts := append(append([]string{}, ve.InstanceLocation...), extra...)
		f := strings.Join(parts, ".")
		if param != "" {
			f = strings.TrimSuffix(param+"."+f, ".")
		}
		return orBody(f)
	}
	var out []api.FieldProblem
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			out = append(out, api.FieldProblem{Field: field(m), Reason: "is required"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			out = append(out, api.FieldProblem{Field: field(p), Reason: "unknown field"})
		}
	case *kind.Format:
		out = append(out, api.FieldProblem{Field: field(), Reason: formatReason(k.Want)})
	default:
		out = append(out, api.FieldProblem{Field: field(), Reason: ve.ErrorKind.LocalizedString(english)})
	}
	return out
}

func orBody(field string) string {
	if field == "" {
		return "body"
	}
	return field
}
