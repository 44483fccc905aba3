package openai

// Params are the generation parameters chat and completion requests share,
// embedded in both request types.
type Params struct {
	// Model names a model served by a healthy worker.
	Model string `json:"model"`
	// Stream selects server-sent events.
	Stream bool `json:"stream,omitempty"`
	// StreamOptions tunes streaming; include_usage adds a final usage chunk.
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	// MaxTokens bounds the completion; default is what the context leaves.
	MaxTokens *int64 `json:"max_tokens,omitempty"`
	// Temperature in [0, 2]; 0 is greedy. Default 1.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP in (0, 1]. Default 1.
	TopP *float64 `json:"top_p,omitempty"`
	// Seed makes sampling reproducible on one worker.
	Seed *int64 `json:"seed,omitempty"`
	// Stop is a string or a list of up to 16 strings; the match is not
	// returned.
	Stop Stop `json:"stop,omitempty"`
	// N is how many choices to generate for the prompt, 1 to MaxN
	// (default 1). Choice i of a seeded request uses seed+i.
	N *int64 `json:"n,omitempty"`
	// PresencePenalty in [-2, 2] is subtracted from the logit of every
	// token the completion already holds. Default 0.
	PresencePenalty *float64 `json:"presence_penalty,omitempty"`
	// FrequencyPenalty in [-2, 2], times the number of times a token
	// occurs in the completion so far, is subtracted from its logit.
	// Default 0.
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	// LogitBias maps token ids (decimal strings, below the model's
	// vocabulary size) to a bias in [-100, 100] added to their logits at
	// every step; at most MaxLogitBias entries. -100 bans a token, 100
	// all but forces it.
	LogitBias map[string]float64 `json:"logit_bias,omitempty"`
	// ResponseFormat holds the output to JSON: any JSON object, or a value
	// valid against a JSON schema. Default free text.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// User is accepted and ignored.
	User string `json:"user,omitempty"`

	// TopK (extension, as vLLM): keep the k most likely tokens; 0 is all.
	TopK *int64 `json:"top_k,omitempty"`
	// IgnoreEOS (extension, as vLLM): generate through end-of-sequence.
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// StopTokenIDs (extension, as vLLM): extra token ids that end the
	// completion.
	StopTokenIDs []int64 `json:"stop_token_ids,omitempty"`
	// Switchyard carries scheduling hints (extension).
	Switchyard *Extension `json:"switchyard,omitempty"`
}

// StreamOptions are OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// Extension is the "switchyard" request object: hints for the router and
// the engine.
type Extension struct {
	// Priority: higher is scheduled first; default 0.
	Priority int32 `json:"priority,omitempty"`
	// ExpectedOutputTokens is the client's estimate, for load prediction.
	ExpectedOutputTokens uint32 `json:"expected_output_tokens,omitempty"`
	// SessionID keeps a session's requests on one worker when possible.
	SessionID string `json:"session_id,omitempty"`
	// WorkerID pins the request to one worker instance (router mode direct).
	WorkerID string `json:"worker_id,omitempty"`
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Params
	// Messages is the conversation, rendered by the model's chat template.
	Messages []ChatMessage `json:"messages"`
	// MaxCompletionTokens is the newer name of max_tokens; it wins when both
	// are set.
	MaxCompletionTokens *int64 `json:"max_completion_tokens,omitempty"`
	// Logprobs returns the log probability of each output token in
	// choices[].logprobs.content. Workers of the sim executor reject it.
	Logprobs *bool `json:"logprobs,omitempty"`
	// TopLogprobs in [0, 20] also returns that many most likely tokens at
	// each position; non-zero needs logprobs=true.
	TopLogprobs *int64 `json:"top_logprobs,omitempty"`

	// Tools are the functions the model may call (at most MaxTools).
	Tools []Tool `json:"tools,omitempty"`
	// ToolChoice is "none", "auto" (the default with tools), "required",
	// or {"type":"function","function":{"name":...}}: "required" and a
	// named function make the reply a call, valid by construction.
	ToolChoice ToolChoice `json:"tool_choice,omitempty"`
	// ParallelToolCalls lets the reply be several calls. Default false,
	// unlike OpenAI's true.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`

	// use is how the tools shape the reply, set by DecodeChat.
	use *ToolUse
}

// ToolUse returns how the request's tools shape the reply, or nil when
// they do not (no tools, or tool_choice "none").
func (r *ChatRequest) ToolUse() *ToolUse { return r.use }

// ChatMessage is one message of a conversation.
type ChatMessage struct {
	// Role is system, developer (same as system), user, assistant or tool.
	Role string `json:"role"`
	// Content is a string or an array of text parts; it may be null or
	// absent in an assistant message with tool_calls.
	Content Content `json:"content"`
	// Name is, in a tool message, the tool's name (chat templates show
	// it); elsewhere it is accepted and ignored.
	Name string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers: the id of a tool call
	// of an earlier assistant message.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Params
	// Prompt is a string, a list of one string, a list of token ids, or a
	// list of one list of token ids.
	Prompt Prompt `json:"prompt"`
	// Logprobs in [0, 5] returns each output token's log probability and
	// that many most likely tokens at each position in
	// choices[].logprobs; absent or null is off. Workers of the sim
	// executor reject it.
	Logprobs *int64 `json:"logprobs,omitempty"`
	// Echo puts the prompt's text before the completion's in each choice
	// (a token-id prompt decoded). Not with logprobs: the prompt's tokens
	// have none.
	Echo bool `json:"echo,omitempty"`
	// BestOf must be absent or equal to n: every choice is returned.
	BestOf *int64 `json:"best_of,omitempty"`
	// Suffix must be empty (not implemented).
	Suffix string `json:"suffix,omitempty"`
}
