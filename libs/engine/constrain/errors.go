package constrain

import (
	"errors"
	"fmt"
)

// ErrRejected is wrapped by Accept's error for a token the grammar does not
// allow at that point (or any token after the generation ended).
var ErrRejected = errors.New("constrain: token not allowed")

// SchemaError reports a schema CompileSchema cannot turn into a grammar: a
// keyword outside the supported subset, a malformed value, an unsatisfiable
// schema or a limit. Keyword names the offending keyword ("pattern",
// "$ref", "limit" for the size limits) and Path the JSON pointer of the
// subschema it sits in ("#/properties/city").
type SchemaError struct {
	Keyword string
	Path    string
	Msg     string
	// Err is an underlying error (a JSON syntax error), if any.
	Err error
}

func (e *SchemaError) Error() string {
	path := e.Path
	if path == "" {
		path = "#"
	}
	if e.Keyword == "" {
		return fmt.Sprintf("constrain: schema %s: %s", path, e.Msg)
	}
	return fmt.Sprintf("constrain: schema %s: %q: %s", path, e.Keyword, e.Msg)
}

func (e *SchemaError) Unwrap() error { return e.Err }

func schemaErr(path, keyword, format string, args ...any) *SchemaError {
	return &SchemaError{Keyword: keyword, Path: path, Msg: fmt.Sprintf(format, args...)}
}
