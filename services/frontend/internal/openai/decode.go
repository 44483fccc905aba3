package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
)

// Limits on request fields, checked before any work is done.
const (
	MaxStop          = 16      // stop strings per request
	MaxStopLen       = 256     // bytes per stop string
	MaxTokensLimit   = 1 << 24 // larger is never a real context
	MaxStopTokenIDs  = 64
	MaxSessionIDLen  = 256
	MaxModelLen      = 512 // bytes; model ids are names, not payloads
	maxTokenIDPrompt = math.MaxUint32

	MaxTopLogprobs        = 20 // chat top_logprobs, as OpenAI
	MaxCompletionLogprobs = 5  // completions logprobs, as OpenAI
)

// Generation is a decoded and range-checked request, in the units the
// backend uses. Context-dependent checks (prompt length, token ids against
// the vocabulary) happen later, once the model is known.
type Generation struct {
	Model string
	// MaxTokens is 0 when the client set none: generate up to the context.
	MaxTokens int
	// MaxTokensParam names the field MaxTokens came from, for errors.
	MaxTokensParam string
	// PromptParam names the prompt's field ("messages" or "prompt").
	PromptParam  string
	Temperature  float32
	TopP         float32
	TopK         uint32
	Seed         *uint64
	Stop         []string
	StopTokenIDs []uint32
	IgnoreEOS    bool
	Stream       bool
	IncludeUsage bool
	Hints        Extension

	// Logprobs asks for each output token's log probability; TopLogprobs
	// (only with Logprobs) for that many most likely tokens at each
	// position.
	Logprobs    bool
	TopLogprobs int

	// Format holds the output to a language: response_format, or the tool
	// call that tool_choice forces. The zero value is free text.
	Format Format

	// PresencePenalty, FrequencyPenalty and LogitBias (token id → bias)
	// adjust the logits; zero and nil change nothing.
	PresencePenalty  float32
	FrequencyPenalty float32
	LogitBias        map[uint32]float32
	// N is the number of choices, in [1, MaxN].
	N int
	// Echo (completions) puts the prompt's text before each choice's.
	Echo bool
}

// Format is a request's structured-output format, as the engine applies
// it (a token mask at every step).
type Format struct {
	// JSONObject asks for any JSON object.
	JSONObject bool
	// JSONSchema asks for a value valid against this schema (a JSON
	// document); it excludes JSONObject.
	JSONSchema []byte
	// Param names the request field the format came from, for errors a
	// worker reports about it ("response_format", "tool_choice").
	Param string
}

// IsZero reports whether f is free text.
func (f Format) IsZero() bool { return !f.JSONObject && len(f.JSONSchema) == 0 }

// DecodeChat decodes and checks a chat completion request. Every error is
// an *Error with status 400.
func DecodeChat(data []byte) (*ChatRequest, Generation, error) {
	var req ChatRequest
	if err := unmarshal(data, &req); err != nil {
		return nil, Generation{}, err
	}
	g, err := req.check()
	if err != nil {
		return nil, Generation{}, err
	}
	g.PromptParam = "messages"
	if req.MaxCompletionTokens != nil {
		if err := checkMaxTokens("max_completion_tokens", *req.MaxCompletionTokens); err != nil {
			return nil, Generation{}, err
		}
		g.MaxTokens, g.MaxTokensParam = int(*req.MaxCompletionTokens), "max_completion_tokens"
	}
	if err := req.checkLogprobs(&g); err != nil {
		return nil, Generation{}, err
	}
	if err := checkMessages(req.Messages); err != nil {
		return nil, Generation{}, err
	}
	if err := req.checkTools(&g); err != nil {
		return nil, Generation{}, err
	}
	return &req, g, nil
}

// DecodeCompletion decodes and checks a completion request. It accepts
// exactly one prompt: a string, a list of one string, a list of token ids,
// or a list of one token-id list. More prompts are a 400 (a batch would
// need n>1-style multiplexing of streams, which this server does not do).
func DecodeCompletion(data []byte) (*CompletionRequest, Generation, error) {
	var req CompletionRequest
	if err := decodeCompletionBody(data, &req); err != nil {
		return nil, Generation{}, err
	}
	g, err := req.check()
	if err != nil {
		return nil, Generation{}, err
	}
	g.PromptParam = "prompt"
	if n := req.Logprobs; n != nil {
		if *n < 0 || *n > MaxCompletionLogprobs {
			return nil, Generation{}, Invalid("logprobs", "logprobs must be in [0, %d], got %d.", MaxCompletionLogprobs, *n)
		}
		g.Logprobs, g.TopLogprobs = true, int(*n)
	}
	if err := checkBestOf(req.BestOf, g.N); err != nil {
		return nil, Generation{}, err
	}
	switch {
	case req.Echo && g.Logprobs:
		return nil, Generation{}, Unsupported("echo", "echo with logprobs is not supported: the prompt's tokens have no logprobs; ask for one or the other.")
	case req.Suffix != "":
		return nil, Generation{}, Unsupported("suffix", "suffix is not supported")
	}
	g.Echo = req.Echo
	if err := checkPrompt(req.Prompt); err != nil {
		return nil, Generation{}, err
	}
	return &req, g, nil
}

// checkLogprobs checks the chat logprobs fields as OpenAI does:
// top_logprobs in [0, 20], and non-zero only with logprobs=true.
func (r *ChatRequest) checkLogprobs(g *Generation) error {
	g.Logprobs = r.Logprobs != nil && *r.Logprobs
	if r.TopLogprobs == nil {
		return nil
	}
	top := *r.TopLogprobs
	if top < 0 || top > MaxTopLogprobs {
		return Invalid("top_logprobs", "top_logprobs must be in [0, %d], got %d.", MaxTopLogprobs, top)
	}
	if top > 0 && !g.Logprobs {
		return Invalid("top_logprobs", "top_logprobs needs logprobs set to true.")
	}
	g.TopLogprobs = int(top)
	return nil
}

// unsupported are the OpenAI request fields this server does not honour
// yet. Asked for, each is a 400 naming it: a client that asked for JSON or
// a tool call and got prose would break later, and worse.
var unsupported = map[string]string{
	"tools":               "tools are only supported by chat completions",
	"tool_choice":         "tool_choice is only supported by chat completions",
	"parallel_tool_calls": "parallel_tool_calls is only supported by chat completions",
	"functions":           "functions (deprecated by OpenAI) is not supported; use tools",
	"function_call":       "function_call (deprecated by OpenAI) is not supported; use tool_choice, and tool_calls in assistant messages",
	"modalities":          "modalities are not supported: this server generates text",
	"audio":               "audio is not supported: this server generates text",
	"prediction":          "predicted outputs are not supported",
	"reasoning_effort":    "reasoning_effort is not supported",
	"service_tier":        "service_tier is not supported",
	"store":               "store is not supported: this server keeps no completions",
	"metadata":            "metadata is not supported: this server keeps no completions",
	"web_search_options":  "web search is not supported",
}

// unmarshal decodes a request body strictly: a field the request types do
// not know is a 400 naming it ("Unrecognized request argument supplied",
// as OpenAI answers), and one of OpenAI's this server does not honour is
// a 400 saying so, rather than either being silently ignored.
func unmarshal(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return Invalid("", "The request body must be a JSON object.")
	}
	err := decodeStrict(data, v)
	if err == nil {
		return nil
	}
	if field, ok := unknownField(err); ok {
		if why, known := unsupported[field]; known {
			return Unsupported(field, why+".")
		}
		return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: field, Code: CodeUnknownParameter,
			Message: fmt.Sprintf("Unrecognized request argument supplied: %s", field)}
	}
	if errors.Is(err, errTrailing) {
		return Invalid("", "Malformed JSON: %v.", err)
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := strings.TrimPrefix(typeErr.Field, "Params.")
		return Invalid(field, "Invalid type for %q: expected %s, got JSON %s.", field, typeErr.Type, typeErr.Value)
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return Invalid("", "Malformed JSON at byte %d: %v.", syntaxErr.Offset, syntaxErr)
	}
	return Invalid("", "Invalid request body: %v.", err)
}

// decodeStrict is json.Unmarshal that refuses unknown fields (in the
// request and its messages) and data after the object.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Errorf("%w at byte %d", errTrailing, dec.InputOffset())
	}
	return nil
}

// errTrailing is data after a request's JSON object.
var errTrailing = errors.New("data after the JSON object")

// unknownField is the field an unknown-field decoding error names.
func unknownField(err error) (string, bool) {
	const prefix = `json: unknown field "`
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, `"`) {
		return "", false
	}
	return msg[len(prefix) : len(msg)-1], true
}

// check validates the shared parameters and converts them.
func (p *Params) check() (Generation, error) {
	g := Generation{Model: p.Model, Temperature: 1, TopP: 1, Stream: p.Stream, IgnoreEOS: p.IgnoreEOS, MaxTokensParam: "max_tokens"}
	if p.Model == "" {
		return g, Invalid("model", "The model parameter is required.")
	}
	if len(p.Model) > MaxModelLen {
		return g, Invalid("model", "The model parameter is longer than %d bytes.", MaxModelLen)
	}
	if p.StreamOptions != nil {
		if !p.Stream {
			return g, Invalid("stream_options", "stream_options is only allowed with stream=true.")
		}
		g.IncludeUsage = p.StreamOptions.IncludeUsage
	}
	if p.MaxTokens != nil {
		if err := checkMaxTokens("max_tokens", *p.MaxTokens); err != nil {
			return g, err
		}
		g.MaxTokens = int(*p.MaxTokens)
	}
	if err := p.checkSampling(&g); err != nil {
		return g, err
	}
	if err := p.checkStops(&g); err != nil {
		return g, err
	}
	if p.Switchyard != nil {
		if len(p.Switchyard.SessionID) > MaxSessionIDLen {
			return g, Invalid("switchyard.session_id", "session_id is longer than %d bytes.", MaxSessionIDLen)
		}
		g.Hints = *p.Switchyard
	}
	return g, nil
}

func (p *Params) checkSampling(g *Generation) error {
	if t := p.Temperature; t != nil {
		if !(*t >= 0 && *t <= 2) {
			return Invalid("temperature", "temperature must be in [0, 2], got %v.", *t)
		}
		g.Temperature = float32(*t)
	}
	if t := p.TopP; t != nil {
		if !(*t > 0 && *t <= 1) {
			return Invalid("top_p", "top_p must be in (0, 1], got %v.", *t)
		}
		g.TopP = float32(*t)
	}
	if k := p.TopK; k != nil {
		if *k < -1 || *k > math.MaxInt32 {
			return Invalid("top_k", "top_k must be -1, 0 (all tokens) or positive, got %d.", *k)
		}
		g.TopK = uint32(max(*k, 0))
	}
	if p.Seed != nil {
		s := uint64(*p.Seed)
		g.Seed = &s
	}
	if err := p.checkN(g); err != nil {
		return err
	}
	if err := p.checkPenalties(g); err != nil {
		return err
	}
	if err := p.checkLogitBias(g); err != nil {
		return err
	}
	f, err := checkFormat(p.ResponseFormat)
	if err != nil {
		return err
	}
	g.Format = f
	return nil
}

func (p *Params) checkStops(g *Generation) error {
	if len(p.Stop) > MaxStop {
		return Invalid("stop", "At most %d stop strings are allowed, got %d.", MaxStop, len(p.Stop))
	}
	for i, s := range p.Stop {
		if s == "" || len(s) > MaxStopLen {
			return Invalid("stop", "stop[%d] must be 1 to %d bytes long.", i, MaxStopLen)
		}
	}
	g.Stop = p.Stop
	if len(p.StopTokenIDs) > MaxStopTokenIDs {
		return Invalid("stop_token_ids", "At most %d stop token ids are allowed.", MaxStopTokenIDs)
	}
	for _, id := range p.StopTokenIDs {
		if id < 0 || id > maxTokenIDPrompt {
			return Invalid("stop_token_ids", "Token id %d is out of range.", id)
		}
		g.StopTokenIDs = append(g.StopTokenIDs, uint32(id))
	}
	return nil
}

func checkMaxTokens(param string, v int64) error {
	if v < 1 || v > MaxTokensLimit {
		return Invalid(param, "%s must be at least 1, got %d.", param, v)
	}
	return nil
}

// checkMessages checks roles, contents and the tool traffic: a tool
// message answers a call of an earlier assistant message, which may then
// have no content.
func checkMessages(msgs []ChatMessage) error {
	if len(msgs) == 0 {
		return Invalid("messages", "messages must contain at least one message.")
	}
	calls := map[string]bool{}
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		case "":
			return Invalid(at+".role", "messages[%d] has no role.", i)
		case "function":
			return Unsupported(at+".role", `Role "function" (deprecated by OpenAI) is not supported; use tool messages.`)
		default:
			return Unsupported(at+".role", fmt.Sprintf("Role %q is not supported; use system, developer, user, assistant or tool.", m.Role))
		}
		if err := checkToolTraffic(at, m, calls); err != nil {
			return err
		}
		if !m.Content.Set {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				continue
			}
			return Invalid(at+".content", "messages[%d] has no content.", i)
		}
		if m.Content.BadPart >= 0 {
			return Unsupported(fmt.Sprintf("%s.content[%d].type", at, m.Content.BadPart),
				fmt.Sprintf("Content part type %q is not supported; only text parts are.", m.Content.BadType))
		}
	}
	return nil
}

// checkToolTraffic checks message at's tool calls or tool_call_id, and
// adds its calls' ids to calls.
func checkToolTraffic(at string, m ChatMessage, calls map[string]bool) error {
	switch {
	case len(m.ToolCalls) > 0 && m.Role != "assistant":
		return Invalid(at+".tool_calls", "Only assistant messages have tool_calls; %s is a %s message.", at, m.Role)
	case m.ToolCallID != "" && m.Role != "tool":
		return Invalid(at+".tool_call_id", "Only tool messages have a tool_call_id; %s is a %s message.", at, m.Role)
	case m.Role == "tool" && m.ToolCallID == "":
		return Invalid(at+".tool_call_id", "%s is a tool message without the tool_call_id of the call it answers.", at)
	case m.Role == "tool" && !calls[m.ToolCallID]:
		return Invalid(at+".tool_call_id", "%s answers tool call %q, which no earlier assistant message made.", at, m.ToolCallID)
	}
	for j, c := range m.ToolCalls {
		cat := fmt.Sprintf("%s.tool_calls[%d]", at, j)
		switch {
		case c.Type != ToolTypeFunction:
			return Invalid(cat+".type", `%s.type must be "function", got %q.`, cat, c.Type)
		case c.ID == "":
			return Invalid(cat+".id", "%s has no id.", cat)
		case c.Function.Name == "":
			return Invalid(cat+".function.name", "%s has no function name.", cat)
		}
		calls[c.ID] = true
	}
	return nil
}

func checkPrompt(p Prompt) error {
	switch {
	case p.Texts == nil && p.Tokens == nil:
		return Invalid("prompt", "The prompt parameter is required.")
	case len(p.Texts)+len(p.Tokens) == 0:
		return Invalid("prompt", "The prompt must not be an empty list.")
	case len(p.Texts)+len(p.Tokens) > 1:
		return Unsupported("prompt", "Only one prompt per request is supported; send one request per prompt.")
	}
	if len(p.Tokens) == 1 {
		if len(p.Tokens[0]) == 0 {
			return Invalid("prompt", "The token-id prompt must not be empty.")
		}
		for _, id := range p.Tokens[0] {
			if id < 0 || id > maxTokenIDPrompt {
				return Invalid("prompt", "Token id %d is out of range.", id)
			}
		}
	}
	return nil
}
