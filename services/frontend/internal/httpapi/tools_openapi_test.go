package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// /openapi.json states the tool-calling fields, and every reference in it
// resolves.
func TestOpenAPITools(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	resp, err := http.Get(s.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	for schema, fields := range map[string][]string{
		"ChatRequest":       {"tools", "tool_choice", "parallel_tool_calls"},
		"Tool":              {"type", "function"},
		"FunctionDef":       {"name", "description", "parameters", "strict"},
		"ChatMessage":       {"tool_calls", "tool_call_id"},
		"ToolCall":          {"id", "type", "function"},
		"FunctionCall":      {"name", "arguments"},
		"ChatDelta":         {"tool_calls"},
		"ToolCallDelta":     {"index", "id", "type", "function"},
		"FunctionCallDelta": {"name", "arguments"},
	} {
		for _, f := range fields {
			if _, ok := schemas[schema].Properties[f]; !ok {
				t.Errorf("%s lacks %q", schema, f)
			}
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schemas["ChatChoice"].Properties["message"]); err != nil {
		t.Fatal(err)
	}
	msg := compact.String()
	if !strings.Contains(msg, `"tool_calls"`) || !strings.Contains(msg, `["string","null"]`) {
		t.Errorf("ChatChoice.message = %s", msg)
	}
	if choice := string(schemas["ChatRequest"].Properties["tool_choice"]); !strings.Contains(choice, `"required"`) {
		t.Errorf("tool_choice = %s", choice)
	}
	for _, m := range regexp.MustCompile(`"#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if _, ok := schemas[m[1]]; !ok {
			t.Errorf("$ref to missing schema %s", m[1])
		}
	}
}
