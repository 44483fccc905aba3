package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// The reply building of tool calls, whole and streamed, from the
// generated text alone.

func testToolUse(choice string, parallel bool) *openai.ToolUse {
	return &openai.ToolUse{Tools: []openai.FunctionDef{{Name: "get_weather"}, {Name: "now"}}, Choice: choice, Parallel: parallel}
}

// counter numbers call ids, so expectations can name them.
func counter() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("call_%d", n) }
}

type toolCase struct {
	name     string
	use      *openai.ToolUse
	parts    []string // the text as the worker's deltas bring it
	finish   string
	message  string   // the whole response's message, as JSON
	reason   string   // its finish_reason
	streamed []string // the stream's deltas (then finish_reason)
}

const (
	roleOnly  = `{"role":"assistant"}`
	roleEmpty = `{"role":"assistant","content":""}`
)

var toolCases = []toolCase{
	{
		name: "forced", use: testToolUse(openai.ChoiceRequired, false),
		parts: []string{` {"name":"get_weather","argu`, `ments": {"city"`, `:"Paris"}`, "}\n"}, finish: "stop",
		message: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`,
		reason:  "tool_calls",
		streamed: []string{roleOnly,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":":\"Paris\"}"}}]}`,
			`{} tool_calls`},
	},
	{
		name: "forced, arguments first", use: testToolUse(openai.ChoiceFunction, false),
		parts: []string{`{"arguments":[1, "}"],`, `"name":"now"}`}, finish: "stop",
		message: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"[1, \"}\"]"}}]}`,
		reason:  "tool_calls",
		streamed: []string{roleOnly,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"now","arguments":"[1, \"}\"]"}}]}`,
			`{} tool_calls`},
	},
	{
		name: "forced, parallel", use: testToolUse(openai.ChoiceRequired, true),
		parts: []string{`[{"name":"now","arguments":{}}, {"name":"get_weather","arguments":{"city":"Oslo"}}`, ` ]`}, finish: "stop",
		message: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}},` +
			`{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
		reason: "tool_calls",
		streamed: []string{roleOnly,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}},` +
				`{"index":1,"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`,
			`{} tool_calls`},
	},
	{
		name: "forced, cut short in the arguments", use: testToolUse(openai.ChoiceRequired, false),
		parts: []string{`{"name":"get_weather",`, `"arguments":{"ci`}, finish: "length",
		message: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]}`,
		reason:  "length",
		streamed: []string{roleOnly,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`,
			`{} length`},
	},
	{
		name: "forced, cut short before the name", use: testToolUse(openai.ChoiceRequired, false),
		parts: []string{`{"name":`, `"get_w`}, finish: "length",
		message: `{"role":"assistant","content":"{\"name\":\"get_w"}`, reason: "length",
		streamed: []string{roleOnly, `{"content":"{\"name\":\"get_w"}`, `{} length`},
	},
	{
		name: "forced, the worker ignored the schema", use: testToolUse(openai.ChoiceRequired, false),
		parts: []string{`Once `, `upon`}, finish: "stop",
		message: `{"role":"assistant","content":"Once upon"}`, reason: "stop",
		streamed: []string{roleOnly, `{"content":"Once "}`, `{"content":"upon"}`, `{} stop`},
	},
	{
		name: "auto, a call", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{"\n ", `{"name": "now", `, `"arguments": {"tz": "UTC"}}`, " "}, finish: "stop",
		message: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"{\"tz\": \"UTC\"}"}}]}`,
		reason:  "tool_calls",
		streamed: []string{roleEmpty,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"now","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"tz\": \"UTC\"}"}}]}`,
			`{} tool_calls`},
	},
	{
		name: "auto, text", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{" ", `It is {"x"`, `.`}, finish: "stop",
		message: `{"role":"assistant","content":" It is {\"x\"."}`, reason: "stop",
		streamed: []string{roleEmpty, `{"content":" It is {\"x\""}`, `{"content":"."}`, `{} stop`},
	},
	{
		name: "auto, JSON that is no call", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{`{"name":"now",`, `"arguments":{},"why":1}`}, finish: "stop",
		message: `{"role":"assistant","content":"{\"name\":\"now\",\"arguments\":{},\"why\":1}"}`, reason: "stop",
		streamed: []string{roleEmpty, `{"content":"{\"name\":\"now\",\"arguments\":{},\"why\":1}"}`, `{} stop`},
	},
	{
		name: "auto, a function not offered", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{`{"name":"later","arguments":{}}`}, finish: "stop",
		message: `{"role":"assistant","content":"{\"name\":\"later\",\"arguments\":{}}"}`, reason: "stop",
		streamed: []string{roleEmpty, `{"content":"{\"name\":\"later\",\"arguments\":{}}"}`, `{} stop`},
	},
	{
		name: "auto, arguments not an object", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{`{"name":"now","arguments":"{}"}`}, finish: "stop",
		message: `{"role":"assistant","content":"{\"name\":\"now\",\"arguments\":\"{}\"}"}`, reason: "stop",
		streamed: []string{roleEmpty, `{"content":"{\"name\":\"now\",\"arguments\":\"{}\"}"}`, `{} stop`},
	},
	{
		name: "auto, a call cut short", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{`{"name":"now","arguments":{}}`}, finish: "length",
		message: `{"role":"assistant","content":"{\"name\":\"now\",\"arguments\":{}}"}`, reason: "length",
		streamed: []string{roleEmpty, `{"content":"{\"name\":\"now\",\"arguments\":{}}"}`, `{} length`},
	},
	{
		name: "auto, two calls without parallel", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{`[{"name":"now","arguments":{}},{"name":"now","arguments":{}}]`}, finish: "stop",
		message: `{"role":"assistant","content":"[{\"name\":\"now\",\"arguments\":{}},{\"name\":\"now\",\"arguments\":{}}]"}`, reason: "stop",
		streamed: []string{roleEmpty, `{"content":"[{\"name\":\"now\",\"arguments\":{}},{\"name\":\"now\",\"arguments\":{}}]"}`, `{} stop`},
	},
	{
		name: "auto, two calls, parallel", use: testToolUse(openai.ChoiceAuto, true),
		parts: []string{`[{"name":"now","arguments":{}},`, `{"name":"get_weather","arguments":{"city":"Rome"}}]`}, finish: "stop",
		message: `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}},` +
			`{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}`,
		reason: "tool_calls",
		streamed: []string{roleEmpty,
			`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"now","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`,
			`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\":\"Rome\"}"}}]}`,
			`{} tool_calls`},
	},
	{
		name: "auto, blanks only", use: testToolUse(openai.ChoiceAuto, false),
		parts: []string{" ", "\n"}, finish: "stop",
		message: `{"role":"assistant","content":" \n"}`, reason: "stop",
		streamed: []string{roleEmpty, `{"content":" \n"}`, `{} stop`},
	},
}

func TestToolReplyWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range toolCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := chatFormat{tools: newToolReply(tc.use, counter())}
			body := f.whole(call{}, strings.Join(tc.parts, ""), tc.finish, nil, openai.Usage{}).(openai.ChatCompletion)
			msg, err := json.Marshal(body.Choices[0].Message)
			if err != nil {
				t.Fatal(err)
			}
			if string(msg) != tc.message || body.Choices[0].FinishReason != tc.reason {
				t.Fatalf("message %s finish %q\nwant    %s finish %q", msg, body.Choices[0].FinishReason, tc.message, tc.reason)
			}
		})
	}
}

func TestToolReplyStream(t *testing.T) {
	t.Parallel()
	for _, tc := range toolCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := chatFormat{tools: newToolReply(tc.use, counter())}
			var evs []any
			add := func(v any) {
				if many, ok := v.([]any); ok {
					evs = append(evs, many...)
				} else if v != nil {
					evs = append(evs, v)
				}
			}
			// Each part brings one token's logprob entry; every entry
			// reaches the client exactly once.
			lp := []generate.Logprob{{Token: generate.TokenLogprob{Bytes: []byte("x")}}}
			add(f.start(call{}))
			for _, p := range tc.parts {
				add(f.delta(call{}, p, lp))
			}
			add(f.finish(call{}, tc.finish, nil))
			got, entries := streamedDeltas(t, evs)
			if strings.Join(got, "\n") != strings.Join(tc.streamed, "\n") {
				t.Fatalf("streamed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.streamed, "\n"))
			}
			if entries != len(tc.parts) {
				t.Fatalf("%d logprob entries sent for %d tokens", entries, len(tc.parts))
			}
		})
	}
}

// streamedDeltas renders each chunk's delta as JSON, followed by its
// finish reason when it has one, and counts the logprob entries.
func streamedDeltas(t *testing.T, evs []any) ([]string, int) {
	t.Helper()
	var out []string
	entries := 0
	for _, ev := range evs {
		ch, ok := ev.(openai.ChatChunk)
		if !ok || len(ch.Choices) != 1 {
			t.Fatalf("not a one-choice chunk: %#v", ev)
		}
		c := ch.Choices[0]
		b, err := json.Marshal(c.Delta)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if c.FinishReason != nil {
			s += " " + *c.FinishReason
		}
		if c.Logprobs != nil {
			entries += len(c.Logprobs.Content)
		}
		out = append(out, s)
	}
	return out, entries
}

// Streamed arguments, wherever the deltas split the text, concatenate to
// the whole response's.
func TestToolReplySplits(t *testing.T) {
	t.Parallel()
	const text = ` [ {"name" : "get_weather" , "arguments" : {"city": "Sao \"P\" \\ {[", "n": [1, {"a": -2.5e3}]} } , {"name":"now","arguments":true} ] `
	use := testToolUse(openai.ChoiceRequired, true)
	whole := chatFormat{tools: newToolReply(use, counter())}.whole(call{}, text, "stop", nil, openai.Usage{}).(openai.ChatCompletion)
	want := whole.Choices[0].Message.ToolCalls
	if len(want) != 2 || want[0].Function.Arguments != `{"city": "Sao \"P\" \\ {[", "n": [1, {"a": -2.5e3}]}` || want[1].Function.Arguments != "true" {
		t.Fatalf("whole %+v", want)
	}
	for size := 1; size <= 7; size++ {
		f := chatFormat{tools: newToolReply(use, counter())}
		args := make([]string, 2)
		collect := func(v any) {
			list, _ := v.([]any)
			if v != nil && list == nil {
				list = []any{v}
			}
			for _, ev := range list {
				for _, d := range ev.(openai.ChatChunk).Choices[0].Delta.ToolCalls {
					args[d.Index] += d.Function.Arguments
				}
			}
		}
		for i := 0; i < len(text); i += size {
			collect(f.delta(call{}, text[i:min(i+size, len(text))], nil))
		}
		collect(f.finish(call{}, "stop", nil))
		if args[0] != want[0].Function.Arguments || args[1] != want[1].Function.Arguments {
			t.Fatalf("split by %d: %q", size, args)
		}
	}
}
