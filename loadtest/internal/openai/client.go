// Package openai is a measuring client for OpenAI-compatible streaming
// endpoints (/v1/completions and /v1/chat/completions).
//
// It times each request as the stream arrives (time to first output chunk,
// gaps between chunks, end to end) and fills a metrics.Record. Anything that
// is not a well-formed OpenAI stream ending in "data: [DONE]" becomes a
// per-request error with a message a person can act on; the client never
// panics or logs on bad input.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Mode selects the endpoint.
type Mode string

// The supported endpoints.
const (
	Completions Mode = "completions"
	Chat        Mode = "chat"
)

// Path is the endpoint path for the mode.
func (m Mode) Path() string {
	if m == Chat {
		return "/v1/chat/completions"
	}
	return "/v1/completions"
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one generation request. In completions mode the prompt is Tokens
// (sent as an array of token ids) or, when Tokens is nil, Text; in chat mode
// it is Messages.
type Request struct {
	Tokens   []int
	Text     string
	Messages []Message
	// MaxTokens is sent as max_tokens; with IgnoreEOS the server is asked to
	// generate exactly that many tokens.
	MaxTokens int
	IgnoreEOS bool
	// WantReply asks Stream to return the generated text (multi-turn chat
	// feeds it into the next turn).
	WantReply bool
	// Encoded is the request body when encoded ahead of time (Prepare), so
	// the send at the scheduled instant does not wait for the encoding of a
	// long prompt; Stream encodes it otherwise.
	Encoded []byte
}

// Prepare encodes req's body ahead of its send.
func (c *Client) Prepare(req *Request) error {
	b, err := c.Body(*req)
	if err != nil {
		return err
	}
	req.Encoded = b
	return nil
}

// Client sends measured streaming requests.
type Client struct {
	base   string
	apiKey string
	model  string
	mode   Mode
	// extra is ExtraBody, decoded once; Body encodes it with each request.
	extra map[string]json.RawMessage
	hc    *http.Client
}

// Config configures a Client.
type Config struct {
	// BaseURL is the server root, e.g. http://127.0.0.1:8000 (a trailing
	// /v1 is accepted and dropped).
	BaseURL string
	APIKey  string
	Model   string
	Mode    Mode
	// ExtraBody is a JSON object merged into every request body; its fields
	// replace the client's own of the same name (stream, max_tokens, ...).
	ExtraBody string
}

// New returns a Client using hc for transport.
func New(cfg Config, hc *http.Client) (*Client, error) {
	base := strings.TrimRight(cfg.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("url %q: must start with http:// or https://", cfg.BaseURL)
	}
	c := &Client{base: base, apiKey: cfg.APIKey, model: cfg.Model, mode: cfg.Mode, hc: hc}
	if c.mode == "" {
		c.mode = Completions
	}
	if c.mode != Completions && c.mode != Chat {
		return nil, fmt.Errorf("mode %q: want completions or chat", cfg.Mode)
	}
	if cfg.ExtraBody != "" {
		if err := json.Unmarshal([]byte(cfg.ExtraBody), &c.extra); err != nil {
			return nil, fmt.Errorf("extra body: must be a JSON object: %w", err)
		}
	}
	return c, nil
}

// SetModel sets the model name sent with each request.
func (c *Client) SetModel(m string) { c.model = m }

// Model is the model name sent with each request.
func (c *Client) Model() string { return c.model }

// NewHTTPClient returns an HTTP client pooled for maxConns concurrent
// streams to one host. Compression is off because SSE chunks are small and
// gzip buffering would distort time to first token. timeout bounds a whole
// request, stream included; zero means none.
func NewHTTPClient(maxConns int, timeout time.Duration) *http.Client {
	maxConns = max(maxConns, 16)
	t := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          maxConns,
		MaxIdleConnsPerHost:   maxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
		ReadBufferSize:        64 << 10,
		WriteBufferSize:       64 << 10,
	}
	return &http.Client{Transport: t, Timeout: timeout}
}

// Models lists the served model ids (GET /v1/models).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/models", nil)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	c.auth(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list models: %w", statusError(resp))
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("list models: not an OpenAI models response: %w", err)
	}
	ids := make([]string, 0, len(body.Data))
	for _, m := range body.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("list models: server lists no models")
	}
	return ids, nil
}

func (c *Client) auth(req *http.Request) {
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
}

// statusError describes a non-200 response, using the OpenAI error message
// when the body carries one.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	msg := strings.TrimSpace(string(b))
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			msg = inner.Message
		case e.Message != "":
			msg = e.Message
		}
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
}
