package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"switchyard.dev/libs/engine/constrain"
)

// Tool calling is constrained decoding: a reply that must be a call
// (tool_choice "required" or a named function) is generated under the
// call schema (callSchema), so it parses as a call of an offered function
// with arguments valid against its parameters, whatever the model. The
// schema is compiled here with the engine's own compiler, so a schema the
// engine cannot follow is a 400 naming the tool before any worker is
// asked.

// Limits on tools.
const (
	// MaxTools caps a request's tools: the call schema is a union of one
	// shape per tool, and the engine follows at most that many
	// alternatives.
	MaxTools = constrain.MaxAlternatives
	// MaxCallSchemaBytes caps the call schema, all tools' parameters
	// together, as the engine caps a schema.
	MaxCallSchemaBytes = constrain.MaxSchemaBytes
)

// Tool choices, as ToolUse reports them.
const (
	ChoiceAuto     = "auto"
	ChoiceRequired = "required"
	ChoiceNone     = "none"
	ChoiceFunction = "function"
)

// Tool is one tool a chat request offers.
type Tool struct {
	// Type must be "function".
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef defines a function the model may call.
type FunctionDef struct {
	// Name is 1 to 64 letters, digits, underscores or dashes.
	Name string `json:"name"`
	// Description tells the model what the function does.
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema object of the arguments, in the subset
	// the engine supports; absent is no arguments ({}).
	Parameters FunctionParameters `json:"parameters,omitempty"`
	// Strict is accepted: forced calls are always valid against the
	// parameters.
	Strict *bool `json:"strict,omitempty"`
}

// FunctionParameters is a JSON Schema document, kept as sent; null is
// absent.
type FunctionParameters []byte

// UnmarshalJSON implements json.Unmarshaler.
func (p *FunctionParameters) UnmarshalJSON(data []byte) error {
	*p = rawOrNil(data)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (p FunctionParameters) MarshalJSON() ([]byte, error) { return rawOrNull(p), nil }

// JSONSchema describes the field for the OpenAPI document.
func (FunctionParameters) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "description": "A JSON Schema (the engine's subset: libs/engine/constrain)."}
}

// ToolChoice is tool_choice as sent; DecodeChat reads it, so its errors
// name the parameter.
type ToolChoice []byte

// UnmarshalJSON implements json.Unmarshaler.
func (c *ToolChoice) UnmarshalJSON(data []byte) error {
	*c = rawOrNil(data)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (c ToolChoice) MarshalJSON() ([]byte, error) { return rawOrNull(c), nil }

// JSONSchema describes the alternatives for the OpenAPI document.
func (ToolChoice) JSONSchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "string", "enum": []string{ChoiceNone, ChoiceAuto, ChoiceRequired}},
		map[string]any{"type": "object", "required": []string{"type", "function"}, "properties": map[string]any{
			"type": map[string]any{"type": "string", "enum": []string{ToolTypeFunction}},
			"function": map[string]any{"type": "object", "required": []string{"name"},
				"properties": map[string]any{"name": map[string]any{"type": "string"}}},
		}},
	}}
}

func rawOrNil(data []byte) []byte {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	return bytes.Clone(data)
}

func rawOrNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// ToolUse is how a request's tools shape the reply.
type ToolUse struct {
	// Tools are the functions offered, in request order.
	Tools []FunctionDef
	// Choice is ChoiceAuto, ChoiceRequired or ChoiceFunction (then
	// Function names it).
	Choice   string
	Function string
	// Parallel makes a call reply a JSON array of one or more calls
	// instead of one call object.
	Parallel bool
}

// Forced reports whether the reply must be a call: Generation.Format then
// holds it to the call schema.
func (u *ToolUse) Forced() bool { return u.Choice != ChoiceAuto }

// Offers reports whether the reply may call the function name.
func (u *ToolUse) Offers(name string) bool {
	if u.Choice == ChoiceFunction {
		return name == u.Function
	}
	for _, t := range u.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkTools checks tools, tool_choice and parallel_tool_calls, and for a
// forced call sets g.Format to the call schema.
func (r *ChatRequest) checkTools(g *Generation) error {
	choice, name, err := parseToolChoice(r.ToolChoice)
	if err != nil {
		return err
	}
	if len(r.Tools) == 0 {
		// tool_choice none or auto, and parallel_tool_calls, without tools
		// ask for nothing (frameworks send them by default).
		switch choice {
		case ChoiceRequired:
			return Invalid("tool_choice", `tool_choice "required" needs tools.`)
		case ChoiceFunction:
			return Invalid("tool_choice", "tool_choice names the function %q, but the request has no tools.", name)
		}
		return nil
	}
	if len(r.Tools) > MaxTools {
		return Invalid("tools", "At most %d tools are allowed, got %d.", MaxTools, len(r.Tools))
	}
	defs, err := checkToolDefs(r.Tools)
	if err != nil {
		return err
	}
	if choice == "" {
		choice = ChoiceAuto
	}
	if choice == ChoiceFunction && !offered(defs, name) {
		return Invalid("tool_choice", "tool_choice names the function %q, which is not among the tools.", name)
	}
	parallel := r.ParallelToolCalls != nil && *r.ParallelToolCalls
	all, err := callSchema(defs, parallel)
	if err != nil {
		return err
	}
	if err := compileCallSchema(all, parallel); err != nil {
		return err
	}
	if choice == ChoiceNone {
		return nil
	}
	if !g.Format.IsZero() {
		return Invalid("response_format", `response_format cannot be combined with tools unless tool_choice is "none".`)
	}
	if g.N > 1 {
		// A reply is read as calls by per-reply state (httpapi's toolReply).
		return Unsupported("n", `n > 1 cannot be combined with tools unless tool_choice is "none".`)
	}
	r.use = &ToolUse{Tools: defs, Choice: choice, Function: name, Parallel: parallel}
	switch choice {
	case ChoiceRequired:
		g.Format = Format{JSONSchema: all, Param: "tool_choice"}
	case ChoiceFunction:
		one, err := callSchema(only(defs, name), parallel)
		if err != nil {
			return err
		}
		g.Format = Format{JSONSchema: one, Param: "tool_choice"}
	}
	return nil
}

// parseToolChoice reads tool_choice: "" when absent.
func parseToolChoice(raw ToolChoice) (choice, name string, err error) {
	if len(raw) == 0 {
		return "", "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "", Invalid("tool_choice", "Invalid tool_choice: %v.", err)
		}
		switch s {
		case ChoiceNone, ChoiceAuto, ChoiceRequired:
			return s, "", nil
		}
		return "", "", Invalid("tool_choice", `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}, got %q.`, s)
	}
	var named struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if raw[0] != '{' {
		return "", "", Invalid("tool_choice", `tool_choice must be a string or an object, got %s.`, raw)
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", "", Invalid("tool_choice", "Invalid tool_choice: %v.", err)
	}
	switch {
	case named.Type != ToolTypeFunction:
		return "", "", Unsupported("tool_choice", fmt.Sprintf(`tool_choice of type %q is not supported; name a function with {"type":"function","function":{"name":...}}.`, named.Type))
	case named.Function == nil || named.Function.Name == "":
		return "", "", Invalid("tool_choice", "tool_choice.function.name is required.")
	}
	if err := decodeStrict(raw, &named); err != nil {
		return "", "", Invalid("tool_choice", "Invalid tool_choice: %v.", err)
	}
	return ChoiceFunction, named.Function.Name, nil
}

// checkToolDefs checks each tool and returns their functions.
func checkToolDefs(tools []Tool) ([]FunctionDef, error) {
	defs := make([]FunctionDef, len(tools))
	seen := make(map[string]int, len(tools))
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		switch t.Type {
		case ToolTypeFunction:
		case "":
			return nil, Invalid(at+".type", `%s has no type; only "function" tools are supported.`, at)
		default:
			return nil, Unsupported(at+".type", fmt.Sprintf(`Tool type %q is not supported; only "function" tools are.`, t.Type))
		}
		f := t.Function
		if !toolName.MatchString(f.Name) {
			return nil, Invalid(at+".function.name", "Function name %q must be 1 to 64 letters, digits, underscores or dashes.", f.Name)
		}
		if j, dup := seen[f.Name]; dup {
			return nil, Invalid(at+".function.name", "Function name %q is also the name of tools[%d].", f.Name, j)
		}
		seen[f.Name] = i
		if len(f.Parameters) > 0 && f.Parameters[0] != '{' {
			return nil, Invalid(at+".function.parameters", "%s.function.parameters must be a JSON Schema object.", at)
		}
		defs[i] = f
	}
	return defs, nil
}

func offered(defs []FunctionDef, name string) bool {
	for _, d := range defs {
		if d.Name == name {
			return true
		}
	}
	return false
}

func only(defs []FunctionDef, name string) []FunctionDef {
	for _, d := range defs {
		if d.Name == name {
			return []FunctionDef{d}
		}
	}
	return nil
}

// noArguments is the parameters of a function that declares none: only {}.
const noArguments = `{"type":"object","properties":{},"additionalProperties":false}`

// callSchema is the schema of a call reply: an object {"name": one of the
// functions, "arguments": valid against that function's parameters}, in
// that order, or with parallel a non-empty array of such objects. The
// union has one alternative per function, in the tools' order, so a
// SchemaError's path leads back to the tool (toolOfPath).
func callSchema(defs []FunctionDef, parallel bool) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"anyOf":[`)
	if parallel {
		b.Reset()
		b.WriteString(`{"type":"array","minItems":1,"items":{"anyOf":[`)
	}
	for i, d := range defs {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(d.Name)
		params := []byte(noArguments)
		if len(d.Parameters) > 0 {
			var err error
			if params, err = rebase(d.Parameters, argumentsPath(i, parallel)); err != nil {
				return nil, Invalid(fmt.Sprintf("tools[%d].function.parameters", i), "Invalid JSON Schema: %v.", err)
			}
		}
		fmt.Fprintf(&b, `{"type":"object","properties":{"name":{"const":%s},"arguments":%s},"required":["name","arguments"],"additionalProperties":false}`, name, params)
	}
	b.WriteString("]}")
	if parallel {
		b.WriteByte('}')
	}
	if b.Len() > MaxCallSchemaBytes {
		return nil, Invalid("tools", "The tools' parameters make a call schema of %d bytes; at most %d are allowed.", b.Len(), MaxCallSchemaBytes)
	}
	return b.Bytes(), nil
}

// argumentsPath is the JSON pointer of tool i's parameters in the call
// schema.
func argumentsPath(i int, parallel bool) string {
	p := "#/anyOf/" + strconv.Itoa(i) + "/properties/arguments"
	if parallel {
		p = "#/items" + p[1:]
	}
	return p
}

// compileCallSchema compiles the call schema as the engine will, and
// turns its refusal into a 400 naming the tool, the keyword and where in
// the tool's parameters it is. Agents send the same tools turn after
// turn, so the compilation goes through the package's schema memo.
func compileCallSchema(schema []byte, parallel bool) error {
	_, err := schemas.Schema(schema)
	if err == nil {
		return nil
	}
	var se *constrain.SchemaError
	if !errors.As(err, &se) {
		return Invalid("tools", "The tools' call schema does not compile: %v.", err)
	}
	i, path, ok := toolOfPath(se.Path, parallel)
	if !ok {
		return Invalid("tools", "The tools' call schema is refused (%s): %s.", keywordOf(se), se.Msg)
	}
	return Invalid(fmt.Sprintf("tools[%d].function.parameters", i),
		"tools[%d].function.parameters is refused at %s (%s): %s. Supported: the JSON Schema subset of OpenAI's strict mode (see the frontend's README).",
		i, path, keywordOf(se), se.Msg)
}

func keywordOf(se *constrain.SchemaError) string {
	if se.Keyword == "" {
		return "schema"
	}
	return "keyword " + strconv.Quote(se.Keyword)
}

// toolOfPath maps a JSON pointer in the call schema to the tool whose
// parameters it is in, and the pointer within them.
func toolOfPath(path string, parallel bool) (int, string, bool) {
	rest, ok := strings.CutPrefix(path, "#/")
	if parallel {
		rest, ok = strings.CutPrefix(rest, "items/")
	}
	if !ok {
		return 0, "", false
	}
	rest, ok = strings.CutPrefix(rest, "anyOf/")
	if !ok {
		return 0, "", false
	}
	num, rest, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	rest, ok = strings.CutPrefix(rest, "properties/arguments")
	if !ok || rest != "" && rest[0] != '/' {
		return 0, "", false
	}
	return i, "#" + rest, true
}
