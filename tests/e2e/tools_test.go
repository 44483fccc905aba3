package e2e

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// A tool call forced by tool_choice comes out of the real tiny story
// model, sampled at temperature 1, as a call of the right function whose
// arguments satisfy its schema: the engine masks every token that would
// leave the call schema. Streamed, the SDK's accumulator reassembles the
// same shape; the follow-up with the tool's answer is text.
func TestToolCallsAgainstMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	model, tok := StoriesModel(t)
	m := StartMesh(t, 1, "round-robin", "-executor", "llama", "-model", model, "-tokenizer", tok)
	c := client(m)
	id := waitModel(t, c)
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("The weather in a city."),
			Parameters: shared.FunctionParameters{
				"type": "object", "additionalProperties": false, "required": []string{"city", "days"},
				"properties": map[string]any{
					"city": map[string]any{"type": "string", "maxLength": 12},
					"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
				},
			},
		}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "now"}),
	}
	for _, tc := range []struct {
		name     string
		choice   openai.ChatCompletionToolChoiceOptionUnionParam
		parallel bool
		only     string
	}{
		{name: "required", choice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}},
		{name: "required, parallel", choice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, parallel: true},
		{name: "named", choice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}), only: "get_weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{
				Model:    id,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
				Tools:    tools, ToolChoice: tc.choice, ParallelToolCalls: openai.Bool(tc.parallel),
				MaxTokens: openai.Int(128), Temperature: openai.Float(1), Seed: openai.Int(7),
			}
			got, err := c.Chat.Completions.New(t.Context(), params)
			if err != nil {
				var apiErr *openai.Error
				if errors.As(err, &apiErr) {
					t.Fatalf("%v: %s", err, apiErr.RawJSON())
				}
				t.Fatal(err)
			}
			reply := got.Choices[0]
			if reply.FinishReason != "tool_calls" {
				t.Fatalf("finish %q, message %+v", reply.FinishReason, reply.Message)
			}
			checkMeshCalls(t, "whole", reply.Message.ToolCalls, tc.parallel, tc.only)

			stream := c.Chat.Completions.NewStreaming(t.Context(), params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatal("the accumulator refused a chunk")
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("streamed finish %q", acc.Choices[0].FinishReason)
			}
			checkMeshCalls(t, "streamed", acc.Choices[0].Message.ToolCalls, tc.parallel, tc.only)

			params.Messages = append(params.Messages, reply.Message.ToParam())
			for _, call := range reply.Message.ToolCalls {
				params.Messages = append(params.Messages, openai.ToolMessage("Sunny, 18 C.", call.ID))
			}
			params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
			params.MaxTokens = openai.Int(16)
			next, err := c.Chat.Completions.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if len(next.Choices[0].Message.ToolCalls) != 0 || next.Choices[0].Message.Content == "" {
				t.Fatalf("follow-up %+v", next.Choices[0].Message)
			}
			t.Logf("calls %s; then %q", reply.Message.RawJSON(), next.Choices[0].Message.Content)
		})
	}
}

// checkMeshCalls checks calls against the tools' schemas.
func checkMeshCalls(t *testing.T, how string, calls []openai.ChatCompletionMessageToolCallUnion, parallel bool, only string) {
	t.Helper()
	if len(calls) == 0 || len(calls) > 1 && !parallel {
		t.Fatalf("%s: %d calls", how, len(calls))
	}
	for _, call := range calls {
		var args map[string]any
		if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
			t.Fatalf("%s: arguments %q: %v", how, call.Function.Arguments, err)
		}
		switch name := call.Function.Name; {
		case only != "" && name != only:
			t.Fatalf("%s: called %q, want %q", how, name, only)
		case name == "now":
			if len(args) != 0 {
				t.Fatalf("%s: now(%s)", how, call.Function.Arguments)
			}
		case name == "get_weather":
			city, ok := args["city"].(string)
			days, isNum := args["days"].(float64)
			if !ok || len([]rune(city)) > 12 || !isNum || days != float64(int(days)) || days < 1 || days > 7 || len(args) != 2 {
				t.Fatalf("%s: get_weather(%s) breaks its schema", how, call.Function.Arguments)
			}
		default:
			t.Fatalf("%s: called %q", how, name)
		}
		if call.Type != "function" || call.ID == "" {
			t.Fatalf("%s: call %+v", how, call)
		}
	}
}
