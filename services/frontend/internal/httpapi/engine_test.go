package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/sharedtest"
	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/upstream"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// The fake workers recite a script whatever the sampling; these tests
// need the sampling honoured. engineWorker is a WorkerService over the
// real engine (libs/engine), running either a deterministic random model
// of stories260K's shape with a byte tokenizer (vocabulary 512: ids 3 to
// 258 are the bytes, the rest decode to nothing; its logits are so peaked
// that sampling hardly varies) or the real stories260K from shared/, so
// penalties, logit_bias, seeds and formats act as they do on a worker.

const engineModel = "tiny-random"

type engineWorker struct {
	workerv1connect.UnimplementedWorkerServiceHandler
	eng  *engine.Engine
	info *workerv1.GetModelInfoResponse
	URL  string
}

// startEngineWorker serves the random model, or with stories the real
// stories260K (skipping without shared/), as engineModel.
func startEngineWorker(t testing.TB, stories bool) *engineWorker {
	t.Helper()
	var exec *llama.Executor
	var err error
	info := &workerv1.GetModelInfoResponse{Model: engineModel, ContextLength: uint32(llama.Stories260K.SeqLen), BlockSize: 16, TokenizerKind: "bytes"}
	if stories {
		dir := sharedtest.Path(t, sharedtest.Stories260K)
		tokPath := filepath.Join(dir, "tok512.bin")
		exec, err = llama.Open(filepath.Join(dir, "stories260K.bin"), tokPath, llama.Options{Name: engineModel})
		if err == nil {
			info.TokenizerKind = "llama2c"
			info.Tokenizer, err = os.ReadFile(tokPath)
		}
	} else {
		exec, err = llama.NewTinyRandom(llama.Config{}, 1, llama.Options{Name: engineModel})
	}
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{}, exec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tok := eng.Tokenizer()
	info.VocabSize, info.BosTokenId, info.EosTokenId = uint32(tok.VocabSize()), tok.BOS(), tok.EOS()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = eng.Run(ctx)
	}()
	w := &engineWorker{eng: eng, info: info}
	mux := http.NewServeMux()
	mux.Handle(workerv1connect.NewWorkerServiceHandler(w))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	w.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		_ = eng.Close()
	})
	return w
}

func (w *engineWorker) GetModelInfo(context.Context, *connect.Request[workerv1.GetModelInfoRequest]) (*connect.Response[workerv1.GetModelInfoResponse], error) {
	return connect.NewResponse(w.info), nil
}

func (w *engineWorker) Generate(ctx context.Context, req *connect.Request[workerv1.GenerateRequest], out *connect.ServerStream[workerv1.GenerateResponse]) error {
	m := req.Msg
	s := m.GetSampling()
	p := sample.Params{Temperature: s.GetTemperature(), TopP: s.GetTopP(), TopK: int(s.GetTopK()), Seed: s.Seed,
		PresencePenalty: s.GetPresencePenalty(), FrequencyPenalty: s.GetFrequencyPenalty(), LogitBias: s.GetLogitBias()}
	switch c := s.GetConstraint().GetKind().(type) {
	case *commonv1.OutputConstraint_JsonObject:
		p.Format.JSONObject = true
	case *commonv1.OutputConstraint_JsonSchema:
		p.Format.JSONSchema = c.JsonSchema
	}
	st, err := w.eng.Submit(ctx, engine.Request{ID: m.GetRequestId(), Prompt: m.GetTokenIds(), Sampling: p,
		Stop: engine.StopParams{MaxTokens: int(m.GetStop().GetMaxTokens()), StopStrings: m.GetStop().GetStop(),
			StopTokenIDs: m.GetStop().GetStopTokenIds(), IgnoreEOS: m.GetStop().GetIgnoreEos()}})
	if err != nil {
		ce := connect.NewError(connect.CodeInvalidArgument, err)
		if f := engine.InvalidField(err); f != "" {
			d, _ := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: f, Description: err.Error()}}})
			ce.AddDetail(d)
		}
		return ce
	}
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		msg := &workerv1.GenerateResponse{TokenIds: o.TokenIDs, Usage: &workerv1.Usage{PromptTokens: uint32(o.Usage.PromptTokens),
			CompletionTokens: uint32(o.Usage.CompletionTokens), CachedTokens: uint32(o.Usage.CachedPromptTokens)}}
		switch o.Finish {
		case engine.FinishStop:
			msg.FinishReason = workerv1.FinishReason_FINISH_REASON_STOP
		case engine.FinishLength:
			msg.FinishReason = workerv1.FinishReason_FINISH_REASON_LENGTH
		case engine.FinishCancelled, engine.FinishError:
			return connect.NewError(connect.CodeInternal, o.Err)
		}
		if err := out.Send(msg); err != nil {
			return err
		}
	}
}

// directRouter routes every request to one worker.
type directRouter struct{ url string }

func (d directRouter) Route(_ context.Context, req *routerv1.RouteRequest) (upstream.Routed, error) {
	return upstream.Routed{Resp: &routerv1.RouteResponse{Decode: &routerv1.Worker{InstanceId: "engine", Address: d.url}}}, nil
}
func (directRouter) PrefillDone(context.Context, string, string) {}
func (directRouter) Release(context.Context, string, string)     {}

// newEngineStack serves the API over one engine worker; it returns the
// API's base URL and the worker.
func newEngineStack(t testing.TB, stories bool) (string, *engineWorker) {
	t.Helper()
	w := startEngineWorker(t, stories)
	reg := upstreamtest.NewRegistry()
	reg.Set(discovery.RoleDecode, discovery.Instance{ID: "engine", Role: discovery.RoleDecode, Model: engineModel, Address: w.URL[len("http://"):]})
	workers := upstream.NewWorkers(upstream.NewHTTPClient())
	cat := catalog.New(catalog.Config{Registry: reg, Dialer: workers, Logger: slog.New(slog.DiscardHandler)})
	if err := cat.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Catalog: cat, Version: "test",
		Generator: generate.New(generate.Config{Router: directRouter{url: w.URL}, Dialer: workers})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return srv.URL, w
}
