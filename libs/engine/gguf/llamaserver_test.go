package gguf

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/sharedtest"
)

// storiesRef is llama2.c run.c's greedy continuation of "Once upon a
// time" by stories260K (../shared/models/stories260K/README.md).
const storiesRef = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."

// TestLlamaServerServesConvertedStories260K loads the converted model into
// a real llama-server with the checkpoint's full 512-token context and
// checks that its greedy output for a token-id prompt is the reference
// text, and that its tokenizer agrees with llama2.c's.
func TestLlamaServerServesConvertedStories260K(t *testing.T) {
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	model := filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := ConvertFiles(model, filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin"), "stories260K"); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	srv := deptest.StartLlamaServer(t, model, "--ctx-size", "512", "--parallel", "1")

	var props struct {
		Settings struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	post(t, srv.URL+"/props", nil, &props)
	if props.Settings.NCtx != 512 {
		t.Errorf("n_ctx %d, want the checkpoint's 512", props.Settings.NCtx)
	}

	prompt := tok.Encode("Once upon a time", true, false)
	var out struct {
		Content string   `json:"content"`
		Tokens  []uint32 `json:"tokens"`
	}
	post(t, srv.URL+"/completion", map[string]any{
		"prompt": prompt, "n_predict": 60, "temperature": 0, "return_tokens": true, "cache_prompt": false,
	}, &out)
	if len(out.Tokens) == 0 {
		t.Fatalf("no tokens: %+v", out)
	}
	text := "Once upon a time" + string(tokenizer.Decode(tok, prompt[len(prompt)-1], out.Tokens))
	if !strings.HasPrefix(storiesRef, text) && !strings.HasPrefix(text, storiesRef) {
		t.Fatalf("llama-server's greedy output differs from run.c:\n got: %q\nwant: %q", text, storiesRef)
	}
	if len(text) < 150 {
		t.Fatalf("only %d bytes generated: %q", len(text), text)
	}

	for _, s := range []string{"Once upon a time", "Lily saw a big, red ball.", "Tom and Sue\nwent home!"} {
		var got struct {
			Tokens []uint32 `json:"tokens"`
		}
		post(t, srv.URL+"/tokenize", map[string]any{"content": s, "add_special": true}, &got)
		if want := tok.Encode(s, true, false); !slices.Equal(got.Tokens, want) {
			t.Errorf("tokenize %q: llama-server %v, llama2.c %v", s, got.Tokens, want)
		}
	}
}

// post sends body as JSON (GET when nil) and decodes the answer into out.
func post(t *testing.T, url string, body, out any) {
	t.Helper()
	var resp *http.Response
	var err error
	if body == nil {
		resp, err = http.Get(url)
	} else {
		b, _ := json.Marshal(body)
		resp, err = http.Post(url, "application/json", bytes.NewReader(b))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		t.Fatalf("%s: %s: %s", url, resp.Status, msg.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}
