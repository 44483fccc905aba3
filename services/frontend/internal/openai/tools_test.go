package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/constrain"
)

const (
	weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather now.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	nowTool     = `{"type":"function","function":{"name":"now"}}`

	weatherCall = `{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},"required":["name","arguments"],"additionalProperties":false}`
	nowCall     = `{"type":"object","properties":{"name":{"const":"now"},"arguments":{"type":"object","properties":{},"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}`
)

// toolBody is a chat request with the given extra members.
func toolBody(extra string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}],` + extra + `}`
}

func TestToolErrors(t *testing.T) {
	t.Parallel()
	manyTools := strings.TrimSuffix(strings.Repeat(nowTool+",", MaxTools+1), ",")
	bigDesc := strings.Repeat("x", 600)
	var big []string
	for i := range 120 {
		big = append(big, fmt.Sprintf(`{"type":"function","function":{"name":"f%d","parameters":{"type":"object","properties":{"a":{"type":"string","description":%q}}}}}`, i, bigDesc))
	}
	pattern := `{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"city":{"type":"string","pattern":"^[A-Z]"}}}}}`
	tests := []struct {
		name, extra, param, message string
	}{
		{"tool type", `"tools":[{"type":"custom"}]`, "tools[0].type", "only"},
		{"no tool type", `"tools":[{"function":{"name":"x"}}]`, "tools[0].type", "no type"},
		{"name with a space", `"tools":[{"type":"function","function":{"name":"get weather"}}]`, "tools[0].function.name", "1 to 64"},
		{"name too long", `"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]`, "tools[0].function.name", "1 to 64"},
		{"no name", `"tools":[{"type":"function","function":{}}]`, "tools[0].function.name", "1 to 64"},
		{"duplicate name", `"tools":[` + nowTool + `,` + nowTool + `]`, "tools[1].function.name", "tools[0]"},
		{"parameters not an object", `"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]`, "tools[0].function.parameters", "JSON Schema object"},
		{"unsupported keyword", `"tools":[` + nowTool + `,` + pattern + `]`, "tools[1].function.parameters", `keyword "pattern"`},
		{"unsupported keyword, parallel", `"parallel_tool_calls":true,"tools":[` + nowTool + `,` + pattern + `]`, "tools[1].function.parameters", "at #/properties/city"},
		{"unsupported keyword behind a $ref", `"tools":[{"type":"function","function":{"name":"f","parameters":{"$defs":{"c":{"type":"string","pattern":"x"}},"type":"object","properties":{"p":{"$ref":"#/$defs/c"}}}}}]`,
			"tools[0].function.parameters", "#/$defs/c"},
		{"oneOf", `"tools":[{"type":"function","function":{"name":"f","parameters":{"oneOf":[{"type":"string"}]}}}]`, "tools[0].function.parameters", `"oneOf"`},
		{"too many tools", `"tools":[` + manyTools + `]`, "tools", "At most 128 tools"},
		{"call schema too large", `"tools":[` + strings.Join(big, ",") + `]`, "tools", "at most 65536"},
		{"tool_choice word", `"tools":[` + nowTool + `],"tool_choice":"any"`, "tool_choice", `"any"`},
		{"tool_choice number", `"tools":[` + nowTool + `],"tool_choice":5`, "tool_choice", "string or an object"},
		{"tool_choice unknown function", `"tools":[` + nowTool + `],"tool_choice":{"type":"function","function":{"name":"later"}}`, "tool_choice", "not among the tools"},
		{"tool_choice without a name", `"tools":[` + nowTool + `],"tool_choice":{"type":"function"}`, "tool_choice", "name is required"},
		{"tool_choice unknown field", `"tools":[` + nowTool + `],"tool_choice":{"type":"function","function":{"name":"now","strict":true}}`, "tool_choice", "unknown field"},
		{"tool_choice allowed_tools", `"tools":[` + nowTool + `],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}`, "tool_choice", "not supported"},
		{"required without tools", `"tool_choice":"required"`, "tool_choice", "needs tools"},
		{"named without tools", `"tools":[],"tool_choice":{"type":"function","function":{"name":"now"}}`, "tool_choice", "no tools"},
		{"n beside tools", `"tools":[` + nowTool + `],"n":2`, "n", "n > 1"},
		{"response_format beside tools", `"tools":[` + nowTool + `],"response_format":{"type":"json_object"}`, "response_format", "response_format"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := DecodeChat([]byte(toolBody(tc.extra)))
			want400(t, err, tc.param, tc.message)
		})
	}
}

func TestToolMessageErrors(t *testing.T) {
	t.Parallel()
	const (
		user   = `{"role":"user","content":"hi"}`
		asked  = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}}]}`
		answer = `{"role":"tool","tool_call_id":"call_1","content":"noon"}`
	)
	tests := []struct {
		name, msgs, param string
	}{
		{"tool without id", user + `,` + asked + `,{"role":"tool","content":"noon"}`, "messages[2].tool_call_id"},
		{"tool answering nothing", user + `,` + asked + `,{"role":"tool","tool_call_id":"call_2","content":"noon"}`, "messages[2].tool_call_id"},
		{"tool before the call", user + `,` + answer + `,` + asked, "messages[1].tool_call_id"},
		{"tool without content", user + `,` + asked + `,{"role":"tool","tool_call_id":"call_1"}`, "messages[2].content"},
		{"tool_calls on a user message", `{"role":"user","content":"hi","tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":"{}"}}]}`, "messages[0].tool_calls"},
		{"tool_call_id on a user message", `{"role":"user","content":"hi","tool_call_id":"c"}`, "messages[0].tool_call_id"},
		{"call type", user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"custom","function":{"name":"now","arguments":"{}"}}]}`, "messages[1].tool_calls[0].type"},
		{"call id", user + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"now","arguments":"{}"}}]}`, "messages[1].tool_calls[0].id"},
		{"call name", user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}`, "messages[1].tool_calls[0].function.name"},
		{"assistant without content or calls", user + `,{"role":"assistant"}`, "messages[1].content"},
		{"unknown field in a call", user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":"{}","x":1}}]}`, "x"},
		{"function_call in a message", user + `,{"role":"assistant","content":"","function_call":{"name":"now","arguments":"{}"}}`, "function_call"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := DecodeChat([]byte(`{"model":"m","messages":[` + tc.msgs + `]}`))
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Param != tc.param {
				t.Fatalf("want a 400 on %q, got %v", tc.param, err)
			}
		})
	}
	if _, _, err := DecodeChat([]byte(`{"model":"m","messages":[` + user + `,` + asked + `,` + answer + `]}`)); err != nil {
		t.Fatalf("a valid exchange: %v", err)
	}
}

// The schema a reply is held to, per tool_choice and parallel_tool_calls.
func TestToolChoiceSchema(t *testing.T) {
	t.Parallel()
	both := `"tools":[` + weatherTool + `,` + nowTool + `]`
	tests := []struct {
		name, extra string
		use         *ToolUse // Tools are not compared
		schema      string
	}{
		{name: "no tools"},
		{name: "auto without tools", extra: `"tool_choice":"auto","parallel_tool_calls":true`},
		{name: "default is auto", extra: both, use: &ToolUse{Choice: ChoiceAuto}},
		{name: "auto, parallel", extra: both + `,"tool_choice":"auto","parallel_tool_calls":true`, use: &ToolUse{Choice: ChoiceAuto, Parallel: true}},
		{name: "none", extra: both + `,"tool_choice":"none"`},
		{name: "required", extra: both + `,"tool_choice":"required","parallel_tool_calls":false`, use: &ToolUse{Choice: ChoiceRequired},
			schema: `{"anyOf":[` + weatherCall + `,` + nowCall + `]}`},
		{name: "required, parallel", extra: both + `,"tool_choice":"required","parallel_tool_calls":true`, use: &ToolUse{Choice: ChoiceRequired, Parallel: true},
			schema: `{"type":"array","minItems":1,"items":{"anyOf":[` + weatherCall + `,` + nowCall + `]}}`},
		{name: "named", extra: both + `,"tool_choice":{"type":"function","function":{"name":"now"}}`, use: &ToolUse{Choice: ChoiceFunction, Function: "now"},
			schema: `{"anyOf":[` + nowCall + `]}`},
		{name: "named, parallel", extra: both + `,"parallel_tool_calls":true,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`,
			use: &ToolUse{Choice: ChoiceFunction, Function: "get_weather", Parallel: true}, schema: `{"type":"array","minItems":1,"items":{"anyOf":[` + weatherCall + `]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
			if tc.extra != "" {
				body = toolBody(tc.extra)
			}
			req, g, err := DecodeChat([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			use := req.ToolUse()
			switch {
			case (use == nil) != (tc.use == nil):
				t.Fatalf("ToolUse %+v, want %+v", use, tc.use)
			case use != nil && (use.Choice != tc.use.Choice || use.Function != tc.use.Function || use.Parallel != tc.use.Parallel || len(use.Tools) != 2):
				t.Fatalf("ToolUse %+v, want %+v", use, tc.use)
			case string(g.Format.JSONSchema) != tc.schema:
				t.Fatalf("schema\n%s\nwant\n%s", g.Format.JSONSchema, tc.schema)
			case tc.schema == "" && !g.Format.IsZero():
				t.Fatalf("format %+v for free text", g.Format)
			case tc.schema != "" && g.Format.Param != "tool_choice":
				t.Fatalf("format param %q", g.Format.Param)
			}
			if tc.schema != "" {
				if _, err := constrain.CompileSchema(g.Format.JSONSchema); err != nil {
					t.Fatalf("the engine refuses the schema: %v", err)
				}
			}
		})
	}
}

// A tool's local $refs point into its parameters wherever they sit in the
// call schema; data that looks like a reference is left alone, and the
// properties keep their order.
func TestRebase(t *testing.T) {
	t.Parallel()
	params := `{"type":"object","properties":{"zip":{"$ref":"#/$defs/code"},"$ref":{"type":"string"},"self":{"anyOf":[{"$ref":"#"},{"type":"null"}]},` +
		`"kind":{"enum":[{"$ref":"#/x"}]},"a":{"type":"string","description":"<b> & </b>"},"n":{"type":"number","maximum":1.50}},` +
		`"$defs":{"code":{"type":"string","maxLength":5}},"items":[{"$ref":"#/$defs/code"}]}`
	got, err := rebase([]byte(params), "#/anyOf/2/properties/arguments")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"zip":{"$ref":"#/anyOf/2/properties/arguments/$defs/code"},"$ref":{"type":"string"},` +
		`"self":{"anyOf":[{"$ref":"#/anyOf/2/properties/arguments"},{"type":"null"}]},"kind":{"enum":[{"$ref":"#/x"}]},` +
		`"a":{"type":"string","description":"<b> & </b>"},"n":{"type":"number","maximum":1.50}},` +
		`"$defs":{"code":{"type":"string","maxLength":5}},"items":[{"$ref":"#/anyOf/2/properties/arguments/$defs/code"}]}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}

	// Through DecodeChat, a recursive, pydantic-style schema compiles.
	tree := `{"type":"function","function":{"name":"tree","parameters":{"$defs":{"Node":{"type":"object","properties":{"v":{"type":"integer"},` +
		`"kids":{"type":"array","items":{"$ref":"#/$defs/Node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/Node"}}}`
	for _, parallel := range []string{"false", "true"} {
		_, g, err := DecodeChat([]byte(toolBody(`"tools":[` + nowTool + `,` + tree + `],"tool_choice":"required","parallel_tool_calls":` + parallel)))
		if err != nil {
			t.Fatalf("parallel %s: %v", parallel, err)
		}
		if !strings.Contains(string(g.Format.JSONSchema), `"#/`) {
			t.Fatalf("no reference left: %s", g.Format.JSONSchema)
		}
	}
}

// With the root as its base, rebase changes no schema's meaning, whatever
// the JSON.
func FuzzRebase(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"},"$ref":{"enum":[{"$ref":"#"}]}},"$defs":{"x":{"items":[true,{"$ref":"#"}]}}}`)
	f.Add(`{"anyOf":{"$ref":"#/a"},"properties":[1,{"$ref":"x"}],"const":"\u00e9\/<"}`)
	f.Add(`true`)
	f.Fuzz(func(t *testing.T, schema string) {
		if !json.Valid([]byte(schema)) {
			return
		}
		out, err := rebase([]byte(schema), "#")
		if err != nil {
			return
		}
		var a, b any
		if err := decodeNumbers([]byte(schema), &a); err != nil {
			t.Fatal(err)
		}
		if err := decodeNumbers(out, &b); err != nil {
			t.Fatalf("rebase wrote invalid JSON %s: %v", out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("rebase(%s) = %s", schema, out)
		}
	})
}

// decodeNumbers decodes JSON keeping numbers as their text.
func decodeNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// BenchmarkDecodeChatTools decodes a chat request offering 10 tools with
// tool_choice "required": the call schema is built and compiled on every
// request.
func BenchmarkDecodeChatTools(b *testing.B) {
	var tools []string
	for i := range 10 {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"tool_%d","description":"Does thing %d.","parameters":`+
			`{"type":"object","properties":{"city":{"type":"string","maxLength":40},"days":{"type":"integer","minimum":1,"maximum":7},`+
			`"unit":{"enum":["c","f"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":4}},"required":["city","days"],"additionalProperties":false}}}`, i, i))
	}
	body := []byte(toolBody(`"tool_choice":"required","tools":[` + strings.Join(tools, ",") + `]`))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := DecodeChat(body); err != nil {
			b.Fatal(err)
		}
	}
}
