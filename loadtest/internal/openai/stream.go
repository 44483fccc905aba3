package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
	"switchyard.dev/loadtest/internal/sse"
)

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type body struct {
	Model         string        `json:"model"`
	Prompt        any           `json:"prompt,omitempty"`
	Messages      []Message     `json:"messages,omitempty"`
	MaxTokens     int           `json:"max_tokens"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	IgnoreEOS     bool          `json:"ignore_eos,omitempty"`
}

// Body is the JSON request body for req.
//
// Without extra fields it is the body struct in field order. With them, the
// client's fields and the extra ones go into one map, extra fields replacing
// the client's on a name clash, and are encoded once, keys sorted.
func (c *Client) Body(req Request) ([]byte, error) {
	b := body{
		Model:         c.model,
		MaxTokens:     req.MaxTokens,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		IgnoreEOS:     req.IgnoreEOS,
	}
	switch {
	case c.mode == Chat:
		b.Messages = req.Messages
	case req.Tokens != nil:
		b.Prompt = req.Tokens
	default:
		b.Prompt = req.Text
	}
	if len(c.extra) == 0 {
		return json.Marshal(b)
	}
	return json.Marshal(b.merged(c.extra))
}

// merged is b as a map, with the same omitempty rules as its struct tags,
// overlaid with extra.
func (b *body) merged(extra map[string]json.RawMessage) map[string]any {
	m := make(map[string]any, 7+len(extra))
	m["model"] = b.Model
	if b.Prompt != nil {
		m["prompt"] = b.Prompt
	}
	if len(b.Messages) > 0 {
		m["messages"] = b.Messages
	}
	m["max_tokens"] = b.MaxTokens
	m["stream"] = b.Stream
	m["stream_options"] = b.StreamOptions
	if b.IgnoreEOS {
		m["ignore_eos"] = true
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// Stream sends req and measures its stream into rec (timings, token counts,
// usage, error). It returns the generated text when req.WantReply is set.
// A context cancelled mid-request marks the record Canceled.
func (c *Client) Stream(ctx context.Context, req Request, rec *metrics.Record) string {
	payload := req.Encoded
	if payload == nil {
		var err error
		if payload, err = c.Body(req); err != nil {
			rec.Err = fmt.Sprintf("encode request: %v", err)
			return ""
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+c.mode.Path(), bytes.NewReader(payload))
	if err != nil {
		rec.Err = fmt.Sprintf("build request: %v", err)
		return ""
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	c.auth(hreq)

	start := time.Now()
	resp, err := c.hc.Do(hreq)
	if err != nil {
		fail(ctx, rec, err)
		return ""
	}
	defer resp.Body.Close()
	rec.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		rec.Err = statusError(resp).Error()
		return ""
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		rec.Err = fmt.Sprintf("not an OpenAI stream: Content-Type %q, want text/event-stream", resp.Header.Get("Content-Type"))
		return ""
	}
	var reply strings.Builder
	m := measure{rec: rec, start: start, reply: &reply, wantReply: req.WantReply}
	if err := m.read(resp.Body); err != nil {
		fail(ctx, rec, err)
	}
	rec.E2E = time.Since(start)
	// The server ends the chunked body after [DONE]: read up to that end,
	// or the transport discards the connection and every request pays a
	// new handshake inside its TTFT.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return reply.String()
}

func fail(ctx context.Context, rec *metrics.Record, err error) {
	if ctx.Err() != nil {
		rec.Canceled = true
		rec.Err = fmt.Sprintf("canceled: %v", context.Cause(ctx))
		return
	}
	rec.Err = err.Error()
}

// chunk is the subset of a completions or chat.completions stream chunk the
// client reads.
type chunk struct {
	Object  string `json:"object"`
	Message string `json:"message"`
	Choices []struct {
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		Delta        struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// measure consumes one stream.
type measure struct {
	rec       *metrics.Record
	start     time.Time
	last      time.Time
	reply     *strings.Builder
	wantReply bool
}

var doneMarker = []byte("[DONE]")

func (m *measure) read(r io.Reader) error {
	sr := sse.NewReader(r)
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("stream ended without data: [DONE]")
		}
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		now := time.Now()
		if bytes.Equal(bytes.TrimSpace(ev.Data), doneMarker) {
			return m.finish()
		}
		if err := m.event(ev, now); err != nil {
			return err
		}
	}
}

func (m *measure) event(ev sse.Event, now time.Time) error {
	if string(ev.Type) == "error" {
		return fmt.Errorf("server error event: %s", truncate(ev.Data))
	}
	var ch chunk
	if err := json.Unmarshal(ev.Data, &ch); err != nil {
		return fmt.Errorf("not an OpenAI stream chunk: %q: %w", truncate(ev.Data), err)
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return fmt.Errorf("server error in stream: %s", truncate(ch.Error))
	}
	if ch.Object == "error" {
		return fmt.Errorf("server error in stream: %s", ch.Message)
	}
	if u := ch.Usage; u != nil {
		m.rec.UsageReported = true
		m.rec.PromptTokens = u.PromptTokens
		m.rec.OutputTokens = u.CompletionTokens
		if u.PromptTokensDetails != nil {
			m.rec.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	var output bool
	for i := range ch.Choices {
		c := &ch.Choices[i]
		text := c.Text + c.Delta.Content + c.Delta.ReasoningContent
		if text == "" {
			// Tokens can decode to no text (a special token, a byte of an
			// unfinished UTF-8 sequence). If none of a stream's tokens had
			// text, the finishing chunk is the first output the client sees.
			if m.rec.Chunks == 0 && c.FinishReason != "" {
				output = true
			}
			continue
		}
		output = true
		if m.wantReply {
			m.reply.WriteString(text)
		}
	}
	if !output {
		return nil
	}
	if m.rec.Chunks == 0 {
		m.rec.TTFT = now.Sub(m.start)
	} else {
		m.rec.ITLs = append(m.rec.ITLs, now.Sub(m.last))
	}
	m.last = now
	m.rec.Chunks++
	return nil
}

func (m *measure) finish() error {
	if !m.rec.UsageReported {
		m.rec.OutputTokens = m.rec.Chunks
	}
	if m.rec.Chunks == 0 {
		return errors.New("stream carried no output tokens")
	}
	return nil
}

func truncate(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
