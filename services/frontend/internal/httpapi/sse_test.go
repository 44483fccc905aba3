package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// writeRecorder records each Write. With gate set, the first one closes
// began and waits for gate.
type writeRecorder struct {
	*httptest.ResponseRecorder
	writes      [][]byte
	began, gate chan struct{}
}

func (w *writeRecorder) Write(b []byte) (int, error) {
	if w.gate != nil && len(w.writes) == 0 {
		close(w.began)
		<-w.gate
	}
	w.writes = append(w.writes, bytes.Clone(b))
	return w.ResponseRecorder.Write(b)
}

func (w *writeRecorder) Flush() { w.ResponseRecorder.Flush() }

// Events added between flushes go out in one write, each exactly as
// json.Marshal encodes it, in order.
func TestSSEBatchesEvents(t *testing.T) {
	t.Parallel()
	w := &writeRecorder{ResponseRecorder: httptest.NewRecorder()}
	s := newSSE(w)
	s.begin()
	text := "<a & b>\n"
	c1 := openai.ChatChunk{ID: "x", Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChatChunkChoice{{Delta: openai.ChatDelta{Content: &text}}}}
	c2 := openai.Completion{ID: "y", Choices: []openai.CompletionChoice{{Index: 2, Text: text}}}
	u := openai.ChatChunk{ID: "x", Choices: []openai.ChatChunkChoice{}, Usage: &openai.Usage{PromptTokens: 3}}
	for _, v := range []any{c1, nil, []any{c2, u}} {
		if err := s.add(v); err != nil {
			t.Fatal(err)
		}
	}
	s.done()
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil { // nothing added: nothing written
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, v := range []any{c1, c2, u} {
		b, _ := json.Marshal(v)
		want.WriteString("data: " + string(b) + "\n\n")
	}
	want.WriteString("data: [DONE]\n\n")
	if len(w.writes) != 1 || !bytes.Equal(w.writes[0], want.Bytes()) {
		t.Fatalf("%d writes:\n%q\nwant one:\n%q", len(w.writes), w.writes, want.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
}

// scripted emits its first delta, waits for began, emits the rest as
// fast as the stream takes them, and closes queued.
type scripted struct {
	deltas        []string
	began, queued chan struct{}
}

func (s scripted) Run(_ context.Context, _ generate.Request, emit func(generate.Delta) error) (generate.Result, error) {
	for i, d := range s.deltas {
		if i == 1 {
			<-s.began
		}
		if err := emit(generate.Delta{Text: d, TokenIDs: []uint32{1}}); err != nil {
			return generate.Result{}, err
		}
	}
	close(s.queued)
	return generate.Result{Finish: openai.FinishLength, PromptTokens: 2, CompletionTokens: len(s.deltas)}, nil
}

// Deltas that arrive while the stream is writing go out together in its
// next write, and nothing waits for deltas that are not there: the first
// one is written alone, at once.
func TestStreamCoalescesReadyDeltas(t *testing.T) {
	t.Parallel()
	deltas := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	began, queued := make(chan struct{}), make(chan struct{})
	a := &API{cfg: Config{Generator: scripted{deltas, began, queued}, Logger: slog.New(slog.DiscardHandler)}}
	// The first delta is written while the generation has nothing more;
	// that write waits until the generation has queued the rest.
	w := &writeRecorder{ResponseRecorder: httptest.NewRecorder(), began: began, gate: queued}
	r := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
	g := openai.Generation{Model: "m", Stream: true, N: 1}
	a.serve(w, r, epCompletions, g, generate.Request{}, call{id: "cmpl-1"}, &completionFormat{})
	if len(w.writes) < 2 || len(w.writes) > 3 {
		t.Fatalf("%d writes: %q", len(w.writes), w.writes)
	}
	if got := strings.Count(string(w.writes[0]), "data: "); got != 1 {
		t.Fatalf("first write has %d events: %q", got, w.writes[0])
	}
	if got := strings.Count(string(w.writes[1]), `"text":"`) - strings.Count(string(w.writes[1]), `"text":""`); got != len(deltas)-1 {
		t.Fatalf("second write has %d of the %d queued deltas: %q", got, len(deltas)-1, w.writes[1])
	}
	evs := events(t, w.Body)
	var text strings.Builder
	for _, e := range evs[:len(evs)-1] {
		var ch openai.Completion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		text.WriteString(ch.Choices[0].Text)
	}
	if text.String() != strings.Join(deltas, "") || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("events %q", evs)
	}
}
