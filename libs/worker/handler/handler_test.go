package handler_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/worker/handler"
)

const model = "sim-test"

// fixture is a handler over a running zero-time simulated engine, served
// over HTTP to a Connect client.
type fixture struct {
	eng    *engine.Engine
	h      *handler.Handler
	client workerv1connect.WorkerServiceClient
}

func newFixture(t *testing.T, cfg engine.Config) *fixture {
	t.Helper()
	exec, err := sim.New(sim.Config{Name: model, VocabSize: 512, ContextLen: 512})
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureExec(t, cfg, exec)
}

func newFixtureExec(t *testing.T, cfg engine.Config, exec executor.Executor) *fixture {
	t.Helper()
	eng, err := engine.New(cfg, exec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	h := handler.New(handler.Config{Engine: eng, Model: model, TokenizerKind: "bytes"})
	mux := http.NewServeMux()
	mux.Handle(workerv1connect.NewWorkerServiceHandler(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		_ = eng.Close()
	})
	return &fixture{eng: eng, h: h, client: workerv1connect.NewWorkerServiceClient(srv.Client(), srv.URL)}
}

func prompt(n int, base uint32) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = base + uint32(i%200)
	}
	return p
}

func genReq(tokens []uint32, maxTokens uint32) *workerv1.GenerateRequest {
	return &workerv1.GenerateRequest{Model: model, TokenIds: tokens, Stop: &commonv1.StopConditions{MaxTokens: maxTokens}}
}

// generate runs one request to its end and returns the tokens and the
// final message.
func generate(t *testing.T, c workerv1connect.WorkerServiceClient, req *workerv1.GenerateRequest) ([]uint32, *workerv1.GenerateResponse, error) {
	t.Helper()
	st, err := c.Generate(t.Context(), connect.NewRequest(req))
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	var toks []uint32
	var last *workerv1.GenerateResponse
	for st.Receive() {
		last = st.Msg()
		toks = append(toks, last.GetTokenIds()...)
	}
	return toks, last, st.Err()
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, engine.Config{})
	for _, tc := range []struct {
		name string
		req  *workerv1.GenerateRequest
		code connect.Code
		msg  string
		// field is the GenerateRequest field the BadRequest detail
		// names ("" for none).
		field string
	}{
		{"empty prompt", genReq(nil, 4), connect.CodeInvalidArgument, "empty prompt", "token_ids"},
		{"token out of vocabulary", genReq([]uint32{1, 512}, 4), connect.CodeInvalidArgument, "prompt[1] = 512, vocabulary has 512", "token_ids"},
		{"max tokens zero", genReq([]uint32{1, 5}, 0), connect.CodeInvalidArgument, "max tokens must be positive: got 0", "stop.max_tokens"},
		{"prompt too long", genReq(prompt(600, 3), 4), connect.CodeInvalidArgument, "prompt too long", "token_ids"},
		{"bad top_p", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{TopP: 2}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "top_p 2", "sampling"},
		{"empty stop string", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Stop: &commonv1.StopConditions{MaxTokens: 1, Stop: []string{""}}}, connect.CodeInvalidArgument, "empty stop string", "stop.stop"},
		{"wrong model", &workerv1.GenerateRequest{Model: "llama-70b", TokenIds: []uint32{1}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeNotFound, `model "llama-70b" is not served by this worker (it serves "sim-test")`, ""},
		{"no model", &workerv1.GenerateRequest{TokenIds: []uint32{1}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "model is required", ""},
		{"logprobs from the sim", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{Logprobs: true}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "logprobs need an executor that computes logits", "sampling.logprobs"},
		{"presence penalty", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{PresencePenalty: 0.5}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "penalties, logit bias and formats need an executor that computes logits: sampling.presence_penalty", "sampling.presence_penalty"},
		{"frequency penalty", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{FrequencyPenalty: -1}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "penalties, logit bias and formats need an executor that computes logits: sampling.frequency_penalty", "sampling.frequency_penalty"},
		{"logit bias", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{LogitBias: map[uint32]float32{5: 10}}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "penalties, logit bias and formats need an executor that computes logits: sampling.logit_bias", "sampling.logit_bias"},
		{"output constraint", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonObject{JsonObject: &commonv1.JsonObject{}}}}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "penalties, logit bias and formats need an executor that computes logits: sampling.constraint", "sampling.constraint"},
		{"constraint without a kind", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{}}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "sampling.constraint names no kind", "sampling.constraint"},
		{"empty json schema", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonSchema{}}}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "sampling.constraint has an empty json_schema", "sampling.constraint"},
		{"top_logprobs over 20", &workerv1.GenerateRequest{Model: model, TokenIds: []uint32{1}, Sampling: &commonv1.SamplingParams{Logprobs: true, TopLogprobs: 21}, Stop: &commonv1.StopConditions{MaxTokens: 1}}, connect.CodeInvalidArgument, "top_logprobs 21", "sampling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := generate(t, f.client, tc.req)
			assertCode(t, err, tc.code, tc.msg)
			if got := badRequestField(err); got != tc.field {
				t.Errorf("BadRequest field = %q; want %q", got, tc.field)
			}
		})
	}
}

func assertCode(t *testing.T, err error, code connect.Code, msg string) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("err = %v; want code %v", err, code)
	}
	var ce *connect.Error
	if msg != "" && (!errors.As(err, &ce) || !contains(ce.Message(), msg)) {
		t.Fatalf("err = %v; want message containing %q", err, msg)
	}
}

// badRequestField is the field of err's google.rpc.BadRequest detail.
func badRequestField(err error) string {
	ce, ok := errors.AsType[*connect.Error](err)
	if !ok {
		return ""
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if br, ok := v.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
				return br.GetFieldViolations()[0].GetField()
			}
		}
	}
	return ""
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The final message carries the finish reason and usage; a repeated
// prompt reports its full blocks as cached.
func TestGenerateUsageAndPrefixHit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, engine.Config{BlockSize: 16})
	p := prompt(40, 3)
	for i, wantCached := range []uint32{0, 32} {
		toks, last, err := generate(t, f.client, genReq(p, 5))
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) != 5 || last.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
			t.Fatalf("run %d: %d tokens, finish %v; want 5, LENGTH", i, len(toks), last.GetFinishReason())
		}
		u := last.GetUsage()
		if u.GetPromptTokens() != 40 || u.GetCompletionTokens() != 5 || u.GetCachedTokens() != wantCached {
			t.Fatalf("run %d: usage %v; want prompt 40, completion 5, cached %d", i, u, wantCached)
		}
	}
}

func TestGetModelInfoAndLoad(t *testing.T) {
	t.Parallel()
	f := newFixture(t, engine.Config{BlockSize: 16, NumBlocks: 64})
	info, err := f.client.GetModelInfo(t.Context(), connect.NewRequest(&workerv1.GetModelInfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	m := info.Msg
	if m.GetModel() != model || m.GetVocabSize() != 512 || m.GetBlockSize() != 16 || m.GetContextLength() != 512 ||
		m.GetBosTokenId() != 1 || m.GetEosTokenId() != 2 || m.GetTokenizerKind() != "bytes" || len(m.GetTokenizer()) != 0 {
		t.Fatalf("GetModelInfo = %v", m)
	}
	load, err := f.client.GetLoad(t.Context(), connect.NewRequest(&workerv1.GetLoadRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if l := load.Msg; l.GetKvBlocksTotal() != 64 || l.GetKvBlocksUsed() != 0 || l.GetRunningRequests() != 0 || l.GetPendingPrefillTokens() != 0 {
		t.Fatalf("GetLoad = %v", l)
	}
}

// Drain refuses new generations, ends event streams with Unavailable and
// returns once in-flight generations are done.
func TestDrain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, engine.Config{})
	sub, err := f.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if !sub.Receive() || !sub.Msg().GetDump() {
		t.Fatalf("first message %v, err %v; want the dump", sub.Msg(), sub.Err())
	}
	if err := f.h.Drain(t.Context()); err != nil {
		t.Fatalf("Drain with nothing in flight: %v", err)
	}
	for sub.Receive() {
	}
	assertCode(t, sub.Err(), connect.CodeUnavailable, "shutting down")
	_, _, err = generate(t, f.client, genReq([]uint32{1, 5}, 3))
	assertCode(t, err, connect.CodeUnavailable, "shutting down")
}

// Logprobs come one per token, however the handler coalesced the engine's
// outputs into messages, with the top entries asked for.
func TestGenerateLogprobs(t *testing.T) {
	t.Parallel()
	tiny, err := llama.NewRandom(llama.Config{Dim: 16, HiddenDim: 32, NLayers: 1, NHeads: 2, NKVHeads: 2, VocabSize: 300, SeqLen: 256}, 3)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.NewBytes(300)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := llama.New(tiny, tok, llama.Options{Name: model})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureExec(t, engine.Config{}, exec)
	req := genReq(prompt(20, 40), 30)
	req.Stop.IgnoreEos = true
	req.Sampling = &commonv1.SamplingParams{Logprobs: true, TopLogprobs: 3}
	st, err := f.client.Generate(t.Context(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		m := st.Msg()
		if len(m.GetLogprobs()) != len(m.GetTokenIds()) {
			t.Fatalf("message with %d tokens and %d logprobs", len(m.GetTokenIds()), len(m.GetLogprobs()))
		}
		for i, lp := range m.GetLogprobs() {
			top := lp.GetTop()
			if len(top) != 3 || top[0].GetTokenId() != m.GetTokenIds()[i] || top[0].GetLogprob() != lp.GetLogprob() || lp.GetLogprob() > 0 {
				t.Fatalf("token %d: %v, want greedy = top entry", m.GetTokenIds()[i], lp)
			}
		}
		n += len(m.GetTokenIds())
	}
	if err := st.Err(); err != nil || n != 30 {
		t.Fatalf("%d tokens, err %v", n, err)
	}
}
