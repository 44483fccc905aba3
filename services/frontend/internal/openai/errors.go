package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Error types and codes used in the envelope. They follow what OpenAI's API
// returns, so SDKs classify them the same way.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"

	CodeModelNotFound      = "model_not_found"
	CodeContextLength      = "context_length_exceeded"
	CodeInvalidAPIKey      = "invalid_api_key"
	CodeRateLimitExceeded  = "rate_limit_exceeded"
	CodeRequestTooLarge    = "request_too_large"
	CodeServiceUnavailable = "service_unavailable"
	CodeUnsupported        = "unsupported_parameter"
	CodeInvalidValue       = "invalid_value"
	CodeUnknownParameter   = "unknown_parameter"
)

// Error is an API error: an HTTP status plus OpenAI's error envelope
// {"error":{"message","type","param","code"}}. Every failure a handler
// returns to a client is one of these, so the status, the envelope and the
// Retry-After header are decided in one place.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string // empty is encoded as null
	Code    string // empty is encoded as null
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%d %s (param %s): %s", e.Status, e.Type, e.Param, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// ErrorBody is the JSON envelope of an error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of the envelope.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Body returns the envelope to encode.
func (e *Error) Body() ErrorBody {
	d := ErrorDetail{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = &e.Code
	}
	return ErrorBody{Error: d}
}

// MarshalJSON encodes the envelope.
func (e *Error) MarshalJSON() ([]byte, error) { return json.Marshal(e.Body()) }

// Invalid is a 400 about one request parameter.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: CodeInvalidValue, Message: fmt.Sprintf(format, args...)}
}

// Unsupported is a 400 for a parameter this server does not implement.
func Unsupported(param, why string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: CodeUnsupported, Message: why}
}

// ModelNotFound is a 404 for a model no healthy worker serves.
func ModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Param: "model", Code: CodeModelNotFound,
		Message: fmt.Sprintf("The model %q does not exist or no worker serves it now.", model)}
}

// ContextTooLong is the 400 for a prompt that, with the completion asked
// for, does not fit the model's context, worded like vLLM so clients that
// parse it keep working. It names max tokens (as the client spelled it)
// when the prompt alone would fit, else the prompt.
func ContextTooLong(context, prompt int, g Generation) *Error {
	msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your prompt has %d tokens", context, prompt)
	if g.MaxTokens > 0 {
		msg = fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Please reduce the prompt or %s.",
			context, prompt+g.MaxTokens, prompt, g.MaxTokens, g.MaxTokensParam)
	}
	return contextError(msg, prompt < context, g)
}

// PromptTooLong is ContextTooLong for a text prompt refused before it was
// tokenized: its length in tokens is known only to be at least atLeast.
func PromptTooLong(context, atLeast, bytes int, g Generation) *Error {
	msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your prompt of %d bytes is at least %d tokens", context, bytes, atLeast)
	if g.MaxTokens > 0 {
		msg += fmt.Sprintf(", and %d more were requested for the completion. Please reduce the prompt or %s.", g.MaxTokens, g.MaxTokensParam)
	}
	return contextError(msg, atLeast < context, g)
}

// contextError builds the context-length 400 from its message, ending one
// that asked for no completion tokens the same way for both callers.
func contextError(msg string, promptFits bool, g Generation) *Error {
	if g.MaxTokens <= 0 {
		msg += ", which leaves no room for a completion. Please reduce the prompt."
	}
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: tooLongParam(promptFits, g), Code: CodeContextLength, Message: msg}
}

// tooLongParam is the parameter to blame: max tokens when the prompt alone
// fits and the client asked for more than the rest, else the prompt.
func tooLongParam(promptFits bool, g Generation) string {
	if promptFits && g.MaxTokens > 0 && g.MaxTokensParam != "" {
		return g.MaxTokensParam
	}
	return g.PromptParam
}

// Unavailable is a 503 asking the client to retry after d.
func Unavailable(d time.Duration, format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: CodeServiceUnavailable, RetryAfter: d, Message: fmt.Sprintf(format, args...)}
}

// RateLimited is a 429 asking the client to retry after d.
func RateLimited(d time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: CodeRateLimitExceeded, RetryAfter: d,
		Message: "Rate limit reached for this API key; retry after the Retry-After delay."}
}

// Unauthorized is a 401 for a missing or unknown API key.
func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: TypeAuthentication, Code: CodeInvalidAPIKey, Message: msg}
}

// TooLarge is a 413 for a body over the limit.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: CodeRequestTooLarge,
		Message: fmt.Sprintf("Request body exceeds the limit of %d bytes.", limit)}
}

// Internal is a 500; msg must not leak internals the client cannot act on.
func Internal(msg string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Message: msg}
}
