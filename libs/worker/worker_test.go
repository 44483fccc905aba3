package worker_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/sharedtest"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/filedisc"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/worker"
)

// storiesDir is the shared stories260K directory.
func storiesDir(t testing.TB) string {
	t.Helper()
	return sharedtest.Path(t, sharedtest.Stories260K)
}

type running struct {
	*meshtest.Running
	client workerv1connect.WorkerServiceClient
}

func start(t testing.TB, role string, args ...string) running {
	t.Helper()
	args = append([]string{"-listen", "127.0.0.1:0", "-discovery", "none"}, args...)
	r := meshtest.Start(t, worker.Spec(role, "v0.0.0-test", "127.0.0.1:0"), args...)
	return running{Running: r, client: workerv1connect.NewWorkerServiceClient(client.NewHTTP(), r.URL())}
}

func req(model string, prompt []uint32, maxTokens uint32) *connect.Request[workerv1.GenerateRequest] {
	return connect.NewRequest(&workerv1.GenerateRequest{
		RequestId: "t", Model: model, TokenIds: prompt,
		Stop: &commonv1.StopConditions{MaxTokens: maxTokens},
	})
}

type result struct {
	tokens []uint32
	text   string
	last   *workerv1.GenerateResponse
}

func collect(t *testing.T, c workerv1connect.WorkerServiceClient, r *connect.Request[workerv1.GenerateRequest]) (result, error) {
	t.Helper()
	st, err := c.Generate(t.Context(), r)
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	var res result
	for st.Receive() {
		res.last = st.Msg()
		res.tokens = append(res.tokens, res.last.GetTokenIds()...)
		res.text += res.last.GetText()
	}
	return res, st.Err()
}

// direct runs the same request on an engine in the test process.
func direct(t *testing.T, exec *llama.Executor, prompt []uint32, maxTokens int) []uint32 {
	t.Helper()
	eng, err := engine.New(engine.Config{}, exec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	defer func() { cancel(); <-done; _ = eng.Close() }()
	st, err := eng.Submit(ctx, engine.Request{Prompt: prompt, Stop: engine.StopParams{MaxTokens: maxTokens}})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.TokenIDs...)
	}
}

func TestTinyRandomMatchesEngine(t *testing.T) {
	t.Parallel()
	w := start(t, "decode", "-seed", "7")
	exec, err := llama.NewTinyRandom(llama.Config{}, 7, llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prompt := exec.Tokenizer().Encode("hello worker", true, false)
	want := direct(t, exec, prompt, 24)
	got, err := collect(t, w.client, req(worker.TinyRandomName, prompt, 24))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.tokens, want) || len(want) == 0 {
		t.Fatalf("RPC tokens %v; engine gives %v", got.tokens, want)
	}
	if got.last.GetFinishReason() == workerv1.FinishReason_FINISH_REASON_UNSPECIFIED || got.last.GetUsage().GetPromptTokens() != uint32(len(prompt)) {
		t.Fatalf("final message %v; want a finish reason and usage", got.last)
	}
	if text := string(tokenizer.Decode(exec.Tokenizer(), prompt[len(prompt)-1], want)); got.text != text {
		t.Fatalf("RPC text %q; want %q", got.text, text)
	}
}

func TestStories260K(t *testing.T) {
	t.Parallel()
	dir := storiesDir(t)
	w := start(t, "decode", "-model", filepath.Join(dir, "stories260K.bin"))
	info, err := w.client.GetModelInfo(t.Context(), connect.NewRequest(&workerv1.GetModelInfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	tokFile, err := os.ReadFile(filepath.Join(dir, "tok512.bin"))
	if err != nil {
		t.Fatal(err)
	}
	m := info.Msg
	if m.GetModel() != "stories260K" || m.GetTokenizerKind() != worker.TokenizerLlama2c || !slices.Equal(m.GetTokenizer(), tokFile) || m.GetVocabSize() != 512 {
		t.Fatalf("GetModelInfo = model %q kind %q vocab %d, %d tokenizer bytes", m.GetModel(), m.GetTokenizerKind(), m.GetVocabSize(), len(m.GetTokenizer()))
	}
	// Tokenize as a frontend would, from the served tokenizer bytes.
	tok, err := tokenizer.ParseBPE(m.GetTokenizer(), int(m.GetVocabSize()))
	if err != nil {
		t.Fatal(err)
	}
	const start = "Once upon a time"
	got, err := collect(t, w.client, req("stories260K", tok.Encode(start, true, false), 40))
	if err != nil {
		t.Fatal(err)
	}
	const want = "Once upon a time, there was a little girl named Lily."
	if text := start + got.text; !strings.HasPrefix(text, want) {
		t.Fatalf("generated %q; want it to start %q", text, want)
	}
}

func TestSimExecutor(t *testing.T) {
	t.Parallel()
	w := start(t, "prefill", "-executor", "sim", "-sim-speedup", "0", "-sim-vocab", "1000", "-model-name", "mock")
	got, err := collect(t, w.client, req("mock", []uint32{1, 300, 999}, 16))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.tokens) != 16 || got.last.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
		t.Fatalf("sim gave %d tokens, finish %v; want 16, LENGTH", len(got.tokens), got.last.GetFinishReason())
	}
	_, err = collect(t, w.client, req("mock", []uint32{1000}, 1))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("token 1000 of vocab 1000: err %v; want InvalidArgument", err)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	w := start(t, "decode")
	for _, tc := range []struct {
		name string
		r    *connect.Request[workerv1.GenerateRequest]
		code connect.Code
		msg  string
	}{
		{"empty prompt", req(worker.TinyRandomName, nil, 4), connect.CodeInvalidArgument, "empty prompt"},
		{"token id >= vocab", req(worker.TinyRandomName, []uint32{1, 512}, 4), connect.CodeInvalidArgument, "prompt[1] = 512, vocabulary has 512"},
		{"max tokens 0", req(worker.TinyRandomName, []uint32{1, 5}, 0), connect.CodeInvalidArgument, "max tokens must be positive"},
		{"wrong model", req("gpt-5", []uint32{1, 5}, 4), connect.CodeNotFound, `model "gpt-5" is not served`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := collect(t, w.client, tc.r)
			var ce *connect.Error
			if connect.CodeOf(err) != tc.code || !asConnect(err, &ce) || !strings.Contains(ce.Message(), tc.msg) {
				t.Fatalf("err = %v; want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

func asConnect(err error, target **connect.Error) bool {
	ce := &connect.Error{}
	ok := errors.As(err, &ce)
	if ok {
		*target = ce
	}
	return ok
}

// Cancelling the RPC cancels the engine request and frees its KV blocks.
func TestCancelFreesBlocks(t *testing.T) {
	t.Parallel()
	// Real-time simulation (slowed down) keeps the request running.
	w := start(t, "decode", "-executor", "sim", "-sim-speedup", "0.1")
	ctx, cancel := context.WithCancel(t.Context())
	st, err := w.client.Generate(ctx, req("sim", make([]uint32, 100), 1000))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatalf("no first token: %v", st.Err())
	}
	load := getLoad(t, w)
	if load.GetRunningRequests() != 1 || load.GetKvBlocksUsed() == 0 {
		t.Fatalf("while generating: load %v; want 1 running holding blocks", load)
	}
	cancel()
	for st.Receive() {
	}
	if connect.CodeOf(st.Err()) != connect.CodeCanceled {
		t.Fatalf("stream ended with %v; want Canceled", st.Err())
	}
	// The engine frees blocks on its own goroutine.
	deptest.Eventually(t, 10*time.Second, "blocks freed", func() bool {
		l := getLoad(t, w)
		return l.GetRunningRequests() == 0 && l.GetKvBlocksUsed() == 0 && l.GetWaitingRequests() == 0
	})
}

func getLoad(t *testing.T, w running) *workerv1.GetLoadResponse {
	t.Helper()
	res, err := w.client.GetLoad(t.Context(), connect.NewRequest(&workerv1.GetLoadRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg
}

// The registration carries the model and KV geometry; InfoService serves
// them; /metrics exports the engine's state.
func TestRegistrationAndMetrics(t *testing.T) {
	t.Parallel()
	w := start(t, "decode", "-num-blocks", "128", "-block-size", "8")
	if _, err := collect(t, w.client, req(worker.TinyRandomName, []uint32{1, 70, 71, 72}, 4)); err != nil {
		t.Fatal(err)
	}
	info, err := meshv1connect.NewInfoServiceClient(client.NewHTTP(), w.URL()).GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	meta := info.Msg.GetMeta()
	if info.Msg.GetModel() != worker.TinyRandomName || meta["kv_blocks"] != "128" || meta["block_size"] != "8" ||
		meta["context_length"] != "512" || meta["executor"] != "llama" || meta["gpu_count"] == "" {
		t.Fatalf("GetInfo model %q meta %v", info.Msg.GetModel(), meta)
	}
	res, err := http.Get(w.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		"switchyard_worker_requests_running{", "switchyard_worker_requests_waiting{",
		"switchyard_worker_kv_blocks_used{", `switchyard_worker_kv_blocks_capacity{model="` + info.Msg.GetModel() + `"} 128`,
		"switchyard_worker_kv_usage_ratio{", `switchyard_worker_prompt_tokens_total{model="` + info.Msg.GetModel() + `"} 4`,
		"switchyard_worker_prefix_hit_tokens_total{", "switchyard_worker_generated_tokens_total{",
		"switchyard_worker_preemptions_total{", "switchyard_worker_step_time_seconds{",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestGRPCConformance(t *testing.T) {
	t.Parallel()
	w := start(t, "prefill", "-executor", "sim")
	meshtest.CheckGRPC(t, w.Addr, "prefill", "switchyard.worker.v1.WorkerService")
}

// Through a real discovery backend, the record carries the model and KV
// geometry before anyone can find the worker.
func TestFileDiscoveryRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start(t, "prefill", "-discovery", "file", "-discovery-dir", dir, "-executor", "sim", "-model-name", "mock", "-num-blocks", "64")
	reg, err := filedisc.New(filedisc.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var ins []discovery.Instance
	deptest.Eventually(t, 10*time.Second, "registration", func() bool { // it registers just after serving begins
		ins, err = reg.Instances(t.Context(), "prefill")
		return err == nil && len(ins) == 1
	})
	if in := ins[0]; in.Model != "mock" || in.Meta["kv_blocks"] != "64" || in.Meta["executor"] != "sim" || in.Meta["block_size"] != "16" {
		t.Fatalf("registered %+v", in)
	}
}

// GetLoad reports each KV tier's use beside the pool's: blocks a
// generation committed are offloaded to the host tier.
func TestGetLoadTiers(t *testing.T) {
	t.Parallel()
	w := start(t, "decode", "-num-blocks", "64", "-block-size", "8", "-kv-host-blocks", "16")
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(3 + i)
	}
	if _, err := collect(t, w.client, req(worker.TinyRandomName, prompt, 4)); err != nil {
		t.Fatal(err)
	}
	deptest.Eventually(t, 10*time.Second, "the host tier holding blocks", func() bool {
		tiers := getLoad(t, w).GetKvTiers()
		return len(tiers) == 1 && tiers[0].GetTier() == "host" && tiers[0].GetBlocksCapacity() == 16 && tiers[0].GetBlocksUsed() > 0
	})
}
