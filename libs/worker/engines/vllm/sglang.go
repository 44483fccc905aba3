package vllm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// sglangRequest is SGLang's native /generate request.
type sglangRequest struct {
	InputIDs       []uint32       `json:"input_ids"`
	SamplingParams sglangSampling `json:"sampling_params"`
	Stream         bool           `json:"stream"`
	RID            string         `json:"rid,omitempty"`
}

type sglangSampling struct {
	MaxNewTokens int      `json:"max_new_tokens"`
	MinNewTokens int      `json:"min_new_tokens,omitempty"`
	Temperature  float64  `json:"temperature"`
	TopP         float64  `json:"top_p"`
	TopK         int      `json:"top_k"`
	StopTokenIDs []uint32 `json:"stop_token_ids,omitempty"`
	IgnoreEOS    bool     `json:"ignore_eos,omitempty"`
	SamplingSeed *uint64  `json:"sampling_seed,omitempty"`
}

func sglangBody(r *Request) *sglangRequest {
	b := &sglangRequest{InputIDs: r.Prompt, Stream: true, RID: r.ID, SamplingParams: sglangSampling{
		MaxNewTokens: r.MaxTokens, MinNewTokens: r.MinTokens, Temperature: r.Temperature, TopP: r.topP(), TopK: r.topK(),
		StopTokenIDs: r.StopTokenIDs, IgnoreEOS: r.IgnoreEOS,
	}}
	if r.HasSeed {
		seed := r.Seed
		b.SamplingParams.SamplingSeed = &seed
	}
	return b
}

// sglangChunk is one streamed /generate event.
type sglangChunk struct {
	OutputIDs []uint32 `json:"output_ids"`
	MetaInfo  struct {
		FinishReason     json.RawMessage `json:"finish_reason"`
		PromptTokens     int             `json:"prompt_tokens"`
		CompletionTokens *int            `json:"completion_tokens"`
		CachedTokens     *int            `json:"cached_tokens"`
	} `json:"meta_info"`
}

// sglangFinish is meta_info.finish_reason: {"type": "stop", "matched":
// id}, {"type": "length", "length": n} or {"type": "abort", "message",
// "status_code"}.
type sglangFinish struct {
	Type       string `json:"type"`
	Message    string `json:"message"`
	StatusCode int    `json:"status_code"`
}

// decodeSGLang reads one event. output_ids are cumulative by default and
// deltas with --incremental-streaming-output; meta_info.completion_tokens
// tells them apart: a delta's count is what came before plus its own
// length, while a cumulative list is at least as long as the count (the
// engine serializes its live list, which may have grown since the count
// was taken). The two readings only agree when nothing came before, where
// they mean the same.
func (s *Stream) decodeSGLang(data []byte, c *Chunk) error {
	if err := streamError(data); err != nil {
		return err
	}
	var ch sglangChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return fmt.Errorf("vllm: sglang chunk: %w", err)
	}
	m := &ch.MetaInfo
	ids := ch.OutputIDs
	switch {
	case m.CompletionTokens != nil && *m.CompletionTokens == s.seen+len(ids):
	case len(ids) >= s.seen:
		ids = ids[s.seen:]
	default:
		return fmt.Errorf("vllm: sglang chunk has %d output ids after %d were streamed", len(ids), s.seen)
	}
	s.seen += len(ids)
	s.tokens = append(s.tokens, ids...)
	c.Tokens = s.tokens
	s.usage, s.hasUse = Usage{PromptTokens: m.PromptTokens, CompletionTokens: s.seen}, true
	if m.CompletionTokens != nil {
		s.usage.CompletionTokens = *m.CompletionTokens
	}
	if m.CachedTokens != nil {
		s.usage.CachedTokens, s.usage.HasCachedTokens = *m.CachedTokens, true
	}
	if len(m.FinishReason) == 0 || bytes.Equal(m.FinishReason, []byte("null")) {
		return nil
	}
	var f sglangFinish
	if err := json.Unmarshal(m.FinishReason, &f); err != nil {
		return fmt.Errorf("vllm: sglang finish_reason %s: %w", m.FinishReason, err)
	}
	if f.Type == FinishAbort {
		return &EngineError{Status: f.StatusCode, Message: "request aborted: " + f.Message}
	}
	c.FinishReason = f.Type
	return nil
}
