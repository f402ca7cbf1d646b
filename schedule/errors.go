package schedule

import (
	"strings"

	"github.com/schedulerd/schedulerd/model"
)

// Errors lists every field of a Spec that failed validation, in the order
// Compile checked them. It is never empty when returned as an error, and
// errors.Is(err, model.ErrInvalid) holds for it.
type Errors []*model.FieldError

// Add records that field failed for reason.
func (fe *Errors) Add(field, reason string) {
	*fe = append(*fe, &model.FieldError{Field: field, Reason: reason})
}

// Err returns fe as an error, or nil when nothing failed.
func (fe Errors) Err() error {
	if len(fe) == 0 {
		return nil
	}
	return fe
}

func (fe Errors) Error() string {
	parts := make([]string, len(fe))
	for i, e := range fe {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Is makes errors.Is(err, model.ErrInvalid) true.
func (fe Errors) Is(target error) bool { return target == model.ErrInvalid }

// Reasons returns the reasons given for field.
func (fe Errors) Reasons(field string) []string {
	var out []string
	for _, e := range fe {
		if e.Field == field {
			out = append(out, e.Reason)
		}
	}
	return out
}
