package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Kind is the engine a Client talks to.
type Kind uint8

// The engines.
const (
	VLLM Kind = iota + 1
	SGLang
)

func (k Kind) String() string {
	switch k {
	case VLLM:
		return "vllm"
	case SGLang:
		return "sglang"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind parses "vllm" or "sglang".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "vllm":
		return VLLM, nil
	case "sglang":
		return SGLang, nil
	}
	return 0, fmt.Errorf("engine %q: want vllm or sglang", s)
}

// Config configures a Client.
type Config struct {
	Kind Kind
	// URL is the engine's HTTP server, e.g. http://127.0.0.1:8000.
	URL string
	// Model is the served model name sent with every vLLM request (vLLM
	// refuses requests naming a model it does not serve); SGLang ignores
	// it.
	Model string
	// APIKey, if set, is sent as a bearer token (vLLM's --api-key,
	// SGLang's --api-key).
	APIKey string
	// HTTP is the client to use; nil is a client without a timeout
	// (generation streams are long; cancel through the context).
	HTTP *http.Client
	// MaxErrorBody bounds how much of an error response is read (default
	// 64 KiB).
	MaxErrorBody int64
}

// Client talks to one engine server. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Kind != VLLM && cfg.Kind != SGLang {
		return nil, fmt.Errorf("vllm: engine kind %v: want vllm or sglang", cfg.Kind)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("vllm: engine URL %q: want http(s)://host:port", cfg.URL)
	}
	if cfg.Kind == VLLM && cfg.Model == "" {
		return nil, errors.New("vllm: a vLLM engine needs the served model name")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.MaxErrorBody <= 0 {
		cfg.MaxErrorBody = 64 << 10
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{cfg: cfg, base: u}, nil
}

// Kind returns the engine kind.
func (c *Client) Kind() Kind { return c.cfg.Kind }

// EngineError is an HTTP error answer (or an error event in a stream)
// from the engine.
type EngineError struct {
	Status  int    // HTTP status; 0 for an error inside a stream
	Message string // the engine's message
}

func (e *EngineError) Error() string {
	if e.Status == 0 {
		return "engine error: " + e.Message
	}
	return fmt.Sprintf("engine answered %d: %s", e.Status, e.Message)
}

// BadRequest reports whether the engine refused the request itself
// (HTTP 400 or 422), as opposed to failing.
func (e *EngineError) BadRequest() bool {
	return e.Status == http.StatusBadRequest || e.Status == http.StatusUnprocessableEntity
}

func (c *Client) url(path string) string { return c.base.String() + path }

// do sends a request and returns the response when it is 200, or an
// *EngineError carrying the engine's message otherwise.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return nil, fmt.Errorf("vllm: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	res, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("vllm: %s %s: %w", method, c.url(path), err)
	}
	if res.StatusCode == http.StatusOK {
		return res, nil
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, c.cfg.MaxErrorBody))
	return nil, fmt.Errorf("vllm: %s %s: %w", method, c.url(path), &EngineError{Status: res.StatusCode, Message: errorMessage(msg)})
}

// errorMessage extracts the message of an error body: OpenAI's envelope
// {"error": {"message"}}, vLLM's older {"object": "error", "message"},
// FastAPI's {"detail"}, or the body itself.
func errorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case len(e.Error) > 0 && json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case len(e.Error) > 0 && json.Unmarshal(e.Error, &s) == nil && s != "":
			return s
		case e.Message != "":
			return e.Message
		case len(e.Detail) > 0 && json.Unmarshal(e.Detail, &s) == nil:
			return s
		case len(e.Detail) > 0:
			return string(e.Detail)
		}
	}
	return strings.TrimSpace(string(body))
}

// getJSON GETs path and decodes its JSON answer into v.
func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	res, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("vllm: GET %s: %w", c.url(path), err)
	}
	return nil
}
