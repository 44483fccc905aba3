package openai

import "encoding/json"

// Object names and finish reasons as OpenAI spells them.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectTextCompletion      = "text_completion"
	ObjectList                = "list"
	ObjectModel               = "model"

	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"

	ToolTypeFunction = "function"
)

// Usage counts the tokens of one request.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks prompt tokens down.
type PromptTokensDetails struct {
	// CachedTokens were served from a worker's prefix cache.
	CachedTokens int `json:"cached_tokens"`
}

// ChatCompletion is the non-streaming chat response.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ChatChoice is one chat completion choice.
type ChatChoice struct {
	Index        int            `json:"index"`
	Message      AssistantReply `json:"message"`
	FinishReason string         `json:"finish_reason"`
	Logprobs     *ChatLogprobs  `json:"logprobs"`
}

// AssistantReply is the generated message: text, or tool calls.
type AssistantReply struct {
	Role string `json:"role"`
	// Content is the text; it is sent as null when ToolCalls is set.
	Content string `json:"content"`
	// ToolCalls are the calls the reply makes, if it makes any.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// MarshalJSON writes content as null in a reply that calls tools, as
// OpenAI does.
func (r AssistantReply) MarshalJSON() ([]byte, error) {
	type wire struct {
		Role      string     `json:"role"`
		Content   *string    `json:"content"`
		ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	}
	w := wire{Role: r.Role, ToolCalls: r.ToolCalls}
	if len(r.ToolCalls) == 0 {
		w.Content = &r.Content
	}
	return json.Marshal(w)
}

// JSONSchema describes the reply for the OpenAPI document (content is
// null beside tool_calls).
func (AssistantReply) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "required": []string{"role", "content"}, "properties": map[string]any{
		"role":       map[string]any{"type": "string", "enum": []string{"assistant"}},
		"content":    map[string]any{"type": []string{"string", "null"}},
		"tool_calls": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/components/schemas/ToolCall"}},
	}}
}

// ToolCall is one call to a function: in a reply, and in the assistant
// messages of a conversation.
type ToolCall struct {
	// ID names the call ("call_..."); a tool message answers it.
	ID string `json:"id"`
	// Type is "function".
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function a call calls.
type FunctionCall struct {
	Name string `json:"name"`
	// Arguments are the call's arguments as JSON text.
	Arguments string `json:"arguments"`
}

// ChatChunk is one server-sent event of a streamed chat completion.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	// Usage is set only on the last chunk, with include_usage.
	Usage *Usage `json:"usage,omitempty"`
}

// ChatChunkChoice is the choice of one chunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
}

// ChatDelta is the new part of the assistant message.
type ChatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is the new part of one tool call in a stream: the call's
// first delta has its id, type and function name; the arguments arrive as
// fragments to concatenate.
type ToolCallDelta struct {
	// Index is the call's position in the reply's tool_calls.
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function FunctionCallDelta `json:"function"`
}

// FunctionCallDelta is the new part of a call's function.
type FunctionCallDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Completion is the completion response, and with Object text_completion
// also each streamed chunk.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one completion choice. In chunks FinishReason is null
// until the last one.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	FinishReason *string             `json:"finish_reason"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
}

// ModelList is the response of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one served model.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
