package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"switchyard.dev/services/frontend/internal/openai"
)

// chunkShapes are the bodies appendChunk writes itself, and some it
// hands to json.Marshal, built from the fuzzed fields.
func chunkShapes(id, model, text string, created int64, index int, finish string) []any {
	reason := &finish
	if finish == "" {
		reason = nil
	}
	empty := ""
	return []any{
		openai.ChatChunk{ID: id, Object: openai.ObjectChatCompletionChunk, Created: created, Model: model,
			Choices: []openai.ChatChunkChoice{{Index: index, Delta: openai.ChatDelta{Content: &text}, FinishReason: reason}}},
		openai.ChatChunk{ID: id, Object: openai.ObjectChatCompletionChunk, Created: created, Model: model,
			Choices: []openai.ChatChunkChoice{{Index: index, Delta: openai.ChatDelta{Role: "assistant", Content: &empty}}}},
		openai.ChatChunk{ID: id, Object: openai.ObjectChatCompletionChunk, Created: created, Model: model,
			Choices: []openai.ChatChunkChoice{{Index: index, Delta: openai.ChatDelta{Role: text}}}},
		openai.ChatChunk{ID: id, Object: openai.ObjectChatCompletionChunk, Created: created, Model: model,
			Choices: []openai.ChatChunkChoice{{Index: index, FinishReason: reason}}},
		openai.Completion{ID: id, Object: openai.ObjectTextCompletion, Created: created, Model: model,
			Choices: []openai.CompletionChoice{{Index: index, Text: text, FinishReason: reason}}},
		// Shapes that go through json.Marshal.
		openai.ChatChunk{ID: id, Object: openai.ObjectChatCompletionChunk, Created: created, Model: model,
			Choices: []openai.ChatChunkChoice{}, Usage: &openai.Usage{PromptTokens: index}},
		openai.Completion{ID: id, Object: openai.ObjectTextCompletion, Created: created, Model: model,
			Choices: []openai.CompletionChoice{{Text: text, Logprobs: &openai.CompletionLogprobs{}}}},
		map[string]string{"text": text},
	}
}

func checkChunks(t *testing.T, id, model, text string, created int64, index int, finish string) {
	t.Helper()
	for k, v := range chunkShapes(id, model, text, created, index, finish) {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("data: ")
		got, err := appendChunk(bytes.Clone(prefix), v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[len(prefix):], want) || !bytes.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("shape %d of %q:\n got %s\nwant %s", k, text, got[len(prefix):], want)
		}
	}
}

// appendChunk writes exactly what json.Marshal writes.
func TestAppendChunkMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"", "Once upon a time", `quote " and \ backslash`, "<b>&amp;</b>", "\x00\x01\b\f\n\r\t\x1f\x7f",
		"Ünal ✓ 😀", "\u2028\u2029", "\xff\xfe invalid", "\xe2\x9c", "a\xc3", "\xed\xa0\x80 surrogate",
	} {
		checkChunks(t, "chatcmpl-abc", "org/model<1>", text, 1_700_000_000, 0, "")
		checkChunks(t, "cmpl-x", text, text, -5, 7, "stop")
	}
}

func FuzzAppendChunk(f *testing.F) {
	f.Add("chatcmpl-1", "tiny", "Hello", int64(1), 0, "")
	f.Add("id", "m", "\u2028<\xff>", int64(-1), 3, "length")
	f.Fuzz(func(t *testing.T, id, model, text string, created int64, index int, finish string) {
		checkChunks(t, id, model, text, created, index, finish)
	})
}
