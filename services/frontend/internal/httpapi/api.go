// Package httpapi serves the frontend's OpenAI-compatible HTTP API:
// /v1/chat/completions, /v1/completions, /v1/models, /tokenize,
// /detokenize and /openapi.json.
//
// Handlers decode and check the request (package openai), resolve the
// model and its tokenizer (package catalog), fit the request to the
// model's context, and hand a tokenized generation to package generate;
// they only translate between HTTP and those packages. Every failure
// leaves as OpenAI's error envelope with the status an OpenAI client
// expects, and a streamed request answers with an HTTP error status, not a
// broken stream, whenever it fails before its first token.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/chattmpl"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/metrics"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/openapi"
	"switchyard.dev/services/frontend/internal/reqtrace"
)

// Catalog resolves models (catalog.Catalog).
type Catalog interface {
	Get(ctx context.Context, model string) (*catalog.Model, error)
	Models(ctx context.Context) []catalog.Entry
}

// Generator runs generations (generate.Generator).
type Generator interface {
	Run(ctx context.Context, req generate.Request, emit func(generate.Delta) error) (generate.Result, error)
}

// Config configures the API.
type Config struct {
	Catalog   Catalog
	Generator Generator
	Metrics   *metrics.Metrics
	Templates *chattmpl.Set
	// Guard checks API keys and rate limits; nil lets everything through.
	Guard *auth.Guard
	// Traces keeps the timelines of sampled requests for the console;
	// nil samples none.
	Traces *reqtrace.Ring
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// RequestTimeout bounds one generation; 0 means none.
	RequestTimeout time.Duration
	Version        string
	Now            func() time.Time
	// Aliases are more names of served models (alias → model;
	// ParseAliases).
	Aliases map[string]string
}

// API is the HTTP handler of the OpenAI-compatible API.
type API struct {
	cfg     Config
	mux     *http.ServeMux
	handler http.Handler // mux, with request ids
	openapi []byte
}

// Endpoint labels for metrics.
const (
	epChat        = "chat_completions"
	epCompletions = "completions"
	epModels      = "models"
	epTokenize    = "tokenize"
	epDetokenize  = "detokenize"
)

// New builds the API.
func New(cfg Config) (*API, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Templates == nil {
		cfg.Templates, _ = chattmpl.Parse("")
	}
	doc, err := json.MarshalIndent(openapi.Document("Switchyard OpenAI-compatible API", cfg.Version, Operations(), reflect.TypeFor[openai.ErrorBody]()), "", "  ")
	if err != nil {
		return nil, err
	}
	if len(cfg.Aliases) > 0 {
		cfg.Catalog = aliased{Catalog: cfg.Catalog, names: cfg.Aliases}
	}
	a := &API{cfg: cfg, mux: http.NewServeMux(), openapi: doc}
	a.mux.Handle("POST /v1/chat/completions", a.instrument(epChat, a.guard(http.HandlerFunc(a.chat))))
	a.mux.Handle("POST /v1/completions", a.instrument(epCompletions, a.guard(http.HandlerFunc(a.completions))))
	a.mux.Handle("GET /v1/models", a.instrument(epModels, a.guard(http.HandlerFunc(a.models))))
	// {model...}: model ids may hold slashes ("org/name"), and the SDKs put
	// them in the path as they are.
	a.mux.Handle("GET /v1/models/{model...}", a.instrument(epModels, a.guard(http.HandlerFunc(a.model))))
	a.mux.HandleFunc("GET /openapi.json", a.serveOpenAPI)
	a.mux.Handle("POST /tokenize", a.instrument(epTokenize, a.guard(http.HandlerFunc(a.tokenize))))
	a.mux.Handle("POST /detokenize", a.instrument(epDetokenize, a.guard(http.HandlerFunc(a.detokenize))))
	a.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Message: "Unknown endpoint " + r.Method + " " + r.URL.Path + "."})
	})
	a.handler = reqid.Handler(a.mux)
	return a, nil
}

// Patterns are the paths to mount the API under on a shared mux.
var Patterns = []string{"/v1/", "GET /openapi.json", "POST /tokenize", "POST /detokenize"}

// ServeHTTP implements http.Handler. Every request has an id (package
// reqid): the client's X-Request-Id when it is usable, else a new one. It
// is echoed in the response's X-Request-Id header, on errors and streams
// too, logged as request_id on every line of the request, and sent to the
// router and the workers with every call made for it.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Operations describe the endpoints for the OpenAPI document.
func Operations() []openapi.Operation {
	gen := []int{400, 401, 404, 413, 429, 500, 503}
	return []openapi.Operation{
		{Method: "POST", Path: "/v1/chat/completions", ID: "createChatCompletion", Summary: "Create a chat completion",
			Request: reflect.TypeFor[openai.ChatRequest](), Response: reflect.TypeFor[openai.ChatCompletion](), Stream: reflect.TypeFor[openai.ChatChunk](), Errors: gen},
		{Method: "POST", Path: "/v1/completions", ID: "createCompletion", Summary: "Create a completion",
			Request: reflect.TypeFor[openai.CompletionRequest](), Response: reflect.TypeFor[openai.Completion](), Stream: reflect.TypeFor[openai.Completion](), Errors: gen},
		{Method: "GET", Path: "/v1/models", ID: "listModels", Summary: "List the models served by healthy workers",
			Response: reflect.TypeFor[openai.ModelList](), Errors: []int{401, 429}},
		{Method: "GET", Path: "/v1/models/{model}", ID: "retrieveModel", Summary: "Retrieve a model",
			Response: reflect.TypeFor[openai.Model](), Errors: []int{401, 404, 429}},
		{Method: "POST", Path: "/tokenize", ID: "tokenize", Summary: "Tokenize a prompt or chat messages with the model's tokenizer (vLLM's shape)",
			Request: reflect.TypeFor[openai.TokenizeRequest](), Response: reflect.TypeFor[openai.TokenizeResponse](), Errors: []int{400, 401, 404, 413, 429}},
		{Method: "POST", Path: "/detokenize", ID: "detokenize", Summary: "Decode token ids to text with the model's tokenizer (vLLM's shape)",
			Request: reflect.TypeFor[openai.DetokenizeRequest](), Response: reflect.TypeFor[openai.DetokenizeResponse](), Errors: []int{400, 401, 404, 413, 429}},
	}
}

func (a *API) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.openapi)
}

func (a *API) guard(next http.Handler) http.Handler {
	if a.cfg.Guard == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := a.cfg.Guard.Admit(r)
		if err != nil {
			a.writeError(w, err)
			return
		}
		defer t.Done()
		next.ServeHTTP(w, r.WithContext(auth.WithTicket(r.Context(), t)))
	})
}

func (a *API) models(w http.ResponseWriter, r *http.Request) {
	list := openai.ModelList{Object: openai.ObjectList, Data: []openai.Model{}}
	for _, e := range a.cfg.Catalog.Models(r.Context()) {
		list.Data = append(list.Data, modelObject(e))
	}
	writeJSON(w, http.StatusOK, list)
}

func (a *API) model(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	for _, e := range a.cfg.Catalog.Models(r.Context()) {
		if e.Name == name {
			writeJSON(w, http.StatusOK, modelObject(e))
			return
		}
	}
	a.writeError(w, openai.ModelNotFound(name))
}

func modelObject(e catalog.Entry) openai.Model {
	return openai.Model{ID: e.Name, Object: openai.ObjectModel, Created: e.Created.Unix(), OwnedBy: "switchyard"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID(prefix string) string { return prefix + rand.Text() }
