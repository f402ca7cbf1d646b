package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"

	"github.com/schedulerd/schedulerd/client"
)

// The documents of schedctl apply: Kubernetes-shaped objects whose spec is
// the API's create body (the generated client types, so the schema is
// openapi.yaml's) without the name, which metadata gives.
const (
	manifestAPIVersion = "schedulerd.io/v1"
	kindPolicy         = "Policy"
	kindCalendar       = "Calendar"
	kindSchedule       = "Schedule"
)

// manifest is one document of an apply file.
type manifest struct {
	where  string // "FILE, document N (line L)"
	kind   string
	name   string
	labels map[string]string

	policy   *client.PolicyCreate
	calendar *client.CalendarCreate
	schedule *client.ScheduleCreate
	// Of a schedule: the names its spec gives for its policy and calendars.
	policyName    *string
	calendarNames *[]string
}

// ref is how output names an object: "schedule/nightly".
func (m *manifest) ref() string { return strings.ToLower(m.kind) + "/" + m.name }

// readManifests reads the documents of each path: a YAML file, a directory
// (its *.yaml and *.yml files, in name order) or "-" for stdin. It refuses
// the whole set when one document is bad, or when two name the same object.
func readManifests(paths []string, stdin io.Reader, schemas *openapi3.T) ([]*manifest, error) {
	var files []string
	for _, p := range paths {
		if p == "-" {
			files = append(files, p)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	var out []*manifest
	seen := map[string]string{}
	for _, f := range files {
		var b []byte
		var err error
		if f == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, err
		}
		name := f
		if f == "-" {
			name = "stdin"
		}
		docs, err := parseManifests(name, b, schemas)
		if err != nil {
			return nil, err
		}
		for _, m := range docs {
			if prev, dup := seen[m.ref()]; dup {
				return nil, fmt.Errorf("%s: %s is also defined in %s", m.where, m.ref(), prev)
			}
			seen[m.ref()] = m.where
		}
		out = append(out, docs...)
	}
	return out, nil
}

// parseManifests decodes the YAML documents of one file.
func parseManifests(file string, b []byte, schemas *openapi3.T) ([]*manifest, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []*manifest
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", file, i, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null" {
			continue // an empty document, as between two "---"
		}
		where := fmt.Sprintf("%s, document %d (line %d)", file, i, n.Line)
		m, err := parseManifest(&n, schemas)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		m.where = where
		out = append(out, m)
	}
}

// parseManifest decodes one document.
func parseManifest(n *yaml.Node, schemas *openapi3.T) (*manifest, error) {
	v, err := yamlValue(n, "")
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the document is not a mapping")
	}
	for k := range doc {
		if k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" {
			return nil, fmt.Errorf("%s: unknown field", k)
		}
	}
	if av, _ := doc["apiVersion"].(string); av != manifestAPIVersion {
		return nil, fmt.Errorf("apiVersion: %q is not %s", doc["apiVersion"], manifestAPIVersion)
	}
	m := &manifest{}
	m.kind, _ = doc["kind"].(string)
	var target any
	switch m.kind {
	case kindPolicy:
		m.policy = &client.PolicyCreate{}
		target = m.policy
	case kindCalendar:
		m.calendar = &client.CalendarCreate{}
		target = m.calendar
	case kindSchedule:
		m.schedule = &client.ScheduleCreate{}
		target = m.schedule
	default:
		return nil, fmt.Errorf("kind: %q is not %s, %s or %s", doc["kind"], kindPolicy, kindCalendar, kindSchedule)
	}
	var meta struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	}
	if err := decodeStrict(doc["metadata"], "metadata", &meta); err != nil {
		return nil, err
	}
	if meta.Name == "" {
		return nil, errors.New("metadata.name: required")
	}
	m.name, m.labels = meta.Name, meta.Labels
	if m.labels != nil && m.kind == kindCalendar {
		return nil, errors.New("metadata.labels: calendars have no labels")
	}
	spec, ok := doc["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("spec: required, a mapping")
	}
	if _, ok := spec["name"]; ok {
		return nil, errors.New("spec.name: unknown field (metadata.name names the object)")
	}
	if _, ok := spec["labels"]; ok && m.kind != kindCalendar {
		return nil, errors.New("spec.labels: unknown field (metadata.labels holds the labels)")
	}
	if m.kind == kindSchedule {
		if _, ok := spec["policyId"]; ok {
			return nil, errors.New("spec.policyId: unknown field (spec.policy names the policy)")
		}
		if p, ok := spec["policy"]; ok {
			s, ok := p.(string)
			if !ok || s == "" {
				return nil, errors.New("spec.policy: want the name of a policy")
			}
			m.policyName = &s
			delete(spec, "policy")
		}
		if c, ok := spec["excludeCalendars"]; ok {
			var names []string
			if err := decodeStrict(c, "spec.excludeCalendars", &names); err != nil {
				return nil, err
			}
			m.calendarNames = &names
			delete(spec, "excludeCalendars")
		}
	}
	spec["name"] = m.name
	if err := decodeStrict(spec, "spec", target); err != nil {
		return nil, err
	}
	if err := validateSpec(schemas, m.kind+"Create", spec); err != nil {
		return nil, err
	}
	return m, nil
}

// validateSpec checks spec (with the name) against the openapi.yaml schema
// of the kind's create body: the values the server would refuse (an enum,
// a bound, a required field) are refused before any change, each named
// with its path.
func validateSpec(schemas *openapi3.T, schemaName string, spec map[string]any) error {
	ref := schemas.Components.Schemas[schemaName]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("the API has no schema %s", schemaName)
	}
	// As JSON decodes it: numbers are float64.
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	err = ref.Value.VisitJSON(v, openapi3.MultiErrors())
	if err == nil {
		return nil
	}
	var errs openapi3.MultiError
	if !errors.As(err, &errs) {
		errs = openapi3.MultiError{err}
	}
	var out []string
	for _, e := range errs {
		var se *openapi3.SchemaError
		if !errors.As(e, &se) {
			out = append(out, "spec: "+e.Error())
			continue
		}
		path := "spec"
		for _, p := range se.JSONPointer() {
			path = joinPath(path, p)
		}
		if path == "spec.name" {
			path = "metadata.name"
		}
		out = append(out, path+": "+se.Reason)
	}
	slices.Sort(out)
	return errors.New(strings.Join(slices.Compact(out), "; "))
}

// yamlValue converts a YAML node into the value encoding/json would have
// decoded from the same document as JSON. Timestamps stay the text they
// are ("2027-12-24" is a calendar's date, not an instant).
func yamlValue(n *yaml.Node, path string) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0], path)
	case yaml.AliasNode:
		return yamlValue(n.Alias, path)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, fmt.Errorf("%s (line %d): keys must be plain strings", joinPath(path, "?"), k.Line)
			}
			v, err := yamlValue(n.Content[i+1], joinPath(path, k.Value))
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := yamlValue(c, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	}
	switch n.Tag {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	case "!!null":
		return nil, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s (line %d): %w", path, n.Line, err)
	}
	return v, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decodeStrict decodes v (a value of yamlValue) into out, a generated API
// type, refusing unknown fields with their path.
func decodeStrict(v any, path string, out any) error {
	if v == nil {
		return nil
	}
	if f := unknownField(v, reflect.TypeOf(out), path); f != "" {
		return fmt.Errorf("%s: unknown field", f)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: want a %s, not a %s", joinPath(path, te.Field), te.Type, te.Value)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// unknownField returns the path of the first key of v (in key order) that
// type t has no JSON field for, or "".
func unknownField(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := v.(type) {
	case map[string]any:
		if t.Kind() == reflect.Map {
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if f := unknownField(v[k], t.Elem(), joinPath(path, k)); f != "" {
					return f
				}
			}
			return ""
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			ft, ok := fields[k]
			if !ok {
				return joinPath(path, k)
			}
			if f := unknownField(v[k], ft, joinPath(path, k)); f != "" {
				return f
			}
		}
	case []any:
		if t.Kind() != reflect.Slice || t.Elem().Kind() == reflect.Uint8 {
			return ""
		}
		for i, e := range v {
			if f := unknownField(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); f != "" {
				return f
			}
		}
	}
	return ""
}
