package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

type errCase struct {
	name, path, body string
	status           int
	typ, param, code string
	retryAfter       bool
	noParam          bool // param must be null
}

func checkError(t *testing.T, resp *http.Response, tc errCase) {
	t.Helper()
	var body openai.ErrorBody
	decode(t, resp, &body)
	e := body.Error
	if resp.StatusCode != tc.status || e.Type != tc.typ || e.Message == "" {
		t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, e, tc.status, tc.typ)
	}
	if tc.param != "" && (e.Param == nil || *e.Param != tc.param) {
		t.Fatalf("param %v, want %q", e.Param, tc.param)
	}
	if tc.noParam && e.Param != nil {
		t.Fatalf("param %q, want none", *e.Param)
	}
	if tc.code != "" && (e.Code == nil || *e.Code != tc.code) {
		t.Fatalf("code %v, want %q", e.Code, tc.code)
	}
	if got := resp.Header.Get("Retry-After"); tc.retryAfter != (got != "") {
		t.Fatalf("Retry-After %q", got)
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1", Context: 64}}, maxBody: 1 << 10})
	const inv = openai.TypeInvalidRequest
	chat, cmpl := "/v1/chat/completions", "/v1/completions"
	tests := []errCase{
		{name: "malformed json", path: chat, body: `{"model":`, status: 400, typ: inv},
		{name: "wrong type", path: chat, body: `{"model":"tiny","messages":"hi"}`, status: 400, typ: inv, param: "messages"},
		{name: "unknown model", path: chat, body: `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, status: 404, typ: inv, code: "model_not_found"},
		{name: "prompt over context", path: cmpl, body: `{"model":"tiny","prompt":"` + strings.Repeat("a", 70) + `"}`, status: 400, typ: inv, code: "context_length_exceeded", param: "prompt"},
		{name: "prompt over context with max_tokens", path: cmpl, body: `{"model":"tiny","prompt":"` + strings.Repeat("a", 70) + `","max_tokens":1}`, status: 400, typ: inv, code: "context_length_exceeded", param: "prompt"},
		{name: "messages over context", path: chat, body: `{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("a", 70) + `"}]}`, status: 400, typ: inv, code: "context_length_exceeded", param: "messages"},
		{name: "max_tokens over context", path: cmpl, body: `{"model":"tiny","prompt":"abc","max_tokens":61}`, status: 400, typ: inv, code: "context_length_exceeded", param: "max_tokens"},
		{name: "max_completion_tokens over context", path: chat, body: chatBody(`"max_completion_tokens":60`), status: 400, typ: inv, code: "context_length_exceeded", param: "max_completion_tokens"},
		{name: "body too large", path: cmpl, body: `{"model":"tiny","prompt":"` + strings.Repeat("a", 2000) + `"}`, status: 413, typ: inv, code: "request_too_large"},
		{name: "temperature", path: chat, body: chatBody(`"temperature":3`), status: 400, typ: inv, param: "temperature"},
		{name: "top_p", path: chat, body: chatBody(`"top_p":1.5`), status: 400, typ: inv, param: "top_p"},
		{name: "max_tokens", path: chat, body: chatBody(`"max_tokens":0`), status: 400, typ: inv, param: "max_tokens"},
		{name: "model name too long", path: cmpl, body: `{"model":"` + strings.Repeat("m", openai.MaxModelLen+1) + `","prompt":"x"}`, status: 400, typ: inv, param: "model"},
		{name: "n", path: chat, body: chatBody(`"n":9`), status: 400, typ: inv, param: "n"},
		{name: "top_logprobs without logprobs", path: chat, body: chatBody(`"top_logprobs":2`), status: 400, typ: inv, param: "top_logprobs"},
		{name: "completion logprobs", path: cmpl, body: `{"model":"tiny","prompt":"x","logprobs":6}`, status: 400, typ: inv, param: "logprobs"},
		{name: "token beyond vocab", path: cmpl, body: `{"model":"tiny","prompt":[1,5000]}`, status: 400, typ: inv, param: "prompt"},
		{name: "two prompts", path: cmpl, body: `{"model":"tiny","prompt":["a","b"]}`, status: 400, typ: inv, param: "prompt"},
		{name: "unknown endpoint", path: "/v1/embeddings", body: `{}`, status: 404, typ: inv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkError(t, s.post(t, tc.path, tc.body), tc)
		})
	}
}

func TestUpstreamErrors(t *testing.T) {
	t.Parallel()
	unavailable := errCase{status: 503, typ: openai.TypeServer, code: "service_unavailable", retryAfter: true}
	tests := []struct {
		name  string
		cfg   stackConfig
		route *connect.Error
		extra string // more request fields, after a comma
		want  errCase
	}{
		{name: "no router", cfg: stackConfig{noRouter: true}, want: unavailable},
		{name: "router unavailable", route: connect.NewError(connect.CodeUnavailable, errors.New("down")), want: unavailable},
		{name: "router says unknown model", route: connect.NewError(connect.CodeNotFound, errors.New("no")), want: errCase{status: 404, typ: openai.TypeInvalidRequest, code: "model_not_found"}},
		{name: "router knows no pinned worker", route: connect.NewError(connect.CodeNotFound, errors.New(`worker "w9" is unknown`)), extra: `,"switchyard":{"worker_id":"w9"}`,
			want: errCase{status: 404, typ: openai.TypeInvalidRequest, code: "worker_not_found", param: "switchyard.worker_id"}},
		{name: "worker rejects", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", GenerateErr: connect.NewError(connect.CodeInvalidArgument, errors.New("bad seed"))}}},
			want: errCase{status: 400, typ: openai.TypeInvalidRequest}},
		// A worker names the refused field in a BadRequest detail; the
		// parameter is the OpenAI one behind it.
		{name: "worker refuses logprobs", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", GenerateErr: fieldError(t, "sampling.logprobs", "logprobs need an executor that computes logits")}}},
			want: errCase{status: 400, typ: openai.TypeInvalidRequest, param: "logprobs"}},
		{name: "worker refuses max tokens", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", GenerateErr: fieldError(t, "stop.max_tokens", "too many")}}},
			want: errCase{status: 400, typ: openai.TypeInvalidRequest, param: "max_tokens"}},
		// ... as the client spelled it.
		{name: "worker refuses max completion tokens", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", GenerateErr: fieldError(t, "stop.max_tokens", "too many")}}},
			extra: `,"max_completion_tokens":5`, want: errCase{status: 400, typ: openai.TypeInvalidRequest, param: "max_completion_tokens"}},
		{name: "worker refuses max tokens by name", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", GenerateErr: fieldError(t, "stop.max_tokens", "too many")}}},
			extra: `,"max_tokens":5`, want: errCase{status: 400, typ: openai.TypeInvalidRequest, param: "max_tokens"}},
		{name: "worker refuses a field with no OpenAI name", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", GenerateErr: fieldError(t, "token_ids", "prompt too long")}}},
			want: errCase{status: 400, typ: openai.TypeInvalidRequest, noParam: true}},
		{name: "worker keeps dying", cfg: stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", DieAfter: 0, GenerateErr: connect.NewError(connect.CodeUnavailable, errors.New("gone"))}}},
			want: unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, tc.cfg)
			if tc.route != nil {
				s.Router.FailWith(tc.route)
			}
			for _, stream := range []string{`"stream":false`, `"stream":true`} {
				checkError(t, s.post(t, "/v1/chat/completions", chatBody(stream+tc.extra)), tc.want)
			}
		})
	}
}

// fieldError is a worker's InvalidArgument naming field in a
// google.rpc.BadRequest detail, as libs/worker/wire sends it.
func fieldError(t *testing.T, field, msg string) *connect.Error {
	t.Helper()
	ce := connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	d, err := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}})
	if err != nil {
		t.Fatal(err)
	}
	ce.AddDetail(d)
	return ce
}

func TestAuthAndRateLimit(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{guard: auth.New(auth.Config{Keys: []string{"sk-a", "sk-b"}, Rate: 0.001, Burst: 2})})
	unauth := errCase{status: 401, typ: openai.TypeAuthentication, code: "invalid_api_key"}
	checkError(t, s.post(t, "/v1/chat/completions", chatBody("")), unauth)
	checkError(t, s.post(t, "/v1/chat/completions", chatBody(""), "Authorization", "Bearer nope"), unauth)
	for range 2 {
		if resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":2`), "Authorization", "Bearer sk-a"); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":2`), "Authorization", "Bearer sk-a")
	checkError(t, resp, errCase{status: 429, typ: openai.TypeRateLimit, code: "rate_limit_exceeded", retryAfter: true})
	if resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":2`), "Authorization", "Bearer sk-b"); resp.StatusCode != http.StatusOK {
		t.Fatalf("other key: status %d", resp.StatusCode)
	}
	// The OpenAPI document needs no key.
	r, err := http.Get(s.URL + "/openapi.json")
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("openapi: %v %v", r, err)
	}
	r.Body.Close()
}

// A long text past the context is refused by its length in bytes, before
// it is tokenized, with the same code and a bound instead of a count; a
// short one is still counted exactly.
func TestTextPastContextRefusedUntokenized(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1", Context: 64}}})
	long := strings.Repeat("ab", quickCountBytes/2+1)
	for _, body := range []string{
		`{"model":"tiny","prompt":"` + long + `"}`,
		`{"model":"tiny","messages":[{"role":"user","content":"` + long + `"}]}`,
	} {
		path := "/v1/completions"
		if strings.Contains(body, "messages") {
			path = "/v1/chat/completions"
		}
		resp := s.post(t, path, body)
		var e openai.ErrorBody
		decode(t, resp, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code == nil || *e.Error.Code != "context_length_exceeded" || !strings.Contains(e.Error.Message, "at least") {
			t.Fatalf("%s: %d %+v", path, resp.StatusCode, e.Error)
		}
	}
	resp := s.post(t, "/v1/completions", `{"model":"tiny","prompt":"abc","max_tokens":61}`)
	var e openai.ErrorBody
	decode(t, resp, &e)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, "4 in the prompt") {
		t.Fatalf("exact count: %d %+v", resp.StatusCode, e.Error)
	}
}
