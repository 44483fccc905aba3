package chattmpl

import (
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/sharedtest"
)

// TestModelTemplateOutput checks whole prompts of a few real templates
// against what reading each template by hand gives.
func TestModelTemplateOutput(t *testing.T) {
	t.Parallel()
	dir := sharedtest.LlamaCpp(t, "models/templates")
	const tool = `{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.", ` +
		`"parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, ` +
		`"unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}`
	tests := []struct {
		file, bos string
		c         Conversation
		want      string
	}{
		{"Qwen-Qwen2.5-7B-Instruct", "", toolConversation,
			"<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
				"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + tool + "\n</tools>\n\n" +
				"For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
				"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n{\"temperature\": 18}\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\nIt is 18 °C in Paris.<|im_end|>\n" +
				"<|im_start|>user\nThanks!<|im_end|>\n" +
				"<|im_start|>assistant\n"},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<｜begin▁of▁sentence｜>", toolConversation,
			"<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is the weather in Paris?" +
				"<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>" +
				"<｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜Assistant｜><｜end▁of▁sentence｜>" +
				"<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{\"temperature\": 18}<｜tool▁output▁end｜>" +
				"<｜tool▁outputs▁end｜>It is 18 °C in Paris.<｜end▁of▁sentence｜><｜User｜>Thanks!<｜Assistant｜><think>\n</think>"},
		{"microsoft-Phi-3.5-mini-instruct", "", chatConversation,
			"<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nWhat is the weather in Paris?<|end|>\n" +
				"<|assistant|>\nIt is 18 °C in Paris.<|end|>\n<|user|>\nThanks!<|end|>\n<|assistant|>\n"},
		{"google-gemma-2-2b-it", "<bos>", chatConversation, // no system role: merged into the first user turn
			"<bos><start_of_turn>user\nYou are a helpful assistant.\nWhat is the weather in Paris?<end_of_turn>\n" +
				"<start_of_turn>model\nIt is 18 °C in Paris.<end_of_turn>\n<start_of_turn>user\nThanks!<end_of_turn>\n<start_of_turn>model\n"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join(dir, tc.file+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := Jinja(tc.file, string(src), tc.bos, "</s>")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
