package vllmworker

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/worker/engines/vllm"
)

const llama3 = "meta-llama/Llama-3.1-8B-Instruct"

// fixture serves engines/vllm's recorded vLLM responses.
func fixture(t *testing.T) string {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile("../vllm/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	metrics, stream := read("metrics/vllm.txt"), read("streams/vllm-completions.sse")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+llama3+`","object":"model","max_model_len":8192}]}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(metrics) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func open(t *testing.T, url, model string) (*Engine, error) {
	t.Helper()
	tok, err := tokenizer.NewBytes(128256)
	if err != nil {
		t.Fatal(err)
	}
	return Open(t.Context(), Config{Kind: vllm.VLLM, URL: url, Model: model, Tokenizer: tok, BlockSize: 16})
}

// The recorded stream comes out as the built-in engine would report it:
// its token ids, the length finish, and usage with the cached tokens of
// the engine's last chunk; load comes from the recorded metrics.
func TestGenerateFromRecordedStream(t *testing.T) {
	t.Parallel()
	e, err := open(t, fixture(t), llama3)
	if err != nil {
		t.Fatal(err)
	}
	if e.KV() != nil {
		t.Fatal("KV events without an event endpoint")
	}
	if mi := e.ModelInfo(); mi.ContextLen != 8192 || mi.BlockSize != 16 {
		t.Fatalf("model info %+v", mi)
	}
	st, err := e.Generate(t.Context(), engine.Request{Prompt: make([]uint32, 40), Stop: engine.StopParams{MaxTokens: 6}})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	var last engine.Output
	for {
		o, err := st.Recv(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got, last = append(got, o.TokenIDs...), o
	}
	if want := []uint32{9843, 5304, 11410, 234, 264, 892}; !slices.Equal(got, want) {
		t.Fatalf("tokens %v; want %v", got, want)
	}
	if last.Finish != engine.FinishLength || last.Usage.CompletionTokens != 6 || last.Usage.CachedPromptTokens != 32 {
		t.Fatalf("final %s %+v; want length, 6 tokens, 32 cached", last.Finish, last.Usage)
	}
	if m := e.Metrics(); m.Running != 3 || m.Waiting != 2 || m.KVTotalBlocks != 27304 {
		t.Fatalf("metrics %+v", m)
	}
}

// Open refuses an engine serving another model, and one that caches
// blocks of another size, before the worker registers.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	url := fixture(t)
	if _, err := open(t, url, "Qwen/Qwen2.5-7B"); err == nil || !strings.Contains(err.Error(), `not model "Qwen/Qwen2.5-7B"`) {
		t.Errorf("another model: %v", err)
	}
	tok, _ := tokenizer.NewBytes(128256)
	_, err := Open(t.Context(), Config{Kind: vllm.VLLM, URL: url, Model: llama3, Tokenizer: tok, BlockSize: 32})
	if err == nil || !strings.Contains(err.Error(), "-block-size 16") {
		t.Errorf("another block size: %v", err)
	}
}
