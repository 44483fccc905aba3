package vllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Request is one generation. Zero values are the engines' neutral
// settings, which this package sends explicitly: Temperature 0 is greedy,
// TopP 0 means 1, TopK 0 means all tokens.
type Request struct {
	// ID names the request in the engine's logs (vLLM's X-Request-Id
	// header, SGLang's rid); "" lets the engine pick one.
	ID           string
	Prompt       []uint32
	MaxTokens    int // required: at least 1
	MinTokens    int
	Temperature  float64
	TopP         float64
	TopK         int
	Seed         uint64
	HasSeed      bool
	StopTokenIDs []uint32
	IgnoreEOS    bool
}

func (r *Request) validate() error {
	switch {
	case len(r.Prompt) == 0:
		return errors.New("vllm: empty prompt")
	case r.MaxTokens < 1:
		return fmt.Errorf("vllm: max tokens %d: must be at least 1", r.MaxTokens)
	case r.MinTokens < 0 || r.MinTokens > r.MaxTokens:
		return fmt.Errorf("vllm: min tokens %d: must be in [0, max tokens %d]", r.MinTokens, r.MaxTokens)
	case r.Temperature < 0 || r.TopP < 0 || r.TopP > 1 || r.TopK < 0:
		return fmt.Errorf("vllm: sampling temperature %g, top_p %g, top_k %d out of range", r.Temperature, r.TopP, r.TopK)
	}
	return nil
}

func (r *Request) topP() float64 {
	if r.TopP == 0 {
		return 1
	}
	return r.TopP
}

// topK is the engines' spelling of top_k: -1 for all tokens (both accept
// it; older vLLM refuses 0).
func (r *Request) topK() int {
	if r.TopK == 0 {
		return -1
	}
	return r.TopK
}

// Finish reasons, as the engines report them.
const (
	FinishStop   = "stop"   // an EOS or stop token
	FinishLength = "length" // max tokens (or the context) reached
	FinishAbort  = "abort"  // the engine aborted the request
)

// Chunk is what one streamed event added.
type Chunk struct {
	Tokens       []uint32 // sampled token ids, in order; valid until the next Next
	FinishReason string   // "" until the request finished
}

// Usage is the engine's accounting of a finished request.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int  // prompt tokens served from the prefix cache
	HasCachedTokens  bool // the engine reported CachedTokens (vLLM: --enable-prompt-tokens-details)
}

// Stream reads one generation. It is not safe for concurrent use.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
	sc     *bufio.Scanner
	decode func(data []byte, c *Chunk) error
	usage  Usage
	hasUse bool
	done   bool
	err    error
	finish string
	tokens []uint32 // buffer behind Chunk.Tokens
	seen   int      // tokens returned so far (SGLang's cumulative output_ids)
}

// maxEvent bounds one SSE line: SGLang's cumulative output_ids grow with
// the output, about 7 bytes a token.
const maxEvent = 64 << 20

// Generate starts a generation. The stream ends (io.EOF from Next) after
// the chunk with a finish reason; cancel ctx or Close it to abort the
// request in the engine.
func (c *Client) Generate(ctx context.Context, r Request) (*Stream, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	path, body := "/v1/completions", any(c.completionsBody(&r))
	if c.cfg.Kind == SGLang {
		path, body = "/generate", sglangBody(&r)
	}
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("vllm: encode request: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	res, err := c.doRequest(ctx, path, buf, r.ID) //nolint:bodyclose // the Stream owns the body; Close closes it
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Stream{body: res.Body, cancel: cancel, ctx: ctx}
	s.sc = bufio.NewScanner(res.Body)
	s.sc.Buffer(make([]byte, 0, 64<<10), maxEvent)
	s.decode = s.decodeVLLM
	if c.cfg.Kind == SGLang {
		s.decode = s.decodeSGLang
	}
	return s, nil
}

// doRequest POSTs a generation body, with the request id header vLLM logs.
func (c *Client) doRequest(ctx context.Context, path string, body []byte, id string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(path), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("vllm: POST %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	res, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("vllm: POST %s: %w", c.url(path), err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, c.cfg.MaxErrorBody))
		return nil, fmt.Errorf("vllm: POST %s: %w", c.url(path), &EngineError{Status: res.StatusCode, Message: errorMessage(msg)})
	}
	return res, nil
}

// Next returns the next chunk with tokens or a finish reason; io.EOF
// after the last one (read on to io.EOF: vLLM sends usage after the
// chunk with the finish reason). Errors are the engine's (*EngineError), the
// transport's, or ctx's.
func (s *Stream) Next() (Chunk, error) {
	for {
		if s.err != nil {
			return Chunk{}, s.err
		}
		if s.done {
			s.err = io.EOF
			continue
		}
		data, ok := s.event()
		if !ok {
			continue
		}
		var c Chunk
		s.tokens = s.tokens[:0]
		if err := s.decode(data, &c); err != nil {
			s.fail(err)
			continue
		}
		if c.FinishReason != "" {
			s.finish = c.FinishReason
		}
		if len(c.Tokens) > 0 || c.FinishReason != "" {
			return c, nil
		}
	}
}

// event returns the next SSE data payload; false when the stream ended or
// failed (s.done or s.err set).
func (s *Stream) event() ([]byte, bool) {
	for s.sc.Scan() {
		line := s.sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank separators, comments, event: and id: lines
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			if s.finish == "" {
				s.fail(errors.New("vllm: stream ended before the request finished"))
			}
			s.done = true
			return nil, false
		}
		return data, true
	}
	switch err := s.sc.Err(); {
	case s.ctx.Err() != nil:
		s.fail(s.ctx.Err())
	case err != nil:
		s.fail(fmt.Errorf("vllm: read stream: %w", err))
	case s.finish == "":
		s.fail(errors.New("vllm: stream ended before the request finished"))
	default:
		s.done = true // an engine that does not send [DONE]
	}
	return nil, false
}

func (s *Stream) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Usage returns the engine's accounting once the stream has ended; false
// before, or when the engine sent none.
func (s *Stream) Usage() (Usage, bool) { return s.usage, s.hasUse && s.done }

// Close aborts the request if it is still running and releases the
// connection. It is safe to call more than once.
func (s *Stream) Close() error {
	s.cancel()
	return s.body.Close()
}

// streamError decodes an error event: {"error": {...}} or vLLM's older
// {"object": "error", "message": ...}; nil if data is not one.
func streamError(data []byte) error {
	var e struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
	}
	decoded := json.Unmarshal(data, &e) == nil
	if !decoded || (len(e.Error) == 0 || bytes.Equal(e.Error, []byte("null"))) && e.Object != "error" {
		return nil // not an error event (an undecodable one fails in the chunk decoder)
	}
	return &EngineError{Message: errorMessage(data)}
}
