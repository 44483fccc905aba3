package chattmpl

import "testing"

func TestRenderTools(t *testing.T) {
	t.Parallel()
	weather := Tool{Name: "get_weather", Description: "Weather <now> & here.",
		Parameters: []byte(`{ "type": "object", "properties": {"city": {"type": "string"}} }`)}
	clock := Tool{Name: "now"}
	traffic := []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: "tool", Content: "18 C"},
		{Role: "assistant", Content: "Checking both.", ToolCalls: []ToolCall{{Name: "now", Arguments: "{}"}, {Name: "get_weather", Arguments: "not json"}}},
		{Role: "tool", Content: "noon"},
	}
	const (
		list         = `System: You can call these tools: [{"name":"get_weather","description":"Weather <now> & here.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"now"}]. `
		single       = `To call a tool, answer with only {"name": "<tool name>", "arguments": {<its arguments>}}.` + "\n"
		many         = `To call tools, answer with only a JSON array of one or more calls, each {"name": "<tool name>", "arguments": {<its arguments>}}.` + "\n"
		plainTraffic = "User: Weather in Paris?\n" +
			`Assistant: {"name":"get_weather","arguments":{"city":"Paris"}}` + "\n" +
			"Tool: 18 C\n" +
			`Assistant: Checking both. [{"name":"now","arguments":{}},{"name":"get_weather","arguments":"not json"}]` + "\n" +
			"Tool: noon\n" +
			"Assistant:"
		rawTraffic = "Weather in Paris?\n" +
			`{"name":"get_weather","arguments":{"city":"Paris"}}` + "\n" +
			"18 C\n" +
			`Checking both. [{"name":"now","arguments":{}},{"name":"get_weather","arguments":"not json"}]` + "\n" +
			"noon"
	)
	tests := []struct {
		name string
		tmpl func(Conversation) string
		c    Conversation
		want string
	}{
		{"plain/tools", Plain, Conversation{Messages: traffic[:1], Tools: []Tool{weather, clock}},
			list + single + "User: Weather in Paris?\nAssistant:"},
		{"plain/parallel", Plain, Conversation{Messages: traffic[:1], Tools: []Tool{weather, clock}, Parallel: true},
			list + many + "User: Weather in Paris?\nAssistant:"},
		{"plain/traffic without tools", Plain, Conversation{Messages: traffic}, plainTraffic},
		{"plain/traffic with tools", Plain, Conversation{Messages: traffic, Tools: []Tool{weather, clock}}, list + single + plainTraffic},
		{"raw/tools", Raw, Conversation{Messages: traffic[:1], Tools: []Tool{weather}}, "Weather in Paris?"},
		{"raw/traffic", Raw, Conversation{Messages: traffic, Tools: []Tool{weather}, Parallel: true}, rawTraffic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.tmpl(tc.c); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
