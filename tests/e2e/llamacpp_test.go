package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/filedisc"
)

// storiesGGUF is stories260K converted once per test process for
// llama-server (by the repository's own converter), with its tokenizer.
var storiesGGUF struct {
	once sync.Once
	path string
	err  error
}

func llamaModel(t testing.TB) (gguf, tok string) {
	t.Helper()
	ckpt, tok := StoriesModel(t)
	storiesGGUF.once.Do(func() {
		dir, err := os.MkdirTemp("", "switchyard-e2e-gguf")
		if err != nil {
			storiesGGUF.err = err
			return
		}
		storiesGGUF.path = filepath.Join(dir, "stories260K.gguf")
		cmd := exec.Command("go", "run", "./libs/engine/cmd/llama2gguf", "-checkpoint", ckpt, "-tokenizer", tok, "-o", storiesGGUF.path)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			storiesGGUF.err = fmt.Errorf("llama2gguf: %w\n%s", err, out)
		}
	})
	if storiesGGUF.err != nil {
		t.Fatal(storiesGGUF.err)
	}
	return storiesGGUF.path, tok
}

// llamaWorker is the flags of a decode worker that starts its own
// llama-server for stories260K.
func llamaWorker(t testing.TB, slots int) []string {
	t.Helper()
	bin := deptest.Binary(t, "llama-server", "LLAMA_SERVER_BIN")
	model, tok := llamaModel(t)
	return []string{"-engine", "llamacpp", "-llama-server-bin", bin, "-model", model, "-tokenizer", tok,
		"-engine-slots", fmt.Sprint(slots), "-engine-args", "--threads 1"}
}

// startFleet starts one decode worker per argument list (a mixed fleet),
// one router and a frontend.
func startFleet(t testing.TB, routerMode string, workers ...[]string) *Mesh {
	t.Helper()
	m := &Mesh{Bin: Build(t), Dir: t.TempDir()}
	common := []string{"-discovery", "file", "-discovery-dir", m.Dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	for i, w := range workers {
		args := append([]string{"-id", fmt.Sprintf("decode-%d", i)}, common...)
		m.Workers = append(m.Workers, Start(t, m.Bin, "decode", addr(), append(args, w...)...))
	}
	m.Router = Start(t, m.Bin, "router", addr(), append([]string{"-id", "router-0", "-mode", routerMode, "-log-level", "debug"}, common...)...)
	m.Frontend = Start(t, m.Bin, "frontend", addr(), append([]string{"-id", "frontend-0"}, common...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("router log, decisions included:\n" + m.Router.Log())
		}
	})
	return m
}

var engineURLRE = regexp.MustCompile(`worker ready.* url=(http://\S+)`)

// engineURL is the llama-server a worker started, from its log.
func engineURL(t testing.TB, p *Proc) string {
	t.Helper()
	m := engineURLRE.FindStringSubmatch(p.Log())
	if m == nil {
		t.Fatalf("%s: no engine URL in the log:\n%s", p.Name, p.Log())
	}
	return m[1]
}

func busySlots(t testing.TB, url string) int {
	t.Helper()
	res, err := http.Get(url + "/slots")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := json.NewDecoder(res.Body).Decode(&slots); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slots {
		if s.IsProcessing {
			n++
		}
	}
	return n
}

func completion(t *testing.T, c openai.Client, model, prompt string, maxTokens int64) *openai.Completion {
	t.Helper()
	comp, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(model),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(0),
	}, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	return comp
}

// Through frontend, router and llama.cpp workers: greedy text is the
// llama2.c reference, streaming equals non-streaming with the same usage,
// a repeated long prefix is routed to the worker holding it (its cached
// tokens show it), and a cancelled stream stops the engine.
func TestLlamaCppMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	w := llamaWorker(t, 2)
	m := startFleet(t, "kv", w, w)
	c := client(m)
	id := waitModel(t, c)

	comp := completion(t, c, id, "Once upon a time", 24)
	const ref = ", there was a little girl named Lily. She loved to play outside in the park."
	if got := comp.Choices[0].Text; !strings.HasPrefix(ref, got) || len(got) < 40 || comp.Usage.CompletionTokens != 24 {
		t.Fatalf("completion %q usage %+v; want a prefix of llama2.c's %q", got, comp.Usage, ref)
	}

	stream := c.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(id),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(24), Temperature: openai.Float(0),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithJSONSet("ignore_eos", true))
	var text strings.Builder
	var usage openai.CompletionUsage
	for stream.Next() {
		ch := stream.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != comp.Choices[0].Text || usage.CompletionTokens != 24 || usage.PromptTokens != comp.Usage.PromptTokens {
		t.Fatalf("streamed %q %+v; non-streamed %q %+v", text.String(), usage, comp.Choices[0].Text, comp.Usage)
	}

	// Two long prefixes, each repeated with new endings: after the first,
	// every request is served from the holder's cache.
	prefixes := []string{
		strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ", 6),
		strings.Repeat("Tom and his dog Max went to the beach. The sun was hot and the sand was soft. ", 6),
	}
	plen := map[int]int64{}
	for round := range 4 {
		for i, p := range prefixes {
			comp := completion(t, c, id, fmt.Sprintf("%s Then %d friends came.", p, round), 4)
			cached := comp.Usage.PromptTokensDetails.CachedTokens
			if round == 0 {
				plen[i] = comp.Usage.PromptTokens
				continue
			}
			if cached < plen[i]-16 {
				t.Errorf("prefix %d, round %d: %d of %d prompt tokens cached; want the shared prefix's", i, round, cached, comp.Usage.PromptTokens)
			}
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	long := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(id),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(480), Temperature: openai.Float(0),
	}, option.WithJSONSet("ignore_eos", true))
	for range 3 {
		if !long.Next() {
			t.Fatalf("stream ended early: %v", long.Err())
		}
	}
	cancel()
	for long.Next() {
	}
	for _, wk := range m.Workers {
		url := engineURL(t, wk)
		deptest.Eventually(t, 10*time.Second, wk.Name+"'s llama-server to go idle after the cancel", func() bool { return busySlots(t, url) == 0 })
	}
}

// A fleet of a built-in worker and a llama.cpp worker serving the same
// model: requests spread over both give the same greedy text.
func TestMixedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	model, tok := StoriesModel(t)
	m := startFleet(t, "round-robin", []string{"-model", model, "-tokenizer", tok}, llamaWorker(t, 4))
	c := client(m)
	id := waitModel(t, c)
	prompts := make([]string, 8)
	for i := range prompts {
		prompts[i] = "Once upon a time, Lily saw a"
	}
	texts, usage := runStreams(t, c, id, prompts, 64, nil)
	for i := range texts {
		if texts[i] != texts[0] || usage[i] != 64 {
			t.Errorf("stream %d: %q (%d tokens); stream 0: %q", i, texts[i], usage[i], texts[0])
		}
	}
	for _, w := range m.Workers {
		deptest.Eventually(t, 10*time.Second, w.Name+" to have generated tokens", func() bool {
			return metricSum(t, "http://"+w.Addr+"/metrics", "switchyard_worker_generated_tokens_total") > 0
		})
	}
}

// Killing the llama-server under a worker in the middle of streams: the
// worker turns unhealthy and leaves discovery, the streams it carried
// migrate and complete with the undisturbed text, and once the engine is
// back the worker serves again.
func TestLlamaCppEngineKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	model, tok := llamaModel(t)
	var servers []*deptest.LlamaServer
	var workers [][]string
	for range 2 {
		srv := deptest.StartLlamaServer(t, model, "--parallel", "4", "--ctx-size", "2048", "--no-kv-unified", "--cache-ram", "0", "--alias", "stories260K")
		servers = append(servers, srv)
		workers = append(workers, []string{"-engine", "llamacpp", "-engine-url", srv.URL, "-tokenizer", tok, "-model-name", "stories260K"})
	}
	m := startFleet(t, "round-robin", workers...)
	c := client(m)
	id := waitModel(t, c)
	prompts := make([]string, 8)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("Once upon a time, Tom saw %d", i)
	}
	const maxTokens = 200
	want, _ := runStreams(t, c, id, prompts, maxTokens, nil)
	var killed atomic.Bool
	got, usage := runStreams(t, c, id, prompts, maxTokens, func(total int) {
		if total >= len(prompts)*4 && killed.CompareAndSwap(false, true) {
			servers[1].Stop()
		}
	})
	if !killed.Load() {
		t.Fatal("the engine was never killed")
	}
	if n := metricSum(t, "http://"+m.Frontend.Addr+"/metrics", "switchyard_frontend_migrations_total"); n < 1 {
		t.Fatalf("migrations_total = %v: the killed engine carried no stream, so nothing was tested", n)
	}
	for i := range prompts {
		if got[i] != want[i] || usage[i] != maxTokens {
			t.Errorf("stream %d: after the kill %q (%d tokens) != undisturbed %q", i, got[i], usage[i], want[i])
		}
	}
	health := func() int {
		res, err := http.Get("http://" + m.Workers[1].Addr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	deptest.Eventually(t, 10*time.Second, "the worker to report unhealthy", func() bool { return health() == http.StatusServiceUnavailable })
	reg, err := filedisc.New(filedisc.Config{Dir: m.Dir})
	if err != nil {
		t.Fatal(err)
	}
	listed := func() bool {
		in, err := reg.Instances(t.Context(), "decode")
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(in, func(i discovery.Instance) bool { return i.ID == "decode-1" })
	}
	deptest.Eventually(t, 10*time.Second, "the worker to leave discovery", func() bool { return !listed() })

	servers[1].Start()
	deptest.Eventually(t, 30*time.Second, "the worker to serve again", func() bool { return health() == http.StatusOK && listed() })
}

// A llama.cpp worker given only a GGUF file tokenizes with the file's own
// vocabulary and ships its chat template: through the mesh, greedy text
// is still the llama2.c reference, and a chat prompt is the template's
// rendering, its special-token markers read as their ids (BOS once).
func TestLlamaCppModelVocabularyAndTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	bin := deptest.Binary(t, "llama-server", "LLAMA_SERVER_BIN")
	ckpt, tok := StoriesModel(t)
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "chat.jinja")
	const src = "{% for m in messages %}{{ bos_token }}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
	if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "stories260K-chat.gguf")
	cmd := exec.Command("go", "run", "./libs/engine/cmd/llama2gguf", "-checkpoint", ckpt, "-tokenizer", tok, "-chat-template", tmpl, "-name", "stories260K", "-o", model)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("llama2gguf: %v\n%s", err, out)
	}
	m := startFleet(t, "round-robin", []string{"-engine", "llamacpp", "-llama-server-bin", bin, "-model", model,
		"-engine-slots", "1", "-engine-args", "--threads 1"})
	c := client(m)
	id := waitModel(t, c)

	comp := completion(t, c, id, "Once upon a time", 24)
	const ref = ", there was a little girl named Lily. She loved to play outside in the park."
	if got := comp.Choices[0].Text; !strings.HasPrefix(ref, got) || len(got) < 40 {
		t.Fatalf("completion %q; want a prefix of llama2.c's %q", got, ref)
	}

	tokenize := func(body string) []uint32 {
		t.Helper()
		res, err := http.Post("http://"+m.Frontend.Addr+"/tokenize", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out struct {
			Tokens []uint32 `json:"tokens"`
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("/tokenize %s: status %d", body, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Tokens
	}
	chat := tokenize(fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "Tell me a story."}]}`, id))
	text := tokenize(fmt.Sprintf(`{"model": %q, "prompt": "<s>user: Tell me a story.\nassistant:"}`, id))
	plain := tokenize(fmt.Sprintf(`{"model": %q, "prompt": "user: Tell me a story.\nassistant:"}`, id))
	if !slices.Equal(chat, text) || !slices.Equal(chat, plain) || len(chat) < 5 || chat[0] != 1 || slices.Contains(chat[1:], 1) {
		t.Fatalf("chat prompt %v; the template's text %v and without its <s> %v: want all equal, one BOS (1) first", chat, text, plain)
	}
	reply, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:     id,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens: openai.Int(8), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Usage.PromptTokens != int64(len(chat)) || reply.Choices[0].Message.Content == "" {
		t.Fatalf("chat reply %q with %d prompt tokens; want text, and the %d tokens /tokenize gave", reply.Choices[0].Message.Content, reply.Usage.PromptTokens, len(chat))
	}
}
