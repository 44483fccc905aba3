package engine

import "switchyard.dev/libs/engine/sample"

// constraintFor returns the Constraint that holds r's output to its
// Sampling.Format, nil for free text. Submit calls it once per request
// (a Constraint is stateful: it follows one output) and Validate once to
// report an unusable format before a remote prefill is paid for; its
// errors are validation errors (ErrInvalidConstraint, field
// "sampling.constraint").
//
// No format is supported yet: the compiler from a Format to a Constraint
// (package constrain) is not wired in.
func (e *Engine) constraintFor(r *Request) (sample.Constraint, error) {
	if r.Sampling.Format.IsZero() {
		return nil, nil
	}
	return nil, invalid("sampling.constraint", "request %q: %w: response formats are not yet supported by this engine", r.ID, ErrInvalidConstraint)
}
