package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// Tool calling through the official SDK's types and helpers, against fake
// workers that answer a call schema as a constrained engine would: with a
// call of the first function the schema allows.

const (
	parisCall = `{"name":"get_weather","arguments":{"city":"Paris"}}`
	nowCallJS = `{"name":"now","arguments":{}}`
)

// callingReply answers a request under a call schema with a call, and
// recites the script otherwise.
func callingReply(m *workerv1.GenerateRequest) string {
	schema := m.GetSampling().GetConstraint().GetJsonSchema()
	call := parisCall
	if !strings.Contains(schema, `"const":"get_weather"`) {
		call = nowCallJS
	}
	switch {
	case schema == "":
		return ""
	case strings.HasPrefix(schema, `{"type":"array"`):
		return "[" + call + "]"
	}
	return call
}

func sdkTools() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("The weather in a city now."), Strict: openai.Bool(true),
			Parameters: shared.FunctionParameters{
				"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required": []string{"city"}, "additionalProperties": false,
			},
		}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "now"}),
	}
}

func TestSDKToolCalls(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Reply: callingReply}}})
	c := sdkClient(s, "unused")
	required := openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	named := openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "now"})
	tests := []struct {
		name     string
		choice   openai.ChatCompletionToolChoiceOptionUnionParam
		parallel bool
		want     []string // name, arguments of each call
	}{
		{"required", required, false, []string{"get_weather", `{"city":"Paris"}`}},
		{"required, parallel", required, true, []string{"get_weather", `{"city":"Paris"}`}},
		{"named", named, false, []string{"now", `{}`}},
	}
	t.Run("calls", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				sdkToolRoundTrip(t, c, tc.choice, tc.parallel, tc.want)
			})
		}
	})
	// The workers were asked for calls under the schema, with the tools
	// and the tool traffic in the prompt.
	var sawFollowUp, sawNamed bool
	for _, req := range s.Workers[0].Requests() {
		schema := req.GetSampling().GetConstraint().GetJsonSchema()
		sawNamed = sawNamed || strings.Contains(schema, `"const":"now"`) && !strings.Contains(schema, "get_weather")
		prompt := promptText(req.GetTokenIds())
		if !strings.HasPrefix(prompt, `System: You can call these tools: [{"name":"get_weather","description":"The weather in a city now.",`) {
			t.Fatalf("prompt %q", prompt)
		}
		if strings.Contains(prompt, "Tool: 18 C and sunny\nAssistant:") {
			sawFollowUp = true
			if req.GetSampling().GetConstraint() != nil {
				t.Fatalf("an auto reply was constrained: %v", req.GetSampling().GetConstraint())
			}
		}
	}
	if !sawFollowUp || !sawNamed {
		t.Fatalf("follow-up prompt with the tool's answer seen: %v; schema of the named function alone: %v", sawFollowUp, sawNamed)
	}
}

// With tool_choice "none" the tools are not offered: the prompt, the
// sampling and the reply are those of a request without tools.
func TestToolChoiceNone(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":12,"tool_choice":"none","tools":[{"type":"function","function":{"name":"now"}}]`))
	var got struct {
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
	}
	decode(t, resp, &got)
	if c := got.Choices[0]; c.Message["content"] != want(chatPromptLen, 12) || c.Message["tool_calls"] != nil || c.FinishReason != "length" {
		t.Fatalf("got %+v", c)
	}
	req := s.Workers[0].Requests()[0]
	if p := promptText(req.GetTokenIds()); p != "User: Hi\nAssistant:" || req.GetSampling().GetConstraint() != nil {
		t.Fatalf("prompt %q, constraint %v", p, req.GetSampling().GetConstraint())
	}
}

// sdkToolRoundTrip asks for a call, whole and streamed, then sends the
// follow-up with the call and the tool's answer.
func sdkToolRoundTrip(t *testing.T, c openai.Client, choice openai.ChatCompletionToolChoiceOptionUnionParam, parallel bool, want []string) {
	t.Helper()
	params := openai.ChatCompletionNewParams{
		Model:    "tiny",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools:    sdkTools(), ToolChoice: choice, ParallelToolCalls: openai.Bool(parallel),
	}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	reply := got.Choices[0]
	checkCalls(t, "whole", reply.Message.ToolCalls, want)
	if reply.FinishReason != "tool_calls" || reply.Message.JSON.Content.Raw() != "null" {
		t.Fatalf("finish %q content %s", reply.FinishReason, reply.Message.JSON.Content.Raw())
	}

	streamed := params
	streamed.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(t.Context(), streamed)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatal("the accumulator refused a chunk")
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "streamed", acc.Choices[0].Message.ToolCalls, want)
	if acc.Choices[0].FinishReason != "tool_calls" || acc.Choices[0].Message.Content != "" || acc.Usage.CompletionTokens != got.Usage.CompletionTokens {
		t.Fatalf("streamed finish %q content %q usage %+v", acc.Choices[0].FinishReason, acc.Choices[0].Message.Content, acc.Usage)
	}

	// The follow-up carries the assistant's calls and the tool's answer;
	// without a forced choice the reply is text.
	params.Messages = append(params.Messages, reply.Message.ToParam(), openai.ToolMessage("18 C and sunny", reply.Message.ToolCalls[0].ID))
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	next, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if m := next.Choices[0].Message; len(m.ToolCalls) != 0 || m.Content == "" || next.Choices[0].FinishReason != "length" {
		t.Fatalf("follow-up %+v", next.Choices[0])
	}
}

func checkCalls(t *testing.T, how string, calls []openai.ChatCompletionMessageToolCallUnion, want []string) {
	t.Helper()
	if len(calls) != len(want)/2 {
		t.Fatalf("%s: %d calls, want %d: %+v", how, len(calls), len(want)/2, calls)
	}
	for i, c := range calls {
		if c.Type != "function" || !strings.HasPrefix(c.ID, "call_") || c.Function.Name != want[2*i] || c.Function.Arguments != want[2*i+1] {
			t.Fatalf("%s: call %d = %+v, want %s(%s)", how, i, c, want[2*i], want[2*i+1])
		}
	}
}

// promptText decodes a byte-tokenizer prompt (after its BOS).
func promptText(ids []uint32) string {
	var b strings.Builder
	for _, id := range ids[1:] {
		b.WriteByte(byte(id - tokenizer.ByteOffset))
	}
	return b.String()
}

// In "auto" a reply that is a call of an offered function is returned as
// one; the SDK's accumulator reassembles it from the stream.
func TestSDKAutoToolCall(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Reply: func(*workerv1.GenerateRequest) string { return " " + parisCall }}}})
	c := sdkClient(s, "unused")
	params := openai.ChatCompletionNewParams{
		Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}, Tools: sdkTools(),
	}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "whole", got.Choices[0].Message.ToolCalls, []string{"get_weather", `{"city":"Paris"}`})
	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	var finished []string
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc.Name+tc.Arguments)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "streamed", acc.Choices[0].Message.ToolCalls, []string{"get_weather", `{"city":"Paris"}`})
	if len(finished) != 1 || finished[0] != `get_weather{"city":"Paris"}` || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("JustFinishedToolCall saw %q, finish %q", finished, acc.Choices[0].FinishReason)
	}
	if req := s.Workers[0].Requests()[0]; req.GetSampling().GetConstraint() != nil {
		t.Fatalf("auto was constrained: %v", req.GetSampling().GetConstraint())
	}
}

// Bad tools are refused before any worker is asked, naming the field.
func TestSDKToolErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Reply: callingReply}}})
	c := sdkClient(s, "unused")
	base := openai.ChatCompletionNewParams{Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}, Tools: sdkTools()}
	tests := []struct {
		name   string
		mutate func(*openai.ChatCompletionNewParams)
		param  string
	}{
		{"unsupported keyword", func(p *openai.ChatCompletionNewParams) {
			p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "lookup",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "pattern": "^a"}}}}))
		}, "tools[2].function.parameters"},
		{"unknown function", func(p *openai.ChatCompletionNewParams) {
			p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "later"})
		}, "tool_choice"},
		{"bad name", func(p *openai.ChatCompletionNewParams) {
			p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get weather"})}
		}, "tools[0].function.name"},
		{"tool message answering nothing", func(p *openai.ChatCompletionNewParams) {
			p.Messages = append(p.Messages, openai.ToolMessage("18 C", "call_nope"))
		}, "messages[1].tool_call_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := base
			tc.mutate(&p)
			_, err := c.Chat.Completions.New(t.Context(), p)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != tc.param {
				t.Fatalf("got %v, want a 400 on %q", err, tc.param)
			}
		})
	}
	if n := s.Workers[0].Started(); n != 0 {
		t.Fatalf("%d generations started", n)
	}
}

// A forced call cut short by max_tokens: once its name is complete it is
// a tool call with the arguments so far, before that it is text.
func TestToolCallLength(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Reply: callingReply}}})
	body := func(maxTokens int) string {
		return `{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":` + strconv.Itoa(maxTokens) +
			`,"tool_choice":"required","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	}
	cut := len(`{"name":"get_weather","arguments":{"ci`)
	var got struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	decode(t, s.post(t, "/v1/chat/completions", body(cut)), &got)
	if m := string(got.Choices[0].Message); got.Choices[0].FinishReason != "length" ||
		!strings.Contains(m, `"content":null`) || !strings.Contains(m, `"arguments":"{\"ci"`) {
		t.Fatalf("cut in the arguments: %s, finish %q", m, got.Choices[0].FinishReason)
	}
	decode(t, s.post(t, "/v1/chat/completions", body(8)), &got)
	if m := string(got.Choices[0].Message); got.Choices[0].FinishReason != "length" || m != `{"role":"assistant","content":"{\"name\":"}` {
		t.Fatalf("cut before the name: %s, finish %q", m, got.Choices[0].FinishReason)
	}
}
