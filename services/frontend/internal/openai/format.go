package openai

import (
	"bytes"
	"errors"
	"regexp"

	"switchyard.dev/libs/engine/constrain"
)

// Structured output is constrained decoding in the engine: a token mask at
// every step holds the output to JSON, or to a JSON schema. A schema is
// compiled here with the engine's own compiler, so one the engine cannot
// follow is a 400 naming the keyword and where it is, before any worker
// is asked.

// Response formats, as ResponseFormat.Type names them.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// MaxSchemaBytes caps a response_format schema, as the engine caps one.
const MaxSchemaBytes = constrain.MaxSchemaBytes

// ResponseFormat is response_format: the shape the output must have.
type ResponseFormat struct {
	// Type is "text" (free text, the default), "json_object" (a JSON
	// object) or "json_schema" (a JSON value valid against
	// json_schema.schema).
	Type string `json:"type"`
	// JSONSchema is required with type "json_schema", and only allowed
	// with it.
	JSONSchema *JSONSchemaFormat `json:"json_schema,omitempty"`
}

// JSONSchemaFormat is response_format.json_schema.
type JSONSchemaFormat struct {
	// Name is 1 to 64 letters, digits, underscores or dashes.
	Name string `json:"name"`
	// Description is accepted; it is not shown to the model.
	Description string `json:"description,omitempty"`
	// Schema is a JSON Schema object in the subset the engine supports
	// (libs/engine/constrain: the subset of OpenAI's strict mode and a
	// little more); absent is any JSON value.
	Schema Schema `json:"schema,omitempty"`
	// Strict is accepted: the output is valid against the schema whether
	// or not it is set.
	Strict *bool `json:"strict,omitempty"`
}

// Schema is a JSON Schema document, kept as sent; null is absent.
type Schema []byte

// UnmarshalJSON implements json.Unmarshaler.
func (s *Schema) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		*s = nil
		return nil
	}
	*s = bytes.Clone(data)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (s Schema) MarshalJSON() ([]byte, error) {
	if len(s) == 0 {
		return []byte("null"), nil
	}
	return s, nil
}

// JSONSchema describes the field for the OpenAPI document.
func (Schema) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "description": "A JSON Schema (the engine's subset: libs/engine/constrain)."}
}

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// anySchema is the schema of a json_schema format that names none.
var anySchema = []byte(`{}`)

// schemas memoizes compilations: clients send the same response_format
// request after request, and a cache hit costs a hash of the schema. It
// is a process-wide memo of a pure function (a schema compiles or fails
// the same way every time), so sharing it is unobservable but for speed;
// it holds at most schemaCacheSize grammars.
var schemas = constrain.NewCache(schemaCacheSize)

const schemaCacheSize = 64

// checkFormat checks response_format and returns the Format it asks for.
func checkFormat(rf *ResponseFormat) (Format, error) {
	if rf == nil {
		return Format{}, nil
	}
	if rf.JSONSchema != nil && rf.Type != FormatJSONSchema {
		return Format{}, Invalid("response_format.json_schema", `response_format.json_schema is only allowed with type "json_schema", got type %q.`, rf.Type)
	}
	switch rf.Type {
	case FormatText:
		return Format{}, nil
	case FormatJSONObject:
		return Format{JSONObject: true, Param: "response_format"}, nil
	case FormatJSONSchema:
	case "":
		return Format{}, Invalid("response_format.type", `response_format.type is required: "text", "json_object" or "json_schema".`)
	default:
		return Format{}, Invalid("response_format.type", `response_format.type must be "text", "json_object" or "json_schema", got %q.`, rf.Type)
	}
	js := rf.JSONSchema
	if js == nil {
		return Format{}, Invalid("response_format.json_schema", `response_format of type "json_schema" needs json_schema, with a name and a schema.`)
	}
	if !schemaName.MatchString(js.Name) {
		return Format{}, Invalid("response_format.json_schema.name", "response_format.json_schema.name must be 1 to 64 letters, digits, underscores or dashes, got %q.", js.Name)
	}
	schema := []byte(js.Schema)
	if len(schema) == 0 {
		schema = anySchema
	}
	if err := compileSchema(schema); err != nil {
		return Format{}, err
	}
	return Format{JSONSchema: schema, Param: "response_format"}, nil
}

// compileSchema compiles schema as the engine will, and turns a refusal
// into a 400 naming the keyword and the JSON pointer of the subschema it
// is in.
func compileSchema(schema []byte) error {
	const param = "response_format.json_schema.schema"
	if len(schema) > MaxSchemaBytes {
		return Invalid(param, "The schema is %d bytes; at most %d are allowed.", len(schema), MaxSchemaBytes)
	}
	if schema[0] != '{' {
		return Invalid(param, "%s must be a JSON Schema object.", param)
	}
	_, err := schemas.Schema(schema)
	if err == nil {
		return nil
	}
	se, ok := errors.AsType[*constrain.SchemaError](err)
	if !ok {
		return Invalid(param, "The schema does not compile: %v.", err)
	}
	path := se.Path
	if path == "" {
		path = "#"
	}
	if se.Keyword == "" {
		return Invalid(param, "The schema is refused at %s: %s.", path, se.Msg)
	}
	return Invalid(param, "The schema is refused at %s (keyword %q): %s. Supported: the JSON Schema subset of OpenAI's strict mode (see the frontend's README).",
		path, se.Keyword, se.Msg)
}
