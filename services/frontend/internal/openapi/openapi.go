// Package openapi generates an OpenAPI 3.1 document from Go types by
// reflection, so the published schema cannot drift from the structs the
// handlers decode and encode.
//
// Struct fields map by their json tags (embedded structs inline their
// fields, omitempty and pointer fields are optional); a type with a
// JSONSchema() map[string]any method describes itself, which is how fields
// of more than one JSON type (a string or an array) are stated.
package openapi

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// Operation is one endpoint.
type Operation struct {
	Method  string
	Path    string
	ID      string
	Summary string
	// Request is the JSON body type, or nil.
	Request reflect.Type
	// Response is the JSON 200 body.
	Response reflect.Type
	// Stream, if set, is the type of each server-sent event when the
	// request asks for a stream.
	Stream reflect.Type
	// Errors are the error statuses the endpoint returns.
	Errors []int
}

// Schemaer is implemented by types that describe their own schema.
type Schemaer interface{ JSONSchema() map[string]any }

var schemaer = reflect.TypeFor[Schemaer]()

// Document builds the OpenAPI document; errorBody is the type of every
// error response.
func Document(title, version string, ops []Operation, errorBody reflect.Type) map[string]any {
	g := &gen{schemas: map[string]any{}}
	paths := map[string]any{}
	for _, op := range ops {
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[op.Path] = item
		}
		item[strings.ToLower(op.Method)] = g.operation(op, errorBody)
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": title, "version": version},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         g.schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

func (g *gen) operation(op Operation, errorBody reflect.Type) map[string]any {
	ok := map[string]any{"application/json": map[string]any{"schema": g.schema(op.Response)}}
	if op.Stream != nil {
		ok["text/event-stream"] = map[string]any{
			"schema":      g.schema(op.Stream),
			"description": "With stream=true: one 'data: <json>' event per chunk, ending with 'data: [DONE]'.",
		}
	}
	responses := map[string]any{"200": map[string]any{"description": "OK", "content": ok}}
	for _, code := range op.Errors {
		responses[strconv.Itoa(code)] = map[string]any{
			"description": http.StatusText(code),
			"content":     map[string]any{"application/json": map[string]any{"schema": g.schema(errorBody)}},
		}
	}
	out := map[string]any{"operationId": op.ID, "summary": op.Summary, "responses": responses, "security": []any{map[string]any{"bearer": []any{}}}}
	if op.Request != nil {
		out["requestBody"] = map[string]any{"required": true,
			"content": map[string]any{"application/json": map[string]any{"schema": g.schema(op.Request)}}}
	}
	return out
}

type gen struct{ schemas map[string]any }

// schema returns the schema of t, a $ref for named structs.
func (g *gen) schema(t reflect.Type) map[string]any {
	if t.Implements(schemaer) {
		return reflect.Zero(t).Interface().(Schemaer).JSONSchema()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" || t.NumField() == 0 {
			return g.object(t)
		}
		name := t.Name()
		if _, done := g.schemas[name]; !done {
			g.schemas[name] = map[string]any{} // placeholder stops recursion
			g.schemas[name] = g.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

// object lists a struct's JSON properties.
func (g *gen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	g.fields(t, props, &required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func (g *gen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			g.fields(f.Type, props, required) // promoted, as encoding/json does
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
			*required = append(*required, name)
		}
	}
}
