package chattmpl

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Tool is a function offered to the model.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; nil for none.
	Parameters []byte
}

// ToolCall is a call an assistant message made.
type ToolCall struct {
	// ID names the call; a tool message answers it by this id.
	ID   string
	Name string
	// Arguments is the JSON text of the arguments, as the call carried it.
	Arguments string
}

// writeToolPreamble lists the tools as JSON and says how to call them, in
// the shape the engine holds a forced call to.
func writeToolPreamble(b *strings.Builder, tools []Tool, parallel bool) {
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	list := make([]tool, len(tools))
	for i, t := range tools {
		list[i] = tool{Name: t.Name, Description: t.Description}
		if json.Valid(t.Parameters) {
			list[i].Parameters = t.Parameters
		}
	}
	b.WriteString("You can call these tools: ")
	writeJSON(b, list)
	if parallel {
		b.WriteString(`. To call tools, answer with only a JSON array of one or more calls, each {"name": "<tool name>", "arguments": {<its arguments>}}.`)
		return
	}
	b.WriteString(`. To call a tool, answer with only {"name": "<tool name>", "arguments": {<its arguments>}}.`)
}

// writeCalls writes calls as the model would have generated them: one
// call as an object, several as an array.
func writeCalls(b *strings.Builder, calls []ToolCall) {
	type call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	list := make([]call, len(calls))
	for i, c := range calls {
		list[i] = call{Name: c.Name, Arguments: json.RawMessage(c.Arguments)}
		if !json.Valid(list[i].Arguments) { // not JSON: shown as the string it is
			var q strings.Builder
			writeJSON(&q, c.Arguments)
			list[i].Arguments = json.RawMessage(q.String())
		}
	}
	if len(list) == 1 {
		writeJSON(b, list[0])
		return
	}
	writeJSON(b, list)
}

// writeJSON writes v compactly, without encoding/json's HTML escapes
// (a prompt is not HTML).
func writeJSON(b *strings.Builder, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // cannot fail: strings and valid JSON
		return
	}
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
